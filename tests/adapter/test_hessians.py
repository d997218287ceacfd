"""collect_hessians: H = X X' / n against inputs captured independently by plain hooks."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from _models import ARCHITECTURES, make_tiny_batches, make_tiny_bert, tiny_config

from sparseopt_torch import collect_hessians, find_layers
from sparseopt_torch import hessians as hessians_module

QKV = ("attention.self.query", "attention.self.key", "attention.self.value")


def capture_reference(model, batches, layers, forward=None):
    """X'X / n per layer from inputs copied by simple forward hooks (float64, padding dropped
    with the batch's attention_mask when the input is (B, T, d))."""
    sums = {name: 0.0 for name in layers}
    counts = {name: 0 for name in layers}
    current = {}

    def make_hook(name):
        def hook(_module, inputs, _output):
            x = inputs[0].detach().to(torch.float64)
            mask = current.get("mask")
            if mask is not None and x.ndim == 3 and x.shape[:2] == mask.shape:
                X = x[mask.bool()]
            else:
                X = x.reshape(-1, x.shape[-1])
            sums[name] = sums[name] + X.T @ X
            counts[name] += X.shape[0]
        return hook

    handles = [mod.register_forward_hook(make_hook(name)) for name, mod in layers.items()]
    try:
        with torch.no_grad():
            for batch in batches:
                current["mask"] = batch.get("attention_mask") if isinstance(batch, dict) else None
                if forward is not None:
                    forward(model, batch)
                elif isinstance(batch, dict):
                    model(**batch)
                elif isinstance(batch, (tuple, list)):
                    model(*batch)
                else:
                    model(batch)
    finally:
        for h in handles:
            h.remove()
    return {name: sums[name] / counts[name] for name in layers}, counts


def assert_hessians_equal(H, ref, rtol=1e-12):
    for name, R in ref.items():
        got = H[name]
        assert got.dtype == torch.float64 and got.shape == R.shape, name
        scale = float(R.abs().max())
        err = float((got - R).abs().max())
        assert err <= rtol * scale, f"{name}: max error {err:.3g}, scale {scale:.3g}"
        assert torch.equal(got, got.T), f"{name}: not exactly symmetric"


def no_hooks(model):
    return all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


@pytest.fixture(params=["immediate", "deferred"])
def hook_path(request, monkeypatch):
    """Both kinds of hooks on the CPU: "immediate" (the CPU's: each input's product in its
    hook) and "deferred" (CUDA devices': the products batched at the end of the batch),
    forced here through ``_FULL_PRODUCT_DEVICES``."""
    if request.param == "deferred":
        monkeypatch.setattr(hessians_module, "_FULL_PRODUCT_DEVICES", ("cpu", "cuda"))
    return request.param


# -- tiny BERT ---------------------------------------------------------------------------------

@pytest.mark.parametrize("model_dtype", [torch.float64, torch.float32])
def test_tiny_bert_matches_direct_computation(tiny_bert, tiny_batches, model_dtype,
                                               hook_path):
    model = tiny_bert.to(model_dtype)
    layers = find_layers(model)
    assert len(layers) == 12
    hess = collect_hessians(model, tiny_batches)
    ref, counts = capture_reference(model, tiny_batches, layers)
    assert_hessians_equal(hess.H, ref)
    n_real = int(sum(int(b["attention_mask"].sum()) for b in tiny_batches))
    n_all = sum(b["attention_mask"].numel() for b in tiny_batches)
    assert n_real < n_all  # the batches do have padding
    assert hess.n_tokens == {name: n_real for name in layers} == counts
    assert no_hooks(model)


def test_tiny_bert_padding_is_dropped(tiny_bert, tiny_batches, hook_path):
    """Changing the embeddings of padded positions must not change any H."""
    model = tiny_bert.double()
    changed = [{"input_ids": torch.where(b["attention_mask"] == 0, 7, b["input_ids"]),
                "attention_mask": b["attention_mask"]} for b in tiny_batches]
    h1 = collect_hessians(model, tiny_batches)
    h2 = collect_hessians(model, changed)
    for name in h1.H:
        torch.testing.assert_close(h1.H[name], h2.H[name], rtol=1e-12, atol=1e-14)
    # while without the mask, padding counts as data
    unmasked = [{"input_ids": b["input_ids"]} for b in changed]
    h3 = collect_hessians(model, unmasked)
    assert h3.n_tokens[next(iter(h3.H))] == sum(b["input_ids"].numel() for b in changed)


def test_tiny_bert_qkv_share_one_tensor(tiny_bert, tiny_batches, hook_path):
    hess = collect_hessians(tiny_bert, tiny_batches)
    for block in ("encoder.layer.0", "encoder.layer.1"):
        q, k, v = (f"{block}.{s}" for s in QKV)
        assert hess.H[q] is hess.H[k] and hess.H[k] is hess.H[v]
        assert (q, k, v) in hess.groups
        others = [f"{block}.attention.output.dense", f"{block}.intermediate.dense",
                  f"{block}.output.dense"]
        for name in others:
            assert hess.H[name] is not hess.H[q]
            assert (name,) in hess.groups
    # groups partition the layer names, in registration order
    flat = [name for group in hess.groups for name in group]
    assert flat == list(hess.H) == list(find_layers(tiny_bert))
    assert len({id(t) for t in hess.H.values()}) == len(hess.groups) == 8


def test_float32_accumulation_close_to_float64(tiny_bert, tiny_batches, hook_path):
    h64 = collect_hessians(tiny_bert, tiny_batches)
    h32 = collect_hessians(tiny_bert, tiny_batches, dtype=torch.float32, device="cpu")
    for name, H in h64.H.items():
        assert h32.H[name].dtype == torch.float32
        torch.testing.assert_close(h32.H[name].double(), H, rtol=1e-5,
                                   atol=1e-6 * float(H.abs().max()))
    assert h32.groups == h64.groups


@pytest.mark.parametrize("flush_rows", [1, 40, None])
def test_float32_products_with_float64_sums(tiny_bert, tiny_batches, monkeypatch, flush_rows,
                                             hook_path):
    """product_dtype=float32, dtype=float64: float64 H close to the exact one, whether the
    float32 block is added after every batch (1), every few batches (40) or at the end."""
    if flush_rows is not None:
        monkeypatch.setattr(hessians_module, "_FLUSH_ROWS", flush_rows)
    h64 = collect_hessians(tiny_bert, tiny_batches)
    mixed = collect_hessians(tiny_bert, tiny_batches, product_dtype=torch.float32)
    assert mixed.groups == h64.groups and mixed.n_tokens == h64.n_tokens
    for name, H in h64.H.items():
        got = mixed.H[name]
        assert got.dtype == torch.float64 and torch.equal(got, got.T), name
        torch.testing.assert_close(got, H, rtol=1e-5, atol=1e-6 * float(H.abs().max()))
    assert len({id(t) for t in mixed.H.values()}) == len(mixed.groups)


def test_float64_sums_do_not_grow_the_float32_error(hook_path):
    """Many batches of data with a large mean: summing float32 products in float32 loses
    digits as the sum grows, summing blocks of them in float64 does not (this fails if the
    blocks are never added: the error is then the float32 sum's)."""
    model = nn.Sequential(nn.Linear(16, 4))
    g = torch.Generator().manual_seed(5)
    batches = [1.0 + 1e-2 * torch.randn(64, 16, generator=g) for _ in range(400)]
    X = torch.cat(batches).double()
    exact = X.T @ X / X.shape[0]

    def error(H):
        return float((H.double() - exact).abs().max() / exact.abs().max())

    e32 = error(collect_hessians(model, batches, dtype=torch.float32, progress=False).H["0"])
    mixed = collect_hessians(model, batches, product_dtype=torch.float32, progress=False).H["0"]
    assert mixed.dtype == torch.float64
    assert error(mixed) <= e32 / 4 and error(mixed) <= 3e-7, (error(mixed), e32)
    # float64 sums: the reference sums the same 25 600 products in another order (the BLAS's
    # blocking depends on the CPU: 3.3e-15 on an Emerald Rapids machine, <= 1e-15 on an EPYC);
    # both are within ~sqrt(n) eps of the exact value, five orders below the float32 errors
    assert error(collect_hessians(model, batches, progress=False).H["0"]) <= 1e-13


def test_product_dtype_is_checked(tiny_bert, tiny_batches):
    with pytest.raises(ValueError, match="product_dtype .* wider than dtype"):
        collect_hessians(tiny_bert, tiny_batches, dtype=torch.float32,
                         product_dtype=torch.float64)
    with pytest.raises(ValueError, match="product_dtype must be"):
        collect_hessians(tiny_bert, tiny_batches, product_dtype=torch.float16)
    assert no_hooks(tiny_bert)


def test_blocked_kernel_with_ragged_blocks(tiny_bert, tiny_batches, monkeypatch):
    """The block-triangle X'X kernel when the blocks do not divide d_in."""
    model = tiny_bert.double()
    monkeypatch.setattr(hessians_module, "_MIN_BLOCK", 24)  # d_in 32 and 64: ragged blocks
    h_blocked = collect_hessians(model, tiny_batches)
    ref, _ = capture_reference(model, tiny_batches, find_layers(model))
    assert_hessians_equal(h_blocked.H, ref)


@pytest.mark.parametrize("product_dtype", [None, torch.float32])
def test_deferred_products_computed_mid_batch(tiny_bert, tiny_batches, monkeypatch,
                                              product_dtype):
    """Deferred path with the kept inputs over the byte limit after every input: each input's
    product is computed in its hook (shared slots keep them to the end of the batch), and
    the Hessians, groups and counts equal those of the run without the limit."""
    monkeypatch.setattr(hessians_module, "_FULL_PRODUCT_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(hessians_module, "_FLUSH_ROWS", 40)  # block sums added mid-run too
    model = tiny_bert.double()
    whole = collect_hessians(model, tiny_batches, product_dtype=product_dtype)
    computed = []
    compute = hessians_module._DeferredCollector._compute_stashed

    def counted(collector):
        computed.append(collector.stashed)
        compute(collector)

    monkeypatch.setattr(hessians_module._DeferredCollector, "_compute_stashed", counted)
    monkeypatch.setattr(hessians_module, "_STASH_BYTES", 0)
    limited = collect_hessians(model, tiny_batches, product_dtype=product_dtype)
    assert len(computed) == 8 * len(tiny_batches)  # each distinct input at once
    assert limited.groups == whole.groups and limited.n_tokens == whole.n_tokens
    assert_hessians_equal(limited.H, whole.H)
    # and a split of a shared group (Branchy, all three of width 4: in batch 1 a, b and c
    # read x and c reads 2x too; in batch 2 a and b stop sharing)
    torch.manual_seed(2)
    branchy = Branchy().double()
    batches = [(torch.randn(3, 5, 4, dtype=torch.float64), share) for share in (True, False)]
    computed.clear()
    limited = collect_hessians(branchy, batches, product_dtype=product_dtype)
    # batch 1: x, 2x (a, b, c one group); batch 2: x, its copy, 2x (c's x is a's: one
    # product for both, though a and c no longer share)
    assert len(computed) == 2 + 3
    monkeypatch.setattr(hessians_module, "_STASH_BYTES", 2**40)
    whole = collect_hessians(branchy, batches, product_dtype=product_dtype)
    assert len(computed) == 5
    assert limited.groups == whole.groups == [("a",), ("b",), ("c",)]
    assert limited.n_tokens == whole.n_tokens
    assert_hessians_equal(limited.H, whole.H)


class OpCounter(TorchDispatchMode):
    """Counts the aten operators that run, views (which compute nothing) left out."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += not func.is_view
        return func(*args, **(kwargs or {}))


def extra_ops_per_batch(model, batches):
    """The aten operators the hooks add to a forward pass per batch (a proxy for a GPU's
    kernel launches): from the runs over all batches and over the first one, so that the
    work done once (the first batch's split of the groups, the final divide) cancels."""
    def ops(fn, part):
        with OpCounter() as counter:
            fn(part)
        return counter.count

    def plain(part):
        with torch.no_grad():
            for b in part:
                model(**b)

    def hooks(part):
        collect_hessians(model, part, progress=False)

    extra = [ops(hooks, part) - ops(plain, part) for part in (batches, batches[:1])]
    return (extra[0] - extra[1]) / (len(batches) - 1)


def test_deferred_hooks_add_few_operators_per_batch(monkeypatch):
    """The deferred path's batch costs a fixed number of operators whatever the depth (one
    stack, index_select, cast and baddbmm per input width, the padding indices, the sums of
    the diagonals for the NaN test): 14 per batch on float32 tiny BERTs of 2 and 4 blocks
    with float64 sums, where the immediate products took 37.5 and 64.5 (a padding
    index_select, a cast and a product per distinct input)."""
    monkeypatch.setattr(hessians_module, "_FULL_PRODUCT_DEVICES", ("cpu", "cuda"))
    batches = make_tiny_batches(n_batches=3)
    counts = [extra_ops_per_batch(make_tiny_bert(layers=n), batches) for n in (2, 4)]
    assert counts[0] == counts[1] <= 16, counts


def test_deferred_inputs_modified_in_place_are_refused(monkeypatch):
    """The deferred products read the inputs at the end of the batch: an input changed in
    place after its layer read it is refused (the immediate products take it as read)."""
    model = nn.Sequential(nn.Linear(4, 3)).double()
    x = torch.randn(5, 4, dtype=torch.float64)

    def forward(m, batch):
        y = batch.clone()
        m(y)
        y.mul_(2)

    hess = collect_hessians(model, [x], forward=forward)
    torch.testing.assert_close(hess.H["0"], x.T @ x / 5, rtol=1e-12, atol=1e-14)
    monkeypatch.setattr(hessians_module, "_FULL_PRODUCT_DEVICES", ("cpu", "cuda"))
    with pytest.raises(ValueError, match="input of layer '0' was modified in place"):
        collect_hessians(model, [x], forward=forward)
    assert no_hooks(model)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("product_dtype", [None, torch.float32])
@pytest.mark.parametrize("stash_bytes", [None, 0])
def test_hessians_on_cuda_equal_the_cpu_reference(tiny_bert, tiny_batches, monkeypatch,
                                                  product_dtype, stash_bytes):
    """Model, batches and sums on a GPU (the deferred batched products there, also computed
    after every input with a byte limit of 0) give the Hessians of the CPU reference."""
    if stash_bytes is not None:
        monkeypatch.setattr(hessians_module, "_STASH_BYTES", stash_bytes)
    model = tiny_bert.double()
    ref, _ = capture_reference(model, tiny_batches, find_layers(model))
    batches = [{key: value.cuda() for key, value in b.items()} for b in tiny_batches]
    hess = collect_hessians(model.cuda(), batches, device="cuda", product_dtype=product_dtype)
    rtol = 1e-12 if product_dtype is None else 1e-5
    for name, R in ref.items():
        H = hess.H[name]
        assert H.device.type == "cuda" and H.dtype == torch.float64
        assert float((H.cpu() - R).abs().max()) <= rtol * float(R.abs().max()), name


def test_numpy_copy(tiny_bert, tiny_batches):
    hess = collect_hessians(tiny_bert, tiny_batches, dtype=torch.float32)
    name = "encoder.layer.0.output.dense"
    A = hess.numpy(name)
    assert isinstance(A, np.ndarray) and A.dtype == np.float64 and A.shape == (64, 64)
    np.testing.assert_array_equal(A, hess.H[name].double().numpy())
    A[0, 0] = -1.0
    assert float(hess.H[name][0, 0]) != -1.0  # a copy
    with pytest.raises(ValueError, match="name"):
        hess.numpy("nope")


def test_modules_selection_and_mode_restored(tiny_bert, tiny_batches):
    tiny_bert.train()
    hess = collect_hessians(tiny_bert, tiny_batches, modules=r"layer\.1\..*query|value")
    assert set(hess.H) == {f"encoder.layer.{i}.attention.self.value" for i in (0, 1)} | {
        "encoder.layer.1.attention.self.query"}
    assert hess.H["encoder.layer.1.attention.self.query"] is \
        hess.H["encoder.layer.1.attention.self.value"]
    assert all(m.training for m in tiny_bert.modules())
    assert no_hooks(tiny_bert)
    # eval mode inside: dropout off, so a second run gives identical Hessians
    again = collect_hessians(tiny_bert, tiny_batches, modules=r"layer\.1\..*query|value")
    for name in hess.H:
        assert torch.equal(hess.H[name], again.H[name])


# -- Conv1D (GPT-2) and plain torch models -----------------------------------------------------

def test_gpt2_conv1d(hook_path):
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=1, n_head=2)
    model = GPT2Model(config).double().eval()
    batches = make_tiny_batches(n_batches=2)
    layers = find_layers(model)
    assert list(layers) == ["h.0.attn.c_attn", "h.0.attn.c_proj", "h.0.mlp.c_fc",
                            "h.0.mlp.c_proj"]
    hess = collect_hessians(model, batches)
    sizes = {name: tuple(H.shape) for name, H in hess.H.items()}
    assert sizes == {"h.0.attn.c_attn": (32, 32), "h.0.attn.c_proj": (32, 32),
                     "h.0.mlp.c_fc": (32, 32), "h.0.mlp.c_proj": (128, 128)}
    ref, _ = capture_reference(model, batches, layers)
    assert_hessians_equal(hess.H, ref)


@pytest.mark.parametrize("arch", [a for a in ARCHITECTURES if a not in ("bert", "gpt2")])
def test_decoder_architectures(arch, hook_path):
    """The decoders the adapter prunes (``_models.tiny_config``: random weights, 2 blocks,
    grouped-query attention in llama and mistral), on both hook paths: H equals the
    reference of plain hooks, with padding dropped, and q/k/v share one H. Fails if a
    model's forward pass defeats the sharing or the deferred path (e.g. a layer input
    modified in place, which that path refuses). bert and gpt2 have tests of their own."""
    import transformers as tf

    torch.manual_seed(0)
    model = tf.AutoModel.from_config(tiny_config(arch)).double().eval()
    batches = make_tiny_batches(n_batches=2)
    layers = find_layers(model)
    hess = collect_hessians(model, batches)
    ref, counts = capture_reference(model, batches, layers)
    assert_hessians_equal(hess.H, ref)
    assert hess.n_tokens == counts
    assert any(len(group) >= 3 for group in hess.groups)


def test_sequential_tensor_and_tuple_batches(hook_path):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 3)).double()
    batches = [torch.randn(5, 6, dtype=torch.float64), torch.randn(7, 2, 6, dtype=torch.float64)]
    hess = collect_hessians(model, batches)
    X0 = torch.cat([b.reshape(-1, 6) for b in batches])
    X2 = torch.tanh(model[0](X0))
    torch.testing.assert_close(hess.H["0"], X0.T @ X0 / 19, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(hess.H["2"], X2.T @ X2 / 19, rtol=1e-12, atol=1e-14)
    assert hess.n_tokens == {"0": 19, "2": 19} and hess.groups == [("0",), ("2",)]
    as_tuples = collect_hessians(model, [(b,) for b in batches])
    assert torch.equal(as_tuples.H["0"], hess.H["0"])
    # a generator works too, and a custom forward
    from_gen = collect_hessians(model, (b for b in batches), forward=lambda m, b: m(b * 2))
    torch.testing.assert_close(from_gen.H["0"], 4 * hess.H["0"], rtol=1e-12, atol=1e-14)


class Branchy(nn.Module):
    """a and b read the same tensor when ``share`` is true, equal copies otherwise; c is
    called twice per forward pass on different tensors."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 3), nn.Linear(4, 3), nn.Linear(4, 2)

    def forward(self, x, share):
        y = self.a(x) + self.b(x if share else x.clone())
        return y.sum() + self.c(x).sum() + self.c(2 * x).sum()


@pytest.mark.parametrize("pattern", [(True, False, True), (False, True, True),
                                     (True, True, True), (True, True, False)])
def test_sharing_follows_every_batch(pattern, hook_path):
    """Layers share H only if they read the same object in every batch; a group that
    stops sharing is split without changing any value."""
    torch.manual_seed(2)
    model = Branchy().double()
    xs = [torch.randn(3, 5, 4, dtype=torch.float64) for _ in pattern]
    batches = [(x, share) for x, share in zip(xs, pattern)]
    hess = collect_hessians(model, batches)
    X = torch.cat([x.reshape(-1, 4) for x in xs])
    direct = X.T @ X / X.shape[0]
    torch.testing.assert_close(hess.H["a"], direct, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(hess.H["b"], direct, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(hess.H["c"], 2.5 * direct, rtol=1e-12, atol=1e-14)
    assert hess.n_tokens == {"a": 45, "b": 45, "c": 90}
    if all(pattern):
        assert hess.H["a"] is hess.H["b"] and hess.groups == [("a", "b"), ("c",)]
    else:
        assert hess.H["a"] is not hess.H["b"]
        assert hess.groups == [("a",), ("b",), ("c",)]


def test_layer_skipped_in_some_batches(hook_path):
    """A layer not called in a batch gets no tokens from it, even if it shared before."""
    torch.manual_seed(4)
    model = Branchy().double()
    xs = [torch.randn(4, 4, dtype=torch.float64) for _ in range(3)]

    def forward(m, batch):
        x, skip_b = batch
        m.a(x)
        if not skip_b:
            m.b(x)

    hess = collect_hessians(model, [(xs[0], False), (xs[1], True), (xs[2], False)],
                            modules=["a", "b"], forward=forward)
    Xa = torch.cat(xs)
    Xb = torch.cat([xs[0], xs[2]])
    torch.testing.assert_close(hess.H["a"], Xa.T @ Xa / 12, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(hess.H["b"], Xb.T @ Xb / 8, rtol=1e-12, atol=1e-14)
    assert hess.n_tokens == {"a": 12, "b": 8}


# -- MiniLM ------------------------------------------------------------------------------------

def test_minilm(minilm, hook_path):
    bert = minilm[0].auto_model
    sentences = ["Return the sum of the array elements over a given axis.",
                 "Compute the eigenvalues of a general matrix.",
                 "Padding is not data.",
                 "The quick brown fox jumps over the lazy dog near the river bank today."]
    batches = [dict(minilm.tokenizer(sentences[i:i + 2], padding=True, return_tensors="pt"))
               for i in (0, 2)]
    hess = collect_hessians(bert, batches)
    assert len(hess.H) == 36 and len(hess.groups) == 6 * 4
    n_real = sum(int(b["attention_mask"].sum()) for b in batches)
    assert set(hess.n_tokens.values()) == {n_real}
    for i in range(6):
        q, k, v = (f"encoder.layer.{i}.{s}" for s in QKV)
        assert hess.H[q] is hess.H[k] is hess.H[v]
    for group in hess.groups:
        H = hess.H[group[0]]
        assert torch.equal(H, H.T)
        # PSD: a Cholesky factorization succeeds after a 1e-10 relative shift
        scale = float(H.diagonal().max())
        eye = torch.eye(H.shape[0], dtype=H.dtype)
        assert int(torch.linalg.cholesky_ex(H + 1e-10 * scale * eye).info) == 0, group
        assert scale > 0
    # one layer against the independent capture (MiniLM runs in float32)
    name = "encoder.layer.5.output.dense"
    ref, _ = capture_reference(bert, batches, {name: find_layers(bert)[name]})
    assert_hessians_equal({name: hess.H[name]}, ref)
    assert no_hooks(bert)


# -- bad input ---------------------------------------------------------------------------------

def test_bad_input_errors(tiny_bert, tiny_batches):
    with pytest.raises(ValueError, match="batches is empty"):
        collect_hessians(tiny_bert, [])
    with pytest.raises(ValueError, match="batches is empty"):
        collect_hessians(tiny_bert, iter([]))
    with pytest.raises(ValueError, match="batches must be an iterable"):
        collect_hessians(tiny_bert, 3)
    with pytest.raises(ValueError, match="no nn.Linear / Conv1D layer"):
        collect_hessians(tiny_bert, tiny_batches, modules="no_such_layer")
    with pytest.raises(ValueError, match="dtype"):
        collect_hessians(tiny_bert, tiny_batches, dtype=torch.float16)
    with pytest.raises(ValueError, match="forward must be callable"):
        collect_hessians(tiny_bert, tiny_batches, forward="model")
    with pytest.raises(ValueError, match="device"):
        collect_hessians(tiny_bert, tiny_batches, device="not-a-device")
    with pytest.raises(ValueError, match="progress"):
        collect_hessians(tiny_bert, tiny_batches, progress="yes")
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        collect_hessians("model", tiny_batches)
    all_padding = [{"input_ids": b["input_ids"], "attention_mask": torch.zeros_like(
        b["attention_mask"])} for b in tiny_batches]
    with pytest.raises(ValueError, match="no tokens reached layer"):
        collect_hessians(tiny_bert, all_padding)
    assert no_hooks(tiny_bert)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_activations_name_the_layer(bad, hook_path):
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    good = torch.randn(6, 4, dtype=torch.float64)
    poisoned = good.clone()
    poisoned[2, 1] = bad
    with pytest.raises(ValueError, match=r"non-finite activations .* layer\(s\) 0(, 2)? in batch 1"):
        collect_hessians(model, [good, poisoned])
    assert no_hooks(model)
    # float32 products summed in blocks: the pending block is checked after every batch
    with pytest.raises(ValueError,
                       match=r"non-finite activations .* layer\(s\) 0(, 2)? in batch 1"):
        collect_hessians(model.float(), [good.float(), poisoned.float(), good.float()],
                         product_dtype=torch.float32)
    assert no_hooks(model)
    assert torch.isfinite(poisoned[0]).all() and not torch.isfinite(poisoned[2, 1])  # untouched


def test_deferred_finiteness_test_every_few_batches_names_the_first_bad_batch(monkeypatch):
    """On the deferred path the NaN/inf test waits for the device, so it runs every
    ``_CHECK_EVERY`` batches (here 2) and at the end, from per-batch diagonals kept on the
    device: a NaN in batch 3 (of 6) stops the run at the test after batch 3, naming batch 3
    and its layer, although the test there also sees batch 2 and the sums stay NaN."""
    monkeypatch.setattr(hessians_module, "_FULL_PRODUCT_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(hessians_module, "_CHECK_EVERY", 2)
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    xs = [torch.randn(6, 4, dtype=torch.float64) for _ in range(6)]
    xs[3][1, 2] = float("nan")
    consumed = []

    def batches():
        for x in xs:
            consumed.append(x)
            yield x

    with pytest.raises(ValueError, match=r"layer\(s\) 0, 2 in batch 3 "):
        collect_hessians(model, batches())
    assert len(consumed) == 4  # tested after batches 1 and 3, not only at the end
    assert no_hooks(model)


def test_deferred_finiteness_test_overflow_is_not_an_error(hook_path):
    """Finite float32 sums whose diagonal sums overflow (64 entries of 1.2e37) are not
    reported as non-finite activations."""
    model = nn.Sequential(nn.Linear(64, 2))
    x = torch.full((1, 64), 3.5e18)
    hess = collect_hessians(model, [x, x], dtype=torch.float32)
    assert torch.isfinite(hess.H["0"]).all()
    assert not torch.isfinite(hess.H["0"].diagonal().sum())


def test_deferred_plan_reused_only_for_batches_read_alike(monkeypatch):
    """The deferred path reuses a batch's plan for the next batch read alike (same layers,
    inputs shared alike, widths and dtypes; the lengths may differ) and makes a new one
    otherwise: Hessians as the immediate path's, plans made only where the reading changed."""
    torch.manual_seed(5)
    model = Branchy().double()
    shapes = [(3, 5), (2, 7), (2, 7), (4, 1), (3, 5), (3, 5)]
    shares = [True, True, False, False, True, False]
    batches = [(torch.randn(*shape, 4, dtype=torch.float64), share)
               for shape, share in zip(shapes, shares)]
    immediate = collect_hessians(model, batches)
    monkeypatch.setattr(hessians_module, "_FULL_PRODUCT_DEVICES", ("cpu", "cuda"))
    made = []
    split = hessians_module._DeferredCollector._split

    def counted(collector):
        made.append(len(collector.slots))
        return split(collector)

    monkeypatch.setattr(hessians_module._DeferredCollector, "_split", counted)
    deferred = collect_hessians(model, batches)
    # the slots before each new plan. Batch 1: the first plan (a and b share, c does not);
    # 2: reused (other lengths); 3: a and b read different objects (a split); 4: reused;
    # 5: a and b read one object again, as in batch 1, but only the last plan is kept; 6: as
    # batch 4, for the same reason
    assert made == [1, 2, 3, 3]
    assert deferred.groups == immediate.groups == [("a",), ("b",), ("c",)]
    assert deferred.n_tokens == immediate.n_tokens
    assert_hessians_equal(deferred.H, {name: H for name, H in immediate.H.items()})


class Lenient(nn.Linear):
    """A linear layer that reads only the first ``in_features`` entries of its input."""

    def forward(self, x):
        return super().forward(x[..., :self.in_features])


def test_input_of_the_wrong_width_names_the_layer(hook_path):
    """A layer whose input is wider than its weights is refused, naming it (the immediate
    hooks at once, the deferred ones at the end of the batch)."""
    model = nn.Sequential(Lenient(4, 3)).double()
    with pytest.raises(ValueError, match=r"layer '0' received an input with last dimension "
                                         r"6, expected d_in = 4"):
        collect_hessians(model, [torch.randn(5, 6, dtype=torch.float64)])
    assert no_hooks(model)


def test_hooks_removed_and_mode_restored_after_exception(tiny_bert, tiny_batches):
    tiny_bert.train()

    def failing(model, batch):
        model(**batch)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        collect_hessians(tiny_bert, tiny_batches, forward=failing)
    assert no_hooks(tiny_bert)
    assert all(m.training for m in tiny_bert.modules())


def test_progress_bar(tiny_bert, capsys):
    batches = make_tiny_batches(n_batches=21, batch=2, seq=4)
    collect_hessians(tiny_bert, batches)  # None: auto, on for > 20 batches
    assert "collect_hessians" in capsys.readouterr().err
    collect_hessians(tiny_bert, batches, progress=False)
    assert "collect_hessians" not in capsys.readouterr().err


def test_fill_upper_in_blocks_equals_the_whole_matrix_formula():
    """The upper triangle is filled block row by block row (no second d x d matrix): bit for
    bit what S.tril_(); S += S.T.triu(1) gives, for sizes that are and are not multiples."""
    from sparseopt_torch.hessians import _fill_upper

    g = torch.Generator().manual_seed(0)
    for d, block in ((300, 128), (256, 128), (5, 2), (1, 128)):
        S = torch.randn(d, d, generator=g, dtype=torch.float64)
        ref = S.clone()
        ref.tril_()
        ref += ref.T.triu(1)
        _fill_upper(S, block)
        assert torch.equal(S, ref)
