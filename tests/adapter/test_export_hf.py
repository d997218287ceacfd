"""Hugging Face checkpoints of pruned runs (sparseopt_torch.export.export_checkpoint) on tiny
random models of every architecture saved like a user's folder (_models.save_tiny_model):
the folder reloads with the Auto class, prunes, exports and reloads with the pruned weights
(2:4, equal to the in-memory ones, everything else unchanged, same logits); sharded and
bfloat16 checkpoints, a base-model prefix in the checkpoint keys, and bad input (nothing
half-written)."""

import json
import os
import shutil
import warnings

import pytest
import torch
from _models import ARCHITECTURES, minilm_tokenizer_dir, save_tiny_model, tiny_config
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from sparseopt_torch.export import export_checkpoint
from sparseopt_torch.layers import find_layers, get_weight
from sparseopt_torch.prune import prune_model

@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny matrices: torch's thread pool only adds overhead, and on a shared, loaded machine
    its spinning makes pruning ~20x slower. Restored after this module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


SENTENCES = [["the cat sat on the mat", "sparse models run fast"],
             ["pruning keeps two of every four weights", "hello"]]


def _auto(arch):
    from transformers import AutoModel, AutoModelForCausalLM

    return AutoModel if arch == "bert" else AutoModelForCausalLM


def _batches(arch, tokenizer=None):
    """Tokenizer output of short sentences; decoders take no token_type_ids."""
    from transformers import AutoTokenizer

    tokenizer = tokenizer or AutoTokenizer.from_pretrained(minilm_tokenizer_dir())
    out = []
    for s in SENTENCES:
        b = dict(tokenizer(s, return_tensors="pt", padding=True))
        if arch != "bert":
            b.pop("token_type_ids", None)
        out.append(b)
    return out


def _output(model, batch):
    out = model(**batch)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _is_24(W):
    """At most 2 nonzeros in every group of 4 consecutive entries of each row."""
    return bool(((W.reshape(W.shape[0], -1, 4) != 0).sum(-1) <= 2).all())


def _prune(arch, dense, tmp, *, dtype=torch.float32):
    """Load the model folder ``dense`` in ``dtype`` and prune it into ``tmp/run``:
    (run folder, pruned in-memory model, dense state dict)."""
    model = _auto(arch).from_pretrained(dense, dtype=dtype).eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    run = os.path.join(tmp, "run")
    prune_model(model, _batches(arch), method="magnitude", refine_steps=2, out=run,
                progress=False)
    return run, model, state


def _export(run, dense, out, **kwargs):
    """export_checkpoint, checking that it finds dense_dir to be the model the run pruned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = export_checkpoint(run, dense, out, **kwargs)
    assert not [w for w in caught if "not the model the run" in str(w.message)]
    return out


# ---------------------------------------------------------------------------------------------
# the tiny model factory


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_tiny_model_reloads_and_runs(arch, tmp_path):
    from transformers import AutoTokenizer
    from transformers.pytorch_utils import Conv1D

    folder = save_tiny_model(arch, tmp_path / arch)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(folder))
    model = _auto(arch).from_pretrained(folder).eval()
    cfg = model.config
    assert cfg.vocab_size == 30522 and cfg.model_type == arch
    if arch in ("llama", "mistral", "qwen3"):
        assert cfg.num_key_value_heads < cfg.num_attention_heads  # grouped-query attention
    if arch == "qwen2":
        assert model.lm_head.weight is model.model.embed_tokens.weight  # tied
    layers = find_layers(model)
    assert all(get_weight(m).shape[1] % 4 == 0 for m in layers.values())
    assert any(isinstance(m, Conv1D) for m in layers.values()) == (arch == "gpt2")
    # the folder's own tokenizer (for qwen2 and mistral transformers picks another class than
    # the saved BertTokenizer; the ids stay in the vocabulary)
    batch = _batches(arch, AutoTokenizer.from_pretrained(folder))[0]
    with torch.no_grad():
        out = _output(model, batch)
    width = 30522 if arch != "bert" else cfg.hidden_size
    assert out.shape == (*batch["input_ids"].shape, width) and torch.isfinite(out).all()


def test_tiny_config_rejects_unknown_arch():
    with pytest.raises(ValueError, match="arch must be one of"):
        tiny_config("t5")


# ---------------------------------------------------------------------------------------------
# export of every architecture


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_export_checkpoint_reloads_pruned_model(arch, tmp_path):
    dense = save_tiny_model(arch, tmp_path / "dense")
    run, pruned, dense_state = _prune(arch, dense, tmp_path)
    out = _export(run, dense, tmp_path / "out")
    assert out == str(tmp_path / "out")
    with open(os.path.join(run, "run.json")) as fh:
        names = json.load(fh)["layers"]

    model = _auto(arch).from_pretrained(out).eval()
    layers = find_layers(model, names)
    memory = find_layers(pruned, names)
    for name in names:
        W = get_weight(layers[name])
        assert _is_24(W), name
        assert torch.equal(W, get_weight(memory[name])), name
    pruned_keys = {f"{n}.weight" for n in names}
    for key, t in model.state_dict().items():
        if key not in pruned_keys:
            assert torch.equal(t, dense_state[key]), key

    with open(os.path.join(out, "config.json")) as fh:
        sparsity = json.load(fh)["sparsity"]
    assert sparsity == {"pattern": "2:4", "method": "magnitude", "refine_steps": 2,
                        "variant": "gd", "pruned_layers": names, "tool": "sparseopt"}
    card = open(os.path.join(out, "README.md")).read()
    assert "2:4" in card and "magnitude" in card and f"{len(names)} linear layers" in card
    assert {"tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(out))

    with torch.no_grad():
        for batch in _batches(arch):
            assert torch.equal(_output(model, batch), _output(pruned, batch))


def test_export_sharded_bfloat16_with_extra_files(tmp_path):
    """Shards + index, a bfloat16 checkpoint pruned in float32 (cast back on export), the
    nogd variant, other files and folders copied, dense weight files of other formats not
    copied, the original model card's front matter kept."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dense = str(tmp_path / "dense")
    save_tiny_model("llama", dense, dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(dense)
    shutil.rmtree(dense)
    model.save_pretrained(dense, max_shard_size="100KB")
    AutoTokenizer.from_pretrained(minilm_tokenizer_dir()).save_pretrained(dense)
    shards = sorted(f for f in os.listdir(dense) if f.endswith(".safetensors"))
    assert len(shards) > 2 and "model.safetensors.index.json" in os.listdir(dense)
    os.makedirs(os.path.join(dense, "1_Pooling"))
    with open(os.path.join(dense, "1_Pooling", "config.json"), "w") as fh:
        fh.write("{}")
    with open(os.path.join(dense, "notes.txt"), "w") as fh:
        fh.write("notes")
    with open(os.path.join(dense, "pytorch_model.bin"), "wb") as fh:
        fh.write(b"dense weights in another format")
    with open(os.path.join(dense, "README.md"), "w") as fh:
        fh.write("---\nlicense: apache-2.0\n---\n# Tiny llama\nThe original card.\n")

    run, pruned, _ = _prune("llama", dense, tmp_path)  # float32
    out = _export(run, dense, tmp_path / "out", variant="nogd")
    files = set(os.listdir(out))
    assert {"notes.txt", "1_Pooling", "model.safetensors.index.json", *shards} <= files
    assert "pytorch_model.bin" not in files
    card = open(os.path.join(out, "README.md")).read()
    assert card.startswith("---\nlicense: apache-2.0\n---\n") and "The original card." in card
    with open(os.path.join(dense, "model.safetensors.index.json")) as a, \
            open(os.path.join(out, "model.safetensors.index.json")) as b:
        assert json.load(a) == json.load(b)

    names = json.load(open(os.path.join(run, "run.json")))["layers"]
    nogd = {n: load_file(os.path.join(run, "layers", n + ".safetensors"))["W_nogd"]
            for n in names}
    for shard in shards:
        with safe_open(os.path.join(dense, shard), "pt") as a, \
                safe_open(os.path.join(out, shard), "pt") as b:
            assert list(a.keys()) == list(b.keys()) and a.metadata() == b.metadata()
            for key in a.keys():
                name = key[: -len(".weight")]
                t = b.get_tensor(key)
                assert t.dtype == torch.bfloat16
                if name in nogd:
                    assert _is_24(t) and torch.equal(t, nogd[name].to(torch.bfloat16))
                else:  # bit for bit
                    assert torch.equal(t.view(torch.int16), a.get_tensor(key).view(torch.int16))
    reloaded = AutoModelForCausalLM.from_pretrained(out)
    assert reloaded.dtype == torch.bfloat16
    assert json.load(open(os.path.join(out, "config.json")))["sparsity"]["variant"] == "nogd"


def test_export_finds_keys_with_a_base_model_prefix(tmp_path):
    """A BertForMaskedLM checkpoint ("bert.encoder...") loaded with AutoModel ("encoder...")."""
    from transformers import AutoModel, BertForMaskedLM

    torch.manual_seed(0)
    dense = str(tmp_path / "dense")
    BertForMaskedLM(tiny_config("bert")).save_pretrained(dense)
    with safe_open(os.path.join(dense, "model.safetensors"), "pt") as fh:
        assert "bert.encoder.layer.0.attention.self.query.weight" in fh.keys()
    run, pruned, _ = _prune("bert", dense, tmp_path)
    out = _export(run, dense, tmp_path / "out")
    model = AutoModel.from_pretrained(out)
    for name, mod in find_layers(pruned).items():
        assert torch.equal(get_weight(model.get_submodule(name)), get_weight(mod)), name


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory):
    """A pruned tiny GPT-2 (Conv1D layers): (dense folder, run folder)."""
    tmp = tmp_path_factory.mktemp("gpt2")
    dense = save_tiny_model("gpt2", tmp / "dense")
    return dense, _prune("gpt2", dense, tmp)[0]


def _copy(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def _leftovers(parent):
    return [f for f in os.listdir(parent) if f.startswith(".out")]


def test_export_refuses_unfinished_run(gpt2_run, tmp_path):
    dense, run = gpt2_run
    run = _copy(run, tmp_path / "run")
    os.remove(os.path.join(run, "layers", "transformer.h.1.mlp.c_proj.json"))
    with pytest.raises(ValueError, match="not finished.*transformer.h.1.mlp.c_proj"):
        export_checkpoint(run, dense, tmp_path / "out")
    with pytest.raises(ValueError, match="no run.json"):
        export_checkpoint(tmp_path, dense, tmp_path / "out")
    assert not os.path.exists(tmp_path / "out")


def test_export_refuses_dense_dir_without_config_or_weights(gpt2_run, tmp_path):
    dense, run = gpt2_run
    no_config = _copy(dense, tmp_path / "no_config")
    os.remove(os.path.join(no_config, "config.json"))
    with pytest.raises(ValueError, match="no config.json"):
        export_checkpoint(run, no_config, tmp_path / "out")
    no_weights = _copy(dense, tmp_path / "no_weights")
    os.remove(os.path.join(no_weights, "model.safetensors"))
    with pytest.raises(ValueError, match="no .safetensors weights"):
        export_checkpoint(run, no_weights, tmp_path / "out")
    with pytest.raises(ValueError, match="variant"):
        export_checkpoint(run, dense, tmp_path / "out", variant="best")
    assert not os.path.exists(tmp_path / "out")


def _edit_checkpoint(dense, folder, edit):
    folder = _copy(dense, folder)
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path, metadata={"format": "pt"})
    return folder


def test_export_refuses_missing_key_and_shape_mismatch(gpt2_run, tmp_path):
    dense, run = gpt2_run
    key = "transformer.h.0.mlp.c_fc.weight"
    missing = _edit_checkpoint(dense, tmp_path / "missing", lambda t: t.pop(key))
    with pytest.raises(ValueError, match=r"'transformer.h.0.mlp.c_fc'.*not in the checkpoint"):
        export_checkpoint(run, missing, tmp_path / "out")

    def transpose(t):
        t[key] = t[key].T.contiguous()  # (d_out, d_in) where Conv1D stores (d_in, d_out)
    wrong = _edit_checkpoint(dense, tmp_path / "wrong", transpose)
    with pytest.raises(ValueError, match=r"'transformer.h.0.mlp.c_fc'.*\(64, 32\).*\(64, 32\)"):
        export_checkpoint(run, wrong, tmp_path / "out")
    assert not os.path.exists(tmp_path / "out") and not _leftovers(tmp_path)


def test_export_warns_about_other_dense_weights(gpt2_run, tmp_path):
    """Same shapes, other weights (e.g. another fine-tune): the run's fingerprint tells."""
    dense, run = gpt2_run
    key = "transformer.h.1.attn.c_proj.weight"
    other = _edit_checkpoint(dense, tmp_path / "other", lambda t: t[key].mul_(2))
    with pytest.warns(UserWarning, match="not the model the run"):
        export_checkpoint(run, other, tmp_path / "out")
    _export(run, other, tmp_path / "out2", check_dense=False)


def test_export_refuses_existing_out_dir(gpt2_run, tmp_path):
    dense, run = gpt2_run
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="out_dir.*not empty"):
        export_checkpoint(run, dense, out)
    assert os.listdir(out) == ["keep.txt"]
    with pytest.raises(ValueError, match="inside dense_dir"):
        export_checkpoint(run, dense, os.path.join(dense, "out"))
    empty = tmp_path / "empty"
    empty.mkdir()  # an existing empty folder is fine
    export_checkpoint(run, dense, empty)
    assert "config.json" in os.listdir(empty)


def test_failing_export_leaves_nothing(gpt2_run, tmp_path):
    """A layer that is not 2:4 fails in the middle of writing: no out_dir, no temp folder."""
    dense, run = gpt2_run
    run = _copy(run, tmp_path / "run")
    path = os.path.join(run, "layers", "transformer.h.1.mlp.c_fc.safetensors")
    tensors = load_file(path)
    tensors["W"] = torch.ones_like(tensors["W"])
    save_file(tensors, path)
    with pytest.raises(ValueError, match="'transformer.h.1.mlp.c_fc' is not 2:4"):
        export_checkpoint(run, dense, tmp_path / "out")
    assert not os.path.exists(tmp_path / "out") and not _leftovers(tmp_path)


def test_export_of_a_run_read_from_disk(gpt2_run, tmp_path):
    """A model loaded with load_model(offload=True) keeps its pruned weights only in the run:
    the export equals pruning the whole model in memory."""
    from transformers import AutoModelForCausalLM

    from sparseopt_torch.models import load_model

    dense, _ = gpt2_run
    model, _, weights = load_model(dense, offload=True)
    run = os.path.join(tmp_path, "run")
    prune_model(model, _batches("gpt2"), method="magnitude", refine_steps=2, out=run,
                weights=weights, progress=False)
    _, memory, _ = _prune("gpt2", dense, tmp_path / "memory")
    out = _export(run, dense, tmp_path / "out")
    exported = AutoModelForCausalLM.from_pretrained(out)
    with torch.no_grad():
        batch = _batches("gpt2")[0]
        assert torch.equal(_output(exported, batch), _output(memory, batch))
