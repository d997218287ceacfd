"""Export of 2:4 weights (sparseopt_torch.export): packing against a slow per-group reference,
bit-exact round trips in every dtype, the packed safetensors file on a pruned tiny BERT and
GPT-2 (Conv1D), its size ratio, bad and corrupted input, the dense checkpoint, and
semi-structured tensors (CPU error; the CUDA path where a GPU exists)."""

import copy
import json
import os

import numpy as np
import pytest
import torch
from _models import make_tiny_batches, make_tiny_bert
from safetensors import safe_open
from safetensors.torch import save_file

from sparseopt.patterns import NM
from sparseopt_torch.export import (load_packed, pack_24, packed_ratio, save_dense,
                                    save_packed, to_semi_structured, unpack_24)
from sparseopt_torch.layers import find_layers, get_weight, set_weight, to_numpy

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
_INT = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
        torch.float64: torch.int64}


def bits(t):
    """The raw bit patterns, so that -0.0 != +0.0 and every mantissa bit counts."""
    return t.contiguous().view(_INT[t.dtype])


def random_24(rows, cols, dtype, seed, raw_bits=False):
    """A 2:4 matrix whose groups hold 0, 1 or 2 nonzeros at random positions. raw_bits: the
    nonzeros are random finite bit patterns (subnormals, huge and tiny magnitudes, signs)."""
    g = torch.Generator().manual_seed(seed)
    if raw_bits:
        info = torch.iinfo(_INT[dtype])
        vals = torch.randint(info.min, info.max, (rows, cols), generator=g,
                             dtype=_INT[dtype]).view(dtype)
        vals = torch.where(torch.isfinite(vals) & (vals != 0), vals, torch.ones((), dtype=dtype))
    else:
        vals = torch.randn(rows, cols, generator=g, dtype=torch.float64).to(dtype)
        vals = torch.where(vals != 0, vals, torch.ones((), dtype=dtype))
    n_keep = torch.randint(0, 3, (rows, cols // 4, 1), generator=g)
    rank = torch.argsort(torch.rand(rows, cols // 4, 4, generator=g), dim=-1)
    keep = (rank < n_keep).reshape(rows, cols)
    return torch.where(keep, vals, torch.zeros((), dtype=dtype))


def reference_pack(W):
    """Slow per-group packing written from the format's definition."""
    rows, cols = W.shape
    n_groups = cols // 4
    values = torch.zeros(rows, cols // 2, dtype=W.dtype)
    positions = np.zeros((rows, (n_groups + 1) // 2), dtype=np.uint8)
    for r in range(rows):
        for g in range(n_groups):
            group = W[r, 4 * g: 4 * g + 4]
            nz = [i for i in range(4) if group[i] != 0]
            free = [i for i in range(4) if group[i] == 0]
            kept = sorted((nz + free)[:2])
            values[r, 2 * g] = group[kept[0]]
            values[r, 2 * g + 1] = group[kept[1]]
            positions[r, g // 2] |= (kept[0] | kept[1] << 2) << (4 * (g % 2))
    return values, torch.from_numpy(positions)


def prune_model_24(model, modules=None):
    """Magnitude 2:4 pruning of the targeted layers with NM(2, 4).project."""
    for mod in find_layers(model, modules).values():
        W = get_weight(mod)
        set_weight(mod, NM(2, 4).project(to_numpy(W)))
    return model


# ------------------------------------------------------------------------------------------
# pack_24 / unpack_24


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [4, 8, 12, 40])
def test_pack_matches_reference(dtype, cols):
    W = random_24(7, cols, dtype, seed=cols)
    values, positions = pack_24(W)
    ref_values, ref_positions = reference_pack(W)
    assert values.dtype == dtype and positions.dtype == torch.uint8
    assert values.shape == (7, cols // 2) and positions.shape == (7, (cols // 4 + 1) // 2)
    assert torch.equal(bits(values), bits(ref_values))
    assert torch.equal(positions, ref_positions)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("raw_bits", [False, True])
def test_round_trip_bit_exact(dtype, raw_bits):
    for seed, (rows, cols) in enumerate([(1, 4), (5, 12), (16, 64), (3, 36), (0, 8)]):
        W = random_24(rows, cols, dtype, seed=seed, raw_bits=raw_bits)
        W_before = W.clone()
        values, positions = pack_24(W)
        back = unpack_24(values, positions, W.shape)
        assert back.dtype == dtype and back.shape == W.shape
        assert torch.equal(bits(back), bits(W))
        assert torch.equal(bits(W), bits(W_before))  # input untouched


def test_pack_known_example_and_fillers():
    W = torch.tensor([[0.0, 3.0, 0.0, -1.0,   # two nonzeros at 1, 3
                       5.0, 0.0, 0.0, 0.0,    # one nonzero at 0: filler at 1
                       0.0, 0.0, 0.0, 7.0,    # one nonzero at 3: filler at 0
                       0.0, 0.0, 0.0, 0.0,    # none: fillers at 0, 1
                       0.0, 2.0, 4.0, 0.0]])  # odd number of groups: padding nibble
    values, positions = pack_24(W)
    assert values.tolist() == [[3.0, -1.0, 5.0, 0.0, 0.0, 7.0, 0.0, 0.0, 2.0, 4.0]]
    nibbles = [1 | 3 << 2, 0 | 1 << 2, 0 | 3 << 2, 0 | 1 << 2, 1 | 2 << 2, 0]
    assert positions.tolist() == [[nibbles[0] | nibbles[1] << 4, nibbles[2] | nibbles[3] << 4,
                                   nibbles[4] | nibbles[5] << 4]]


def test_negative_zero_policy():
    # -0.0 counts as zero: a group with two nonzeros and a -0.0 is 2:4.
    W = torch.tensor([[1.0, -0.0, 2.0, 0.0,     # -0.0 dropped: comes back as +0.0
                       -0.0, 0.0, 3.0, 0.0]])   # -0.0 is the filler at 0: kept bit-exactly
    back = unpack_24(*pack_24(W), W.shape)
    assert torch.equal(back, W)  # equal in value everywhere
    assert torch.equal(bits(back[0, 4:]), bits(W[0, 4:]))
    assert bits(back)[0, 1] == 0 and bits(W)[0, 1] != 0
    # mask-multiplied pruning leaves -0.0: accepted, and equal in value after the round trip
    X = torch.randn(6, 16, generator=torch.Generator().manual_seed(3))
    pruned = X * torch.from_numpy(NM(2, 4).mask(X.numpy()))
    assert (bits(pruned) == bits(torch.tensor(-0.0))).any()
    assert torch.equal(unpack_24(*pack_24(pruned), pruned.shape), pruned)


def test_pack_rejects_bad_input():
    with pytest.raises(ValueError, match=r"enc\.w is not 2:4 sparse: row 1, group 1"):
        W = torch.zeros(3, 8)
        W[1, 4:7] = 1.0
        pack_24(W, name="enc.w")
    with pytest.raises(ValueError, match="not divisible by 4"):
        pack_24(torch.zeros(2, 6))
    for bad in (float("nan"), float("inf")):
        W = torch.zeros(2, 8)
        W[0, 0] = bad
        with pytest.raises(ValueError, match="W contains NaN or Inf"):
            pack_24(W)
    with pytest.raises(ValueError, match="2-D"):
        pack_24(torch.zeros(8))
    with pytest.raises(ValueError, match="dtype"):
        pack_24(torch.zeros(2, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match="torch.Tensor"):
        pack_24(np.zeros((2, 8)))


def test_unpack_rejects_bad_or_corrupted_input():
    W = random_24(4, 12, torch.float32, seed=1)
    values, positions = pack_24(W)
    with pytest.raises(ValueError, match="shape of W"):
        unpack_24(values, positions, (4, 10))
    with pytest.raises(ValueError, match="values of W has shape"):
        unpack_24(values, positions, (4, 16))
    with pytest.raises(ValueError, match="positions of W must be a uint8"):
        unpack_24(values, positions.to(torch.int16), W.shape)
    with pytest.raises(ValueError, match="values of W must be"):
        unpack_24(values.to(torch.int32), positions, W.shape)
    bad = positions.clone()
    bad[2, 0] = (bad[2, 0] & 0xF0) | (2 | 1 << 2)  # p0 = 2 >= p1 = 1
    with pytest.raises(ValueError, match="corrupted: row 2, group 0"):
        unpack_24(values, bad, W.shape)
    bad = positions.clone()
    bad[0, 1] |= 0x40  # the padding nibble of the third (last, unpaired) group
    with pytest.raises(ValueError, match="padding nibble"):
        unpack_24(values, bad, W.shape)


def test_packed_ratio_formula():
    assert packed_ratio(torch.bfloat16) == 2 * (16 + 2) / 64 == 0.5625
    assert packed_ratio(torch.float16) == 0.5625
    assert packed_ratio(torch.float32) == 2 * (32 + 2) / 128
    assert packed_ratio(torch.float64) == 2 * (64 + 2) / 256
    for dtype in DTYPES:
        for cols in (4, 8, 12, 64):
            W = random_24(3, cols, dtype, seed=cols)
            v, p = pack_24(W)
            assert packed_ratio(dtype, cols) == (v.nbytes + p.nbytes) / (W.numel() * W.element_size())


# ------------------------------------------------------------------------------------------
# save_packed / load_packed


def _outputs(model, batches):
    with torch.no_grad():
        return [model(**b).last_hidden_state for b in batches]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_save_load_packed_tiny_bert(tmp_path, capsys, dtype):
    model = prune_model_24(make_tiny_bert().to(dtype))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    path = tmp_path / "model.safetensors"
    sizes = save_packed(model, path)
    printed = capsys.readouterr().out
    targets = find_layers(model)
    assert sizes["n_weights"] == len(targets) == 12
    dense = sum(m.weight.numel() * m.weight.element_size() for m in targets.values())
    assert sizes["dense_bytes"] == dense
    expected = 0.5625 if dtype == torch.bfloat16 else 0.53125  # every cols/8 whole here
    assert sizes["ratio"] == expected and sizes["packed_bytes"] == expected * dense
    assert f"{100 * expected:.6g}% of dense" in printed  # 56.25% / 53.125%
    assert os.path.getsize(path) == sizes["file_bytes"]
    for k, v in model.state_dict().items():  # the model is untouched
        assert torch.equal(bits(v), bits(state[k])) if v.is_floating_point() else torch.equal(v, state[k])

    # the file holds values/positions for the 12 weights, every other tensor dense
    with safe_open(path, framework="pt") as f:
        keys = set(f.keys())
        meta = json.loads(f.metadata()["sparseopt_packed_24"])
    weight_keys = {f"{name}.weight" for name in targets}
    assert set(meta["weights"]) == weight_keys
    assert keys == (set(state) - weight_keys) | {k + s for k in weight_keys
                                                  for s in (".values", ".positions")}
    assert meta["weights"]["encoder.layer.0.intermediate.dense.weight"] == {
        "shape": [64, 32], "dtype": str(dtype).removeprefix("torch."), "transposed": False}

    loaded = load_packed(path)
    assert list(loaded) == list(state)
    for k, v in state.items():
        assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape
        if v.is_floating_point():
            assert torch.equal(bits(loaded[k]), bits(v)), k
        else:
            assert torch.equal(loaded[k], v), k

    fresh = make_tiny_bert(seed=1).to(dtype)  # other random weights
    batches = make_tiny_batches()
    assert not all(torch.equal(a, b) for a, b in zip(_outputs(fresh, batches),
                                                      _outputs(model, batches)))
    fresh.load_state_dict(loaded)
    for a, b in zip(_outputs(fresh, batches), _outputs(model, batches)):
        assert torch.equal(a, b)


def test_save_packed_subset_and_conv1d(tmp_path):
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    gpt = GPT2Model(GPT2Config(vocab_size=50, n_positions=16, n_embd=32, n_layer=2,
                               n_head=2)).eval()
    prune_model_24(gpt, r"\.mlp\.")  # only the MLP is 2:4; attention stays dense
    path = tmp_path / "gpt.safetensors"
    sizes = save_packed(gpt, path, modules=r"\.mlp\.", progress=False)
    assert sizes["n_weights"] == 4 and sizes["ratio"] == 0.53125
    with safe_open(path, framework="pt") as f:
        meta = json.loads(f.metadata()["sparseopt_packed_24"])
        c_fc = f.get_tensor("h.0.mlp.c_fc.weight.values")
    # Conv1D stores (in, out); groups run along d_in, so (d_out, d_in / 2) values
    assert meta["weights"]["h.0.mlp.c_fc.weight"]["transposed"] is True
    assert c_fc.shape == (128, 16)
    loaded = load_packed(path)
    for k, v in gpt.state_dict().items():
        assert torch.equal(loaded[k], v), k
    ids = torch.randint(0, 50, (2, 10), generator=torch.Generator().manual_seed(0))
    fresh = GPT2Model(gpt.config).eval()
    fresh.load_state_dict(loaded)
    with torch.no_grad():
        assert torch.equal(fresh(ids).last_hidden_state, gpt(ids).last_hidden_state)
    # the attention weights are dense: targeting them fails, naming the weight
    with pytest.raises(ValueError, match=r"h\.0\.attn\.c_attn\.weight is not 2:4"):
        save_packed(gpt, tmp_path / "all.safetensors")


def test_save_packed_non_24_writes_nothing(tmp_path):
    model = prune_model_24(make_tiny_bert(), r"attention")
    with pytest.raises(ValueError, match=r"encoder\.layer\.0\.intermediate\.dense\.weight is "
                                         r"not 2:4 sparse"):
        save_packed(model, tmp_path / "m.safetensors")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="no nn.Linear"):
        save_packed(model, tmp_path / "m.safetensors", modules="no_such_layer")
    with pytest.raises(ValueError, match="'other' .* is not in the state dict"):
        save_packed(model, tmp_path / "m.safetensors", modules={"other": torch.nn.Linear(8, 4)})
    assert os.listdir(tmp_path) == []


def test_load_packed_rejects_foreign_and_corrupted_files(tmp_path):
    model = prune_model_24(make_tiny_bert())
    good = tmp_path / "good.safetensors"
    save_packed(model, good, progress=False)
    raw = good.read_bytes()
    with safe_open(good, framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        meta = json.loads(f.metadata()["sparseopt_packed_24"])

    with pytest.raises(FileNotFoundError):
        load_packed(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"this is not a safetensors file at all")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_packed(junk)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_packed(truncated)
    foreign = tmp_path / "foreign.safetensors"
    save_file({k: v.contiguous().clone() for k, v in model.state_dict().items()}, foreign)
    with pytest.raises(ValueError, match="not a sparseopt packed 2:4 file"):
        load_packed(foreign)

    def rewrite(name, tensors=tensors, **changes):
        out = tmp_path / name
        save_file(tensors, out, metadata={"sparseopt_packed_24": json.dumps({**meta, **changes})})
        return out

    with pytest.raises(ValueError, match="version 2"):
        load_packed(rewrite("v2.safetensors", version=2))
    bad_meta = tmp_path / "badmeta.safetensors"
    save_file(tensors, bad_meta, metadata={"sparseopt_packed_24": "{not json"})
    with pytest.raises(ValueError, match="corrupted packed 2:4 metadata"):
        load_packed(bad_meta)
    key = "encoder.layer.1.output.dense.weight"
    with pytest.raises(ValueError, match="corrupted packed 2:4 metadata"):
        load_packed(rewrite("entry.safetensors", weights={**meta["weights"], key: "oops"}))
    fewer = {k: v for k, v in tensors.items() if k != key + ".positions"}
    with pytest.raises(ValueError, match="do not match the metadata"):
        load_packed(rewrite("missing.safetensors", tensors=fewer))
    swapped = dict(tensors)
    pos = swapped[key + ".positions"].clone()
    pos[0, 0] = 0xFF  # p0 = p1 = 3
    swapped[key + ".positions"] = pos
    with pytest.raises(ValueError, match=r"output\.dense\.weight are corrupted: row 0, group 0"):
        load_packed(rewrite("corrupt.safetensors", tensors=swapped))
    wrong = json.loads(json.dumps(meta))
    wrong["weights"][key]["shape"] = [32, 128]
    with pytest.raises(ValueError, match="values of .* has shape"):
        load_packed(rewrite("shape.safetensors", weights=wrong["weights"]))
    wrong["weights"][key] = {**meta["weights"][key], "dtype": "float16"}
    with pytest.raises(ValueError, match="metadata says 'float16'"):
        load_packed(rewrite("dtype.safetensors", weights=wrong["weights"]))


# ------------------------------------------------------------------------------------------
# dense checkpoints


def test_save_dense_pretrained_model(tmp_path):
    from transformers import BertModel

    model = prune_model_24(make_tiny_bert())
    assert save_dense(model, tmp_path / "dense") == str(tmp_path / "dense")
    back = BertModel.from_pretrained(tmp_path / "dense").eval()
    state = back.state_dict()
    for k, v in model.state_dict().items():
        assert torch.equal(bits(state[k]), bits(v)) if v.is_floating_point() else torch.equal(state[k], v)
    for mod in find_layers(back).values():
        assert NM(2, 4).satisfied(to_numpy(get_weight(mod)))
    with pytest.raises(ValueError, match="PreTrainedModel"):
        save_dense(torch.nn.Linear(4, 4), tmp_path / "plain")


def test_save_dense_sentence_transformer(tmp_path, minilm):
    from sentence_transformers import SentenceTransformer

    st = copy.deepcopy(minilm)  # the session fixture stays dense
    prune_model_24(st[0].auto_model)
    save_dense(st, tmp_path / "st")
    back = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    state = back[0].auto_model.state_dict()
    for k, v in st[0].auto_model.state_dict().items():
        assert torch.equal(state[k], v), k
    n24 = sum(NM(2, 4).satisfied(to_numpy(get_weight(m)))
              for m in find_layers(back[0].auto_model).values())
    assert n24 == 36
    sentences = ["sparse weights", "a dense checkpoint with zeros"]
    assert torch.equal(back.encode(sentences, convert_to_tensor=True),
                       st.encode(sentences, convert_to_tensor=True))


# ------------------------------------------------------------------------------------------
# semi-structured sparse tensors


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_to_semi_structured_needs_cuda():
    model = prune_model_24(make_tiny_bert())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        to_semi_structured(model)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="torch.sparse.to_sparse_semi_structured needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_to_semi_structured_cuda(dtype):
    from torch.sparse import SparseSemiStructuredTensor

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 128))
    prune_model_24(model)
    model = model.to("cuda", dtype)
    x = torch.randn(64, 128, device="cuda", dtype=dtype)
    with torch.no_grad():
        dense_out = model(x).float()
    # a model on the CPU is refused even with CUDA present
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        to_semi_structured(copy.deepcopy(model).cpu())
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        to_semi_structured(copy.deepcopy(model).float())
    dense_copy = copy.deepcopy(model)
    with torch.no_grad():
        dense_copy[0].weight[0, :4] = 1.0
    with pytest.raises(ValueError, match=r"0 is not 2:4"):
        to_semi_structured(dense_copy)
    assert not isinstance(dense_copy[2].weight.data, SparseSemiStructuredTensor)

    report = to_semi_structured(model)
    assert set(report) == {"0", "2"}
    for name in report:
        assert 0 <= report[name]["rel_err"] <= 1e-2
        assert isinstance(model[int(name)].weight.data, SparseSemiStructuredTensor) or \
            isinstance(model[int(name)].weight, SparseSemiStructuredTensor)
    with torch.no_grad():
        sparse_out = model(x).float()
    assert (sparse_out - dense_out).abs().max() <= 2e-2 * dense_out.abs().max()
