"""The ``kubler_appc_commit`` theory check (prox24-kubler App. C's early commitment, Table 2's
order) in quick mode, and a break that must make it fail."""

from __future__ import annotations

from theory_checks._testing import assert_quick_run_holds, prox_rnm_replaced_by, run_quick


def test_kubler_appc_commit_holds_quick(tmp_path):
    ok, got = run_quick("kubler_appc_commit", tmp_path)
    assert_quick_run_holds("kubler_appc_commit", ok, got, tmp_path)


def test_kubler_appc_commit_fails_when_rnm_commits_at_once(monkeypatch, tmp_path):
    """An r_{2:4} run whose mask is fixed after its first iteration (the pruner's prox of
    r_{2:4} replaced by R1's soft thresholding): it no longer commits later than R0-R2."""
    prox_rnm_replaced_by(monkeypatch, "R1")
    ok, got = run_quick("kubler_appc_commit", tmp_path)
    assert ok is False
    assert got["kubler-appc-commit"][1] is False
    # and "r_{2:4} gives the best mask on every layer" (Table 2's first place) no longer holds
    assert got["kubler-table2-order"][1] is False


# --- kubler_d3_prox_gd: App. D.3 / Table 7 -------------------------------------------------


def test_kubler_d3_prox_gd_holds_quick(tmp_path):
    ok, got = run_quick("kubler_d3_prox_gd", tmp_path)
    assert_quick_run_holds("kubler_d3_prox_gd", ok, got, tmp_path)


def test_kubler_d3_prox_gd_fails_for_masked_steps_that_are_too_long(monkeypatch, tmp_path):
    """Masked GD with step 1.2 / gamma_max(H), above the 1 / gamma_max at which the steps
    stop decreasing L (its gradient is 2 (W - W*) H): the loss rises, monotonicity fails."""
    import sparseopt.layer as layer

    orig = layer.masked_gd

    def too_long(W, W_star, H, mask, steps, step=None, **kw):
        return orig(W, W_star, H, mask, steps, 1.2 / layer.gamma_max(H), **kw)

    monkeypatch.setattr(layer, "masked_gd", too_long)
    ok, got = run_quick("kubler_d3_prox_gd", tmp_path)
    assert ok is False
    assert got["kubler-d3-prox-gd-monotone"][1] is False


def test_kubler_d3_prox_gd_fails_for_a_prox_without_gradient_steps(monkeypatch, tmp_path):
    """A 'prox' that is the magnitude projection (no gradient steps during pruning): +GD then
    gains as much as on Wanda's mask or more, so "already low" is not shown."""
    import sparseopt

    orig = sparseopt.prune

    def broken(W, H, method="prox", *args, **kw):
        if method == "prox":
            kw.pop("schedule", None)
            method = "magnitude"
        return orig(W, H, method, *args, **kw)

    monkeypatch.setattr(sparseopt, "prune", broken)
    ok, got = run_quick("kubler_d3_prox_gd", tmp_path)
    assert ok is False
    assert got["kubler-d3-prox-already-low"][1] is False
