"""A model from a GGUF file (issue 44 item 1): a tiny Llama written with the gguf package,
read and dequantized by transformers, materialized as a folder, pruned through the CLI."""

import json
import os

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf", reason="reading .gguf files needs the gguf package")

from sparseopt.cli import main  # noqa: E402
from sparseopt.patterns import NM  # noqa: E402

HIDDEN, FFN, HEADS, KV, BLOCKS = 32, 64, 4, 2, 2


def _byte_tokens():
    """GPT-2's byte-level alphabet: one token per byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def write_tiny_llama_gguf(path, seed=0):
    """A 2-block Llama in float32 tensors; returns {gguf tensor name: array}."""
    rng = np.random.default_rng(seed)
    tokens = _byte_tokens() + ["\u0120t", "<|endoftext|>"]  # one merge: " t"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(BLOCKS)
    w.add_context_length(128)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * len(tokens))
    w.add_token_merges(["\u0120 t"])
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)
    arrays = {"token_embd.weight": (len(tokens), HIDDEN), "output_norm.weight": (HIDDEN,),
              "output.weight": (len(tokens), HIDDEN)}
    for i in range(BLOCKS):
        kv = HIDDEN // HEADS * KV
        arrays.update({f"blk.{i}.attn_norm.weight": (HIDDEN,),
                       f"blk.{i}.ffn_norm.weight": (HIDDEN,),
                       f"blk.{i}.attn_q.weight": (HIDDEN, HIDDEN),
                       f"blk.{i}.attn_k.weight": (kv, HIDDEN),
                       f"blk.{i}.attn_v.weight": (kv, HIDDEN),
                       f"blk.{i}.attn_output.weight": (HIDDEN, HIDDEN),
                       f"blk.{i}.ffn_gate.weight": (FFN, HIDDEN),
                       f"blk.{i}.ffn_up.weight": (FFN, HIDDEN),
                       f"blk.{i}.ffn_down.weight": (HIDDEN, FFN)})
    values = {}
    for name, shape in arrays.items():
        values[name] = (np.ones(shape) if name.endswith("norm.weight")
                        else 0.1 * rng.standard_normal(shape)).astype(np.float32)
        w.add_tensor(name, values[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return values


def test_gguf_model_materializes_and_prunes_through_the_cli(tmp_path):
    from sparseopt_torch.models import load_model, materialize_gguf

    path = tmp_path / "tiny.gguf"
    values = write_tiny_llama_gguf(path)
    folder = materialize_gguf(str(path), str(tmp_path / "folder"))
    model, tokenizer, _ = load_model(folder)
    # unpermuted tensors come back as written, in float32 (q/k are permuted for RoPE)
    for i in range(BLOCKS):
        for ours, theirs in (("ffn_down", "mlp.down_proj"), ("attn_v", "self_attn.v_proj"),
                             ("ffn_up", "mlp.up_proj")):
            W = model.get_submodule(f"model.layers.{i}.{theirs}").weight
            assert W.dtype == torch.float32
            assert np.array_equal(W.detach().numpy(), values[f"blk.{i}.{ours}.weight"])
    ids = tokenizer("Some text to read.", return_tensors="pt")["input_ids"]
    assert ids.numel() > 0 and torch.isfinite(model(input_ids=ids).logits).all()
    # a second call keeps the folder (same file)
    stamp = os.path.getmtime(os.path.join(folder, "gguf_source.json"))
    assert materialize_gguf(str(path), folder) == folder
    assert os.path.getmtime(os.path.join(folder, "gguf_source.json")) == stamp
    # the CLI takes the file itself
    calib = tmp_path / "calib.txt"
    calib.write_text("\n".join(f"Document number {i} says something short." for i in range(80)))
    out = str(tmp_path / "run")
    assert main(["prune", "--model", str(path), "--out", out, "--method", "magnitude",
                 "--calibration", str(calib), "--n-calib", "2", "--seq-len", "16"]) == 0
    experiment = json.load(open(os.path.join(out, "experiment.json")))
    assert experiment["model"] == os.path.join(out, "dense-model")
    from safetensors.torch import load_file

    layers = json.load(open(os.path.join(out, "magnitude", "report.json")))["layers"]
    assert len(layers) == 7 * BLOCKS
    for r in layers:
        W = load_file(os.path.join(out, "magnitude", "layers", r["name"] + ".safetensors"))["W"]
        assert NM(2, 4).satisfied(W.numpy()), r["name"]


def test_not_a_gguf_file_is_refused(tmp_path):
    from sparseopt_torch.models import materialize_gguf

    with pytest.raises(ValueError, match="is not a .gguf file"):
        materialize_gguf(str(tmp_path / "missing.gguf"), str(tmp_path / "f"))
