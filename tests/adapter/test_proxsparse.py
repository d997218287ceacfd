"""ProxSparse end-to-end mask learning (proxsparse-liu Alg. 1): sparseopt_torch.proxsparse."""

import copy
from dataclasses import fields

import numpy as np
import pytest
import torch
from _models import make_tiny_batches, make_tiny_bert

from sparseopt import NM
from sparseopt_torch import find_layers, get_weight
from sparseopt_torch.kernels import prox24
from sparseopt_torch.proxsparse import (
    ProxSparseSettings,
    apply_masks,
    embedding_distance_loss,
    mask_24,
    proxsparse,
    reg_w0,
)


def run_proxsparse(model, batches, loss_fn, **kwargs):
    """:func:`proxsparse` with the :class:`ProxSparseSettings` fields among ``kwargs`` as
    its settings."""
    names = {f.name for f in fields(ProxSparseSettings)}
    settings = ProxSparseSettings(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})
    return proxsparse(model, batches, loss_fn, settings, **kwargs)


@pytest.fixture(scope="module")
def teacher_targets():
    """Outputs of a different tiny BERT on the tiny batches: a loss with a nonzero gradient
    at the original weights (distillation towards another network)."""
    teacher = make_tiny_bert(seed=1)
    with torch.no_grad():
        return [teacher(**b).last_hidden_state for b in make_tiny_batches()]


def make_loss(batches, targets):
    lookup = {id(b): t for b, t in zip(batches, targets)}

    def loss_fn(model, batch):
        out = model(**batch).last_hidden_state
        return (out - lookup[id(batch)]).square().mean()

    return loss_fn


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_state(model, snap):
    state = model.state_dict()
    assert state.keys() == snap.keys()
    for k, v in snap.items():
        assert torch.equal(state[k], v), k


def is_24(W):
    return bool(((W.reshape(-1, 4) != 0).sum(dim=1) <= 2).all())


def reference_adamw(model, batches, loss_fn, order, *, lr, weight_decay=0.0, lam1=0.0,
                    lam2=0.0, eps=0.1, prox_lam=None):
    """Independent run on a copy: torch's AdamW, constant lr, Reg_W0 written out here,
    per-layer prox24 after each step. Returns the learned (d_out, d_in) weights."""
    model = copy.deepcopy(model)
    layers = find_layers(model)
    for p in model.parameters():
        p.requires_grad_(False)
    params = [m.weight for m in layers.values()]
    W0 = [p.detach().clone() for p in params]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    for i in order:
        opt.zero_grad()
        loss = loss_fn(model, batches[i])
        for p, p0 in zip(params, W0):
            sgn = torch.where(p0 < 0, -1.0, 1.0)  # sign(0) = +1: |denominator| >= eps
            loss = loss + lam2 * ((p / (p0 + eps * sgn)) * (p - p0)).pow(2).sum()
        loss.backward()
        opt.step()
        if prox_lam:
            with torch.no_grad():
                for m in layers.values():
                    W = get_weight(m)
                    W.copy_(prox24(W.contiguous(), prox_lam))
    return {n: get_weight(m).clone() for n, m in layers.items()}


# ----------------------------------------------------------------------------- mask_24


def test_mask_24_matches_core_nm_mask_with_ties_zeros_signs():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((50, 16))
    W[::3, :4] = 1.5  # all four tied
    W[1::3, 4:8] = [0.0, -2.0, 2.0, 0.0]  # tie between signs, zeros
    W[2::3, 8:12] = 0.0  # all zero
    W[5, 12:16] = [-0.3, 0.3, -0.3, 0.1]
    for tdtype, ndtype in ((torch.float32, np.float32), (torch.float64, np.float64)):
        got = mask_24(torch.tensor(W, dtype=tdtype)).numpy()
        want = NM(2, 4).mask(W.astype(ndtype))
        np.testing.assert_array_equal(got, want)
        assert got.reshape(-1, 4).sum(axis=1).tolist() == [2] * (W.size // 4)
    # many ties: entries drawn from {-2, ..., 2}
    T = rng.integers(-2, 3, size=(200, 8)).astype(np.float64)
    np.testing.assert_array_equal(mask_24(torch.tensor(T)).numpy(), NM(2, 4).mask(T))


def test_mask_24_bad_input():
    with pytest.raises(ValueError, match="multiple of 4"):
        mask_24(torch.zeros(3, 6))
    with pytest.raises(ValueError, match="NaN"):
        mask_24(torch.tensor([1.0, float("nan"), 0.0, 0.0]))
    with pytest.raises(ValueError, match="floating"):
        mask_24(torch.zeros(2, 4, dtype=torch.int64))


# ------------------------------------------------------------------------------ reg_w0


def test_reg_w0_formula_guard_and_null_space():
    W0 = torch.tensor([[0.5, -0.2, 0.0, 1e-12], [-1e-12, 2.0, -3.0, 0.1]], dtype=torch.float64)
    W = torch.tensor([[0.4, -0.1, 0.3, 0.2], [0.5, 0.0, -3.0, -0.1]], dtype=torch.float64)
    eps = 0.1
    w, w0 = W.numpy(), W0.numpy()
    denom = w0 + eps * np.where(w0 >= 0, 1.0, -1.0)
    want = np.sum((w / denom * (w - w0)) ** 2)
    assert float(reg_w0(W, W0, eps)) == pytest.approx(want, rel=1e-14)
    # the guard: every |denominator| >= eps, so W0 = 0 or +-1e-12 gives a bounded value
    assert np.all(np.abs(denom) >= eps)
    # Prop. 2.1: zero iff every nonzero entry of W equals W0; zeros of W cost nothing
    W_kept = torch.where(torch.rand_like(W0, generator=torch.Generator().manual_seed(0)) < 0.5,
                         W0, torch.zeros_like(W0))
    assert float(reg_w0(W_kept, W0, eps)) == 0.0
    assert float(reg_w0(W_kept + 1e-3, W0, eps)) > 0.0
    with pytest.raises(ValueError, match="eps"):
        reg_w0(W, W0, 0.0)


# ------------------------------------------------------------------------------ proxsparse


def test_masks_are_24_and_model_left_unchanged(tiny_bert, tiny_batches, teacher_targets):
    loss_fn = make_loss(tiny_batches, teacher_targets)
    before = snapshot(tiny_bert)
    flags = {n: p.requires_grad for n, p in tiny_bert.named_parameters()}
    res = run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=5.0, lam2=0.1, lr=1e-3, steps=4,
                     progress=False)
    assert_same_state(tiny_bert, before)
    assert {n: p.requires_grad for n, p in tiny_bert.named_parameters()} == flags
    assert all(p.grad is None for p in tiny_bert.parameters())
    layers = find_layers(tiny_bert)
    assert list(res.masks) == list(layers) and len(layers) == 12
    for name, M in res.masks.items():
        assert M.dtype == torch.bool and M.shape == get_weight(layers[name]).shape
        assert M.reshape(-1, 4).sum(dim=1).eq(2).all()
    for key in ("loss", "reg_w0", "objective", "lr", "lam", "r24", "frac_24", "mask_change",
                "time"):
        assert res.history[key].shape == (4,) and np.isfinite(res.history[key]).all()
    assert res.history["reg_w0"][0] == 0.0  # W_0 = W0
    assert res.history["reg_w0"][-1] > 0.0
    assert res.info["n_groups"] == sum(get_weight(m).numel() // 4 for m in layers.values())
    assert res.weights is None


def test_apply_masks_gives_original_times_mask(tiny_bert, tiny_batches, teacher_targets):
    res = run_proxsparse(tiny_bert, tiny_batches, make_loss(tiny_batches, teacher_targets),
                     lam1=5.0, lam2=0.0, lr=1e-3, steps=2, progress=False)
    before = snapshot(tiny_bert)
    apply_masks(tiny_bert, res.masks)
    layers = find_layers(tiny_bert)
    after = tiny_bert.state_dict()
    for name, module in layers.items():
        W = get_weight(module)
        assert torch.equal(W, before[name + ".weight"] * res.masks[name])
        assert is_24(W)
        assert torch.equal(after[name + ".bias"], before[name + ".bias"])
    untouched = [k for k in before if k[: -len(".weight")] not in layers]
    assert untouched and all(torch.equal(after[k], before[k]) for k in untouched)


def test_apply_masks_bad_input_changes_nothing(tiny_bert):
    layers = find_layers(tiny_bert)
    masks = {n: mask_24(get_weight(m)) for n, m in layers.items()}
    before = snapshot(tiny_bert)
    bad = dict(masks)
    bad[list(layers)[-1]] = masks[list(layers)[-1]][:, :8]
    with pytest.raises(ValueError, match="shape"):
        apply_masks(tiny_bert, bad)
    bad[list(layers)[-1]] = masks[list(layers)[-1]].float()
    with pytest.raises(ValueError, match="bool"):
        apply_masks(tiny_bert, bad)
    with pytest.raises(ValueError, match="not_a_layer"):
        apply_masks(tiny_bert, {"not_a_layer": masks[list(layers)[0]]})
    with pytest.raises(ValueError, match="masks"):
        apply_masks(tiny_bert, {})
    assert_same_state(tiny_bert, before)


def test_no_regularization_is_plain_adamw(tiny_bert, tiny_batches, teacher_targets):
    loss_fn = make_loss(tiny_batches, teacher_targets)
    lr, wd = 1e-3, 0.01
    # one step by hand: Adam's first step is lr g / (|g| + 1e-8) (bias-corrected moments)
    res1 = run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=0.0, lam2=0.0, lr=lr, steps=1,
                      warmup=0.0, weight_decay=wd, shuffle=False, keep_weights=True,
                      progress=False)
    model = copy.deepcopy(tiny_bert)
    loss_fn(model, tiny_batches[0]).backward()
    for name, module in find_layers(model).items():
        W0, g = module.weight.detach(), module.weight.grad
        want = W0 * (1 - lr * wd) - lr * g / (g.abs() + 1e-8)
        torch.testing.assert_close(res1.weights[name], want, rtol=1e-6, atol=1e-9)
        assert not torch.equal(res1.weights[name], W0)
    # several steps against torch's AdamW on a copy (constant lr, batches in order)
    res = run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=0.0, lam2=0.0, lr=lr, steps=5,
                     warmup=0.0, schedule="constant", weight_decay=wd, shuffle=False,
                     keep_weights=True, progress=False)
    want = reference_adamw(tiny_bert, tiny_batches, loss_fn, [0, 1, 2, 0, 1], lr=lr,
                           weight_decay=wd)
    for name in want:
        torch.testing.assert_close(res.weights[name], want[name], rtol=1e-5, atol=1e-8)
    np.testing.assert_array_equal(res.history["lr"], lr)
    assert res.history["frac_24"][-1] < 0.01  # no prox: the weights stay dense


def test_reg_w0_enters_the_gradient(tiny_bert, tiny_batches, teacher_targets):
    loss_fn = make_loss(tiny_batches, teacher_targets)
    kw = dict(lr=1e-3, warmup=0.0, schedule="constant", shuffle=False)
    res = run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=0.0, lam2=50.0, eps=0.05,
                     steps=3, keep_weights=True, progress=False, **kw)
    want = reference_adamw(tiny_bert, tiny_batches, loss_fn, [0, 1, 2], lr=1e-3, lam2=50.0,
                           eps=0.05)
    plain = reference_adamw(tiny_bert, tiny_batches, loss_fn, [0, 1, 2], lr=1e-3)
    for name in want:
        torch.testing.assert_close(res.weights[name], want[name], rtol=1e-5, atol=1e-8)
    assert any(not torch.allclose(want[n], plain[n], atol=1e-7) for n in want)


@pytest.mark.parametrize("scaled", [False, True])
def test_prox_step_is_prox24_of_the_adamw_step(tiny_bert, tiny_batches, teacher_targets,
                                               scaled):
    loss_fn = make_loss(tiny_batches, teacher_targets)
    lr, lam1 = 1e-3, (4000.0 if scaled else 4.0)
    res = run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=lam1, lam2=0.0, lr=lr, steps=2,
                     warmup=0.0, schedule="constant", shuffle=False, prox_lr_scaled=scaled,
                     keep_weights=True, progress=False)
    lam = lam1 * lr if scaled else lam1
    np.testing.assert_allclose(res.history["lam"], lam, rtol=1e-15)
    want = reference_adamw(tiny_bert, tiny_batches, loss_fn, [0, 1], lr=lr, prox_lam=lam)
    for name in want:
        torch.testing.assert_close(res.weights[name], want[name], rtol=1e-5, atol=1e-8)
    # the prox did something: some exact zeros, some 2:4 groups
    assert 0.0 < res.history["frac_24"][-1] < 1.0


def test_large_lam1_makes_the_learned_weights_24(tiny_bert, tiny_batches, teacher_targets):
    res = run_proxsparse(tiny_bert, tiny_batches, make_loss(tiny_batches, teacher_targets),
                     lam1=1e4, lam2=0.0, lr=1e-3, steps=3, keep_weights=True, progress=False)
    assert res.history["frac_24"][-1] == 1.0 and res.info["frac_24"] == 1.0
    assert res.history["r24"][-1] == 0.0
    for name, W in res.weights.items():
        assert is_24(W)
        assert not (W != 0)[~res.masks[name]].any()  # the mask is the support of W_K


def test_moderate_lam1_sparsifies_gradually(tiny_bert, tiny_batches, teacher_targets):
    res = run_proxsparse(tiny_bert, tiny_batches, make_loss(tiny_batches, teacher_targets),
                     lam1=30.0, lam2=0.0, lr=1e-3, steps=6, progress=False)
    frac = res.history["frac_24"]
    assert 0.0 < frac[0] < frac[-1] < 1.0  # fraction of 2:4 groups grows, not all at once
    assert res.history["r24"][-1] < res.history["r24"][0]


def test_warmup_and_linear_decay_schedule(tiny_bert, tiny_batches, teacher_targets):
    res = run_proxsparse(tiny_bert, tiny_batches, make_loss(tiny_batches, teacher_targets),
                     lam1=0.0, lam2=0.0, lr=0.01, steps=10, warmup=0.2, progress=False)
    # ceil(0.2 * 10) = 2 warm-up steps at 1/3, 2/3 of lr, then (10 - k) / 8
    want = 0.01 * np.array([1 / 3, 2 / 3, 1, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8])
    np.testing.assert_allclose(res.history["lr"], want, rtol=1e-12)
    assert res.info["warmup_steps"] == 2


def test_deterministic_with_seed_and_caller_rng_untouched(tiny_bert, tiny_batches,
                                                          teacher_targets):
    loss_fn = make_loss(tiny_batches, teacher_targets)
    kw = dict(lam1=5.0, lam2=0.1, lr=1e-3, steps=6, progress=False)
    rng = torch.get_rng_state()
    a = run_proxsparse(tiny_bert, tiny_batches, loss_fn, seed=0, **kw)
    assert torch.equal(torch.get_rng_state(), rng)
    b = run_proxsparse(tiny_bert, tiny_batches, loss_fn, seed=0, **kw)
    c = run_proxsparse(tiny_bert, tiny_batches, loss_fn, seed=1, **kw)
    for key in a.history:
        if key != "time":
            np.testing.assert_array_equal(a.history[key], b.history[key])
    assert all(torch.equal(a.masks[n], b.masks[n]) for n in a.masks)
    # another seed visits the batches in another order
    assert not np.array_equal(a.history["loss"], c.history["loss"])


def test_conv1d_layers(tiny_batches):
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2,
                                 n_positions=64)).eval()
    before = snapshot(model)

    def loss_fn(m, batch):
        return m(input_ids=batch["input_ids"]).last_hidden_state.square().mean()

    res = run_proxsparse(model, tiny_batches, loss_fn, lam1=1e4, lam2=1.0, lr=1e-3, steps=2,
                     keep_weights=True, progress=False)
    assert_same_state(model, before)
    layers = find_layers(model)
    assert len(layers) == 4
    for name, module in layers.items():
        assert res.masks[name].shape == get_weight(module).shape  # (d_out, d_in)
        assert is_24(res.weights[name])
    apply_masks(model, res.masks)
    for name, module in layers.items():
        assert torch.equal(get_weight(module),
                           before[name + ".weight"].T * res.masks[name])


def test_interrupted_run_restores_the_model(tiny_bert, tiny_batches, teacher_targets):
    inner = make_loss(tiny_batches, teacher_targets)
    calls = []

    def loss_fn(model, batch):
        calls.append(1)
        loss = inner(model, batch)
        return loss * float("nan") if len(calls) == 3 else loss

    before = snapshot(tiny_bert)
    flags = {n: p.requires_grad for n, p in tiny_bert.named_parameters()}
    with pytest.raises(ValueError, match="non-finite loss at step 2"):
        run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=5.0, lam2=0.1, lr=1e-2, steps=5,
                   progress=False)
    assert_same_state(tiny_bert, before)
    assert {n: p.requires_grad for n, p in tiny_bert.named_parameters()} == flags


@pytest.mark.parametrize("bad, match", [
    (dict(lam1=-1.0), "lam1"),
    (dict(lam2=-0.5), "lam2"),
    (dict(lam1=float("nan")), "lam1"),
    (dict(steps=0), "steps"),
    (dict(steps=2.5), "steps"),
    (dict(lr=0.0), "lr"),
    (dict(warmup=1.5), "warmup"),
    (dict(eps=0.0), "eps"),
    (dict(weight_decay=-1.0), "weight_decay"),
    (dict(schedule="cosine"), "schedule"),
    (dict(modules="no_such_layer"), "modules"),
    (dict(seed=0.5), "seed"),
])
def test_bad_arguments(tiny_bert, tiny_batches, bad, match):
    kw = dict(lam1=1.0, lam2=0.0, lr=1e-3, steps=2, progress=False)
    kw.update(bad)
    with pytest.raises(ValueError, match=match):
        run_proxsparse(tiny_bert, tiny_batches, lambda m, b: m(**b).last_hidden_state.sum(), **kw)


def test_bad_data_and_loss(tiny_bert, tiny_batches):
    kw = dict(lam1=1.0, lam2=0.0, lr=1e-3, steps=2, progress=False)
    with pytest.raises(ValueError, match="batches"):
        run_proxsparse(tiny_bert, [], lambda m, b: m(**b).last_hidden_state.sum(), **kw)
    with pytest.raises(ValueError, match="loss_fn"):
        run_proxsparse(tiny_bert, tiny_batches, "mse", **kw)
    with pytest.raises(ValueError, match="scalar"):
        run_proxsparse(tiny_bert, tiny_batches, lambda m, b: m(**b).last_hidden_state, **kw)
    with pytest.raises(ValueError, match="multiple of 4"):
        net = torch.nn.Sequential(torch.nn.Linear(6, 4))
        run_proxsparse(net, [torch.zeros(2, 6)], lambda m, b: m(b).sum(), **kw)


# ------------------------------------------------------------------------------ MiniLM


def test_minilm_embedding_distance_and_learned_masks(minilm):
    sentences = ["Return the indices of the maximum values along an axis.",
                 "Compute the one-dimensional discrete Fourier transform.",
                 "Solve a linear matrix equation, or system of linear scalar equations.",
                 "Find the unique elements of an array.",
                 "Integrate along the given axis using the composite trapezoidal rule.",
                 "Return a new array of given shape and type, filled with zeros.",
                 "Compute the eigenvalues of a general matrix.",
                 "Minimization of scalar function of one or more variables."]
    # both kinds of tokenized dicts: SentenceTransformer's own, and a tokenizer's tensors
    # (what sparseopt_torch.data.token_batches makes)
    batches = [minilm.preprocess(sentences[:4]),
               dict(minilm.tokenizer(sentences[4:], padding=True, return_tensors="pt"))]
    keys = [set(b) for b in batches]
    loss_fn = embedding_distance_loss(minilm)
    modules = r"encoder\.layer\.5\."
    layers = find_layers(minilm, modules)
    assert len(layers) == 6
    before = {n: get_weight(m).clone() for n, m in layers.items()}

    # the dense model is at distance 0 from itself; the batch dicts are not modified
    assert float(loss_fn(minilm, batches[0]).detach()) == 0.0
    assert [set(b) for b in batches] == keys

    res = run_proxsparse(minilm, batches, loss_fn, modules=modules, lam1=2.0, lam2=0.1, lr=1e-3,
                     steps=4, warmup=0.25, progress=False)
    for name, module in layers.items():
        assert torch.equal(get_weight(module), before[name])
        assert res.masks[name].reshape(-1, 4).sum(dim=1).eq(2).all()
    assert res.history["loss"][0] == 0.0  # W_0 = W0: the embeddings of the dense model
    assert res.history["loss"][-1] > 0.0
    # the learned masks are not magnitude pruning of the original weights
    assert res.info["mask_vs_magnitude"] > 0.0

    # the loss is 2 (1 - cos) for the normalized embeddings (docstring), on a pruned copy
    pruned = copy.deepcopy(minilm)
    apply_masks(pruned, res.masks)
    feats = dict(batches[1])
    with torch.no_grad():
        e = pruned(dict(feats))["sentence_embedding"]
        e0 = minilm(dict(feats))["sentence_embedding"]
        got = float(loss_fn(pruned, batches[1]))
    want = float((2 - 2 * torch.nn.functional.cosine_similarity(e, e0)).mean())
    assert got > 0 and got == pytest.approx(want, rel=1e-4)


def test_bfloat16_weights_keep_their_dtype():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    net = net.to(torch.bfloat16)
    X = torch.randn(32, 16, dtype=torch.bfloat16)
    Y = torch.randn(32, 4, dtype=torch.bfloat16)
    before = snapshot(net)
    res = run_proxsparse(net, [(X, Y)], lambda m, b: (m(b[0]) - b[1]).float().square().mean(),
                     lam1=2.0, lam2=0.1, lr=1e-2, steps=5, keep_weights=True, progress=False)
    assert_same_state(net, before)
    for name, W in res.weights.items():
        assert W.dtype == torch.bfloat16
        assert res.masks[name].reshape(-1, 4).sum(dim=1).eq(2).all()
    assert 0 < res.history["frac_24"][0] < res.history["frac_24"][-1]


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_prox_of_several_layers_in_chunks_equals_prox24_per_layer(chunk):
    from sparseopt_torch.proxsparse import _prox_layers

    g = torch.Generator().manual_seed(0)
    Ws = [torch.randn(3, 8, generator=g), torch.randn(5, 4, generator=g),
          torch.randn(2, 12, generator=g, dtype=torch.float64),
          torch.randn(4, 8, generator=g).T.contiguous().T]  # a transposed (Conv1D-like) view
    want = [prox24(W.contiguous(), 0.7) for W in Ws]
    got = [W.clone() for W in Ws[:3]] + [Ws[3].clone().T.contiguous().T]
    _prox_layers(got, 0.7, prox24, chunk=chunk)
    for G, Wt, W in zip(got, want, Ws):
        assert G.dtype == W.dtype
        torch.testing.assert_close(G, Wt, rtol=0, atol=0)


def test_record_every_thins_the_history_but_not_the_run(tiny_bert, tiny_batches):
    def loss_fn(model, batch):
        return model(**batch).last_hidden_state.pow(2).mean()

    full = run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=0.5, lam2=0.1, lr=1e-2, steps=7,
                      progress=False)
    thin = run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=0.5, lam2=0.1, lr=1e-2, steps=7,
                      record_every=3, progress=False)
    assert list(thin.history["step"]) == [0, 3, 6]
    assert list(full.history["step"]) == list(range(7))
    for key in ("loss", "reg_w0", "objective", "r24", "frac_24"):
        np.testing.assert_allclose(thin.history[key], full.history[key][[0, 3, 6]],
                                   rtol=1e-12, err_msg=key)
    for n in full.masks:
        assert torch.equal(full.masks[n], thin.masks[n])
    with pytest.raises(ValueError, match="record_every"):
        run_proxsparse(tiny_bert, tiny_batches, loss_fn, lam1=0.5, lam2=0.0, lr=1e-2, steps=2,
                   record_every=0, progress=False)
