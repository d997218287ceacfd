"""Block reconstruction (+BR, issue 45 item 1): masks fixed, error never above its start,
the objective against an independent reference, resume per block, offload, CLI."""

import json
import os

import pytest
import torch

import sparseopt_torch.prune as prune_mod
import sparseopt_torch.reconstruct as reconstruct_mod
from _models import save_tiny_model, tiny_config
from sparseopt.cli import main
from sparseopt.patterns import NM
from sparseopt_torch.layers import find_layers, get_weight
from sparseopt_torch.models import load_model
from sparseopt_torch.prune import prune_model

STEPS, LR = 15, 1e-3


#: The block list of each architecture the tests build: a decoder (causal attention mask) and
#: an encoder (MiniLM's BERT: bidirectional attention, the padding as an additive mask).
PREFIX = {"llama": "model.layers", "bert": "encoder.layer"}


def _tiny(arch, layers=2, dtype=torch.float32, seed=0):
    from transformers import AutoModel, AutoModelForCausalLM

    torch.manual_seed(seed)
    auto = AutoModel if arch == "bert" else AutoModelForCausalLM
    return auto.from_config(tiny_config(arch, layers=layers)).to(dtype).eval()


def _llama(layers=2, dtype=torch.float32, seed=0):
    return _tiny("llama", layers, dtype, seed)


def _batches(n=3, batch=2, seq=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        mask = torch.ones(batch, seq, dtype=torch.long)
        mask[0, seq - 3:] = 0  # padding: not data
        out.append({"input_ids": torch.randint(5, 30522, (batch, seq), generator=g),
                    "attention_mask": mask})
    return out


def _saved(out, name):
    from safetensors.torch import load_file

    return load_file(os.path.join(out, "layers", f"{name}.safetensors"))


def _block0_error(model, dense, batches):
    """E of block 0 (mean over non-padding tokens of ||h1 - h1_dense||^2) from the whole
    models' hidden states: an independent reference of the objective."""
    total, tokens = 0.0, 0
    with torch.no_grad():
        for b in batches:
            h = model(**b, output_hidden_states=True).hidden_states[1]
            d = dense(**b, output_hidden_states=True).hidden_states[1]
            keep = b["attention_mask"].bool()
            total += float(((h - d)[keep].double() ** 2).sum())
            tokens += int(keep.sum())
    return total / tokens


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sequential", [False, True])
@pytest.mark.parametrize("arch", ["llama", "bert"])
def test_masks_fixed_and_error_decreases(tmp_path, arch, dtype, sequential):
    """Magnitude masks on a tiny Llama and a tiny BERT (the encoder of the minilm preset):
    every pruned weight stays zero (the support of the final weights is that of the
    method's), every layer 2:4, each block's error ends below its start, and block 0's
    start and end errors equal those of the whole models' hidden states over the non-padding
    tokens (an encoder's padding rows are computed but are not data)."""
    out = str(tmp_path / "run")
    batches = _batches()
    model = _tiny(arch, dtype=dtype)
    res = prune_model(model, batches, method="magnitude", block_steps=STEPS, block_lr=LR,
                      sequential=sequential, out=out, progress=False)
    assert [b.name for b in res.blocks] == [f"{PREFIX[arch]}.0", f"{PREFIX[arch]}.1"]
    for b in res.blocks:
        assert b.kept == "end" and b.error_end < b.error_start, b
        assert len(b.curve) == STEPS and b.steps == STEPS
    changed = 0
    for rec in res.records:
        t = _saved(out, rec.name)
        W, W0 = t["W"], t["W_nogd"]
        assert W.dtype == dtype
        assert torch.equal(W != 0, W0 != 0), rec.name  # the mask never changed
        assert NM(2, 4).satisfied(W.numpy()), rec.name
        changed += int(not torch.equal(W, W0))
        assert torch.equal(W, get_weight(find_layers(model, [rec.name])[rec.name]))
    assert changed == len(res.records)  # every pruned layer was fitted
    # block 0 sees the dense inputs in both modes: its errors from the whole models
    dense = _tiny(arch, dtype=dtype)
    start = _tiny(arch, dtype=dtype)
    for rec in res.records:
        if rec.block == f"{PREFIX[arch]}.0":
            with torch.no_grad():
                W0 = _saved(out, rec.name)["W_nogd"]
                find_layers(start, [rec.name])[rec.name].weight.copy_(W0)
    b0 = res.blocks[0]
    assert b0.error_start == pytest.approx(_block0_error(start, dense, batches), rel=1e-4)
    assert b0.error_end == pytest.approx(_block0_error(model, dense, batches), rel=1e-4)
    report = json.load(open(os.path.join(out, "report.json")))
    assert [b["name"] for b in report["blocks"]] == [b.name for b in res.blocks]
    assert json.load(open(os.path.join(out, "run.json")))["block_steps"] == STEPS


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sequential", [False, True])
def test_masks_fixed_and_error_decreases_on_cuda(tmp_path, dtype, sequential):
    """The same on CUDA (blocks streamed to the GPU, +BR's steps there): every pruned weight
    stays zero, every layer 2:4, each block's error ends below its start."""
    out = str(tmp_path / "run")
    model = _llama(dtype=dtype)
    res = prune_model(model, _batches(), method="magnitude", block_steps=STEPS, block_lr=LR,
                      sequential=sequential, out=out, device="cuda", progress=False)
    for b in res.blocks:
        assert b.kept == "end" and b.error_end < b.error_start, b
    for rec in res.records:
        assert rec.device.startswith("cuda"), rec
        t = _saved(out, rec.name)
        W, W0 = t["W"], t["W_nogd"]
        assert W.dtype == dtype
        assert torch.equal(W != 0, W0 != 0), rec.name
        assert not torch.equal(W, W0), rec.name  # fitted
        assert NM(2, 4).satisfied(W.numpy()), rec.name


def test_a_worse_fit_is_undone():
    """A learning rate far too large makes the last iterate worse: the start is kept, so
    the error never ends above its start."""
    res = prune_model(_llama(1), _batches(), method="magnitude", block_steps=5,
                      block_lr=10.0, progress=False)
    (b,) = res.blocks
    assert b.kept == "start" and b.error_end == b.error_start
    assert max(b.curve) > b.error_start  # the steps did go astray


def test_an_unmasked_step_is_caught(monkeypatch):
    """Mutation: without the masking of gradients and weights, Adam fills pruned weights;
    the check after the step raises instead of letting a mask change."""
    monkeypatch.setattr(reconstruct_mod, "_mask_", lambda tensors, masks: None)
    with pytest.raises(RuntimeError, match="made a pruned weight of layer .* non-zero"):
        prune_model(_llama(1), _batches(), method="magnitude", block_steps=2, block_lr=LR,
                    progress=False)


def test_without_the_masking_the_pattern_check_fails(monkeypatch):
    """Mutation: with the re-masking and the per-step check both removed, Adam moves pruned
    weights off zero and the 2:4 check after the block's fit refuses the result."""
    monkeypatch.setattr(reconstruct_mod, "_mask_", lambda tensors, masks: None)
    monkeypatch.setattr(reconstruct_mod, "_check_masks", lambda *args: None)
    with pytest.raises(RuntimeError, match="left layer .* off the pattern 2:4"):
        prune_model(_llama(1), _batches(), method="magnitude", block_steps=2, block_lr=LR,
                    progress=False)


@pytest.mark.parametrize("sequential", [False, True])
def test_resume_after_an_interruption_is_bit_identical(tmp_path, sequential, monkeypatch):
    """Stopped after block 1's reconstructed layers were saved but before its record: the
    rerun keeps block 0 (not fitted again), prunes and fits block 1 again, and every saved
    weight and record equals an uninterrupted run's."""
    kw = dict(method="wanda", refine_steps=2, block_steps=STEPS, block_lr=LR,
              sequential=sequential, progress=False)
    whole = str(tmp_path / "whole")
    prune_model(_llama(3), _batches(), out=whole, **kw)
    part = str(tmp_path / "part")
    save_block = prune_mod.save_block

    def stop_at_block_1(out, record):
        if record["name"] == "model.layers.1":
            raise KeyboardInterrupt
        save_block(out, record)

    monkeypatch.setattr(prune_mod, "save_block", stop_at_block_1)
    with pytest.raises(KeyboardInterrupt):
        prune_model(_llama(3), _batches(), out=part, **kw)
    monkeypatch.setattr(prune_mod, "save_block", save_block)
    assert os.path.exists(os.path.join(part, "layers", "model.layers.1.mlp.down_proj.json"))
    fitted = []
    fit = prune_mod.reconstruct_block
    monkeypatch.setattr(prune_mod, "reconstruct_block",
                        lambda *a, **k: fitted.append(k["name"]) or fit(*a, **k))
    res = prune_model(_llama(3), _batches(), out=part, **kw)
    assert fitted == ["model.layers.1", "model.layers.2"]
    for rec in res.records:
        a, b = _saved(whole, rec.name), _saved(part, rec.name)
        assert torch.equal(a["W"], b["W"]) and torch.equal(a["W_nogd"], b["W_nogd"]), rec.name
    ra = json.load(open(os.path.join(whole, "report.json")))
    rb = json.load(open(os.path.join(part, "report.json")))
    strip = lambda bs: [{k: v for k, v in b.items() if k != "time"} for b in bs]  # noqa: E731
    assert strip(ra["blocks"]) == strip(rb["blocks"])


def test_offload_reconstructs_like_the_model_in_memory(tmp_path):
    """Blocks read from disk one at a time (offload) end with the weights of the run on the
    model in memory, bit for bit."""
    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=2)
    kw = dict(method="magnitude", block_steps=STEPS, block_lr=LR, progress=False)
    mem, _, _ = load_model(folder)
    res = prune_model(mem, _batches(), out=str(tmp_path / "mem"), **kw)
    lazy, _, weights = load_model(folder, offload=True)
    prune_model(lazy, _batches(), weights=weights, out=str(tmp_path / "disk"), **kw)
    for rec in res.records:
        a, b = _saved(str(tmp_path / "mem"), rec.name), _saved(str(tmp_path / "disk"), rec.name)
        assert torch.equal(a["W"], b["W"]), rec.name
        assert not torch.equal(a["W"], a["W_nogd"]), rec.name


def test_without_block_steps_nothing_changes(tmp_path):
    """block_steps = 0: run.json and report.json as before +BR existed (older runs resume,
    results stay bit-identical)."""
    out = str(tmp_path / "run")
    res = prune_model(_llama(1), _batches(), method="magnitude", out=out, progress=False)
    assert res.blocks == []
    assert not {"block_steps", "block_lr"} & set(json.load(open(os.path.join(out, "run.json"))))
    assert "blocks" not in json.load(open(os.path.join(out, "report.json")))
    assert not os.path.exists(os.path.join(out, "blocks"))


@pytest.mark.parametrize("fields, match", [
    ({"block_steps": -1}, "block_steps must be >= 0"),
    ({"block_steps": 2.5}, "block_steps must be an integer"),
    ({"block_steps": 2, "block_lr": 0.0}, "block_lr must be finite and > 0"),
    ({"block_steps": 2, "block_lr": float("nan")}, "block_lr must be finite and > 0"),
    ({"block_steps": True}, "block_steps must be an integer"),
    ({"block_steps": 2, "blocks": "model"}, "needs a list of blocks"),
])
def test_bad_settings_are_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        prune_model(_llama(1), _batches(n=1), method="magnitude", progress=False, **fields)


def test_cli_block_steps(tmp_path, capsys):
    """``--block-steps``/``--block-lr``: recorded in run.json, the report holds the blocks,
    eval labels the reconstructed weights +BR; bad values: one line, exit 2."""
    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=1)
    words = "the a model block weight mask layer sparse dense token data text".split()
    g = torch.Generator().manual_seed(0)
    text = tmp_path / "text.txt"
    text.write_text("\n".join(" ".join(words[int(i)] for i in torch.randint(
        len(words), (30,), generator=g)) for _ in range(60)) + "\n")
    out = str(tmp_path / "run")
    base = ["prune", "--model", folder, "--out", out, "--method", "magnitude",
            "--calibration", str(text), "--n-calib", "4", "--seq-len", "16",
            "--batch-size", "2"]
    for bad, match in ((["--block-steps", "-1"], "--block-steps must be >= 0"),
                       (["--block-steps", "3", "--block-lr", "0"], "--block-lr must be finite "
                                                                  "and > 0"),
                       (["--block-steps", "3", "--block-lr", "inf"], "--block-lr must be "
                                                                    "finite and > 0")):
        capsys.readouterr()
        with pytest.raises(SystemExit, match=match) as exc:
            main(base + bad)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.count("sparseopt prune: ") == 1, err
    assert main(base + ["--block-steps", "3", "--block-lr", "1e-3"]) == 0
    run = json.load(open(os.path.join(out, "magnitude", "run.json")))
    assert (run["block_steps"], run["block_lr"]) == (3, 1e-3)
    report = json.load(open(os.path.join(out, "magnitude", "report.json")))
    assert [b["name"] for b in report["blocks"]] == ["model.layers.0"]
    assert main(["eval", out, "--text", str(text), "--max-tokens", "200"]) == 0
    rows = json.load(open(os.path.join(out, "comparison.json")))["rows"]
    assert [r["run"] for r in rows] == ["dense", "magnitude", "magnitude+BR"]
    # a rerun with another learning rate is refused, naming it
    with pytest.raises(SystemExit, match=r"block_lr \(saved 0.001, now 0.01\)"):
        main(base + ["--block-steps", "3", "--block-lr", "1e-2"])


def test_cli_block_steps_alone_means_the_default():
    from sparseopt.cli import _parser
    from sparseopt_torch.reconstruct import BLOCK_STEPS

    base = ["prune", "--out", "x", "--method", "magnitude"]
    assert _parser("prune").parse_args(base).block_steps == 0
    assert _parser("prune").parse_args(base + ["--block-steps"]).block_steps == BLOCK_STEPS
    assert _parser("prune").parse_args(base + ["--block-steps", "7"]).block_steps == 7
