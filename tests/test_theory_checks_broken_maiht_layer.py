"""The repaired maiht-wen and layer theory checks FAIL on deliberately broken implementations
(issue 11, "repair every weak check": for each repaired check a test shows that it fails on a
broken implementation).

Each test monkeypatches one library function the check calls (a threshold off by a factor,
a projection that keeps the wrong entries, a step off by a factor 2, mAIHT without its
momentum, a schedule without the Mean|W*| of eq. 15, ...), runs the check in quick mode and
asserts that it returns False and that the claim the break should hit is recorded as failed.
The unbroken runs are in ``test_theory_checks_maiht.py`` and ``test_theory_checks_layer.py``.
"""

from __future__ import annotations

import math
import sys

import numpy as np

import sparseopt.solvers  # noqa: F401  (loads the module sparseopt.solvers.iht)
from sparseopt.patterns import NM

from test_theory_checks_broken import _run_broken  # quick run of a check, claims recorded

#: the module (``sparseopt.solvers.iht`` is the function re-exported by the package)
iht_mod = sys.modules["sparseopt.solvers.iht"]


def _threshold_times(monkeypatch, factor):
    """IHT / mAIHT hard thresholding at ``factor`` times sqrt(2 step lam)."""
    orig = iht_mod.hard_threshold
    monkeypatch.setattr(iht_mod, "hard_threshold", lambda v, t: orig(v, factor * t))


# --- maiht_magnitude -----------------------------------------------------------------------


def test_magnitude_fails_with_threshold_sqrt_alpha_lam(monkeypatch, tmp_path):
    # threshold sqrt(alpha lam) instead of sqrt(2 alpha lam)
    _threshold_times(monkeypatch, 1 / math.sqrt(2))
    ok, got = _run_broken("maiht_magnitude", tmp_path)
    assert ok is False
    assert got["maiht-rem22"] is False


def test_magnitude_fails_when_the_24_projection_keeps_the_smallest(monkeypatch, tmp_path):
    # the two smallest |w| of every cell instead of the two largest (a flipped sort)
    def broken(self, x):
        x = np.asarray(x)
        return np.where(~self.mask(x), x, 0.0)

    monkeypatch.setattr(NM, "project", broken)
    ok, got = _run_broken("maiht_magnitude", tmp_path)
    assert ok is False
    assert got["maiht-rem22"] is False


# --- maiht_descent (Lemma 3.2, Lemma B.4 / Prop. B.5, Prop. B.6) ----------------------------


def test_descent_fails_with_threshold_sqrt_alpha_lam(monkeypatch, tmp_path):
    # the thresholding step is no longer the l0 prox: support changes move W by less than
    # eq. 8's 2 alpha lam, Prop. B.5 (4)'s count of changes is broken (Lemma B.4's row)
    _threshold_times(monkeypatch, 1 / math.sqrt(2))
    ok, got = _run_broken("maiht_descent", tmp_path)
    assert ok is False
    assert got["maiht-lemmaB4"] is False


def _maiht_without_monitor(f, *, step, max_iter, tol=0.0, lam=None, pattern=None, x0=None):
    """eq. (4) with the extrapolated step Z^{k+1} always taken: mAIHT without the monitor
    V^{k+1} (the IHT step it must not be worse than), i.e. accelerated IHT."""
    from types import SimpleNamespace

    def prox(v):
        return pattern.project(v) if pattern is not None else np.where(v * v > 2.0 * step * lam, v, 0.0)

    def value(W):
        return f.value(W) + (0.0 if pattern is not None else lam * np.count_nonzero(W))

    W = np.array(f.W_star if x0 is None else x0, dtype=np.float64)
    W_prev, Z, t_prev, t = W, W, 0.0, 1.0
    F, S = [value(W)], [np.count_nonzero(W)]
    for _ in range(max_iter):
        Y = W + (t_prev / t) * (Z - W) + ((t_prev - 1.0) / t) * (W - W_prev)
        Z = prox(Y - step * f.grad(Y))
        t_prev, t = t, (math.sqrt(4.0 * t * t + 1.0) + 1.0) / 2.0
        W_prev, W = W, Z
        F.append(value(W))
        S.append(np.count_nonzero(W))
    return SimpleNamespace(x=W, history={"objective": np.array(F), "support": np.array(S)})


def test_descent_fails_for_maiht_without_its_monitor(monkeypatch, tmp_path):
    # the momentum step overshoots: L(W^k) rises on some step (Lemma 3.2) and W^{k+1} is
    # worse than the monitor step V^{k+1} (Prop. B.6 (1)); IHT's rows are untouched
    import sparseopt.solvers as solvers

    monkeypatch.setattr(solvers, "maiht", _maiht_without_monitor)
    ok, got = _run_broken("maiht_descent", tmp_path)
    assert ok is False
    assert got["maiht-lemma32"] is False
    assert got["maiht-propB6"] is False
    assert got["maiht-lemmaB4"] is True


# --- maiht_fixed_point ---------------------------------------------------------------------


def test_fixed_point_fails_with_threshold_sqrt_alpha_lam(monkeypatch, tmp_path):
    # IHT / mAIHT thresholding at sqrt(alpha lam): their limits keep entries below
    # sqrt(2 alpha lam), so they are not alpha-fixed points of Def. 3.1
    _threshold_times(monkeypatch, 1 / math.sqrt(2))
    ok, got = _run_broken("maiht_fixed_point", tmp_path)
    assert ok is False
    assert got["maiht-thm33"] is False


def test_fixed_point_fails_with_a_threshold_that_ignores_the_step(monkeypatch, tmp_path):
    # the threshold always taken at the step 1/L, whatever the step: the limits of the small
    # step alpha_2 / 8 are then no alpha_2 / 8-fixed points, the nesting claim fails
    def prox(self, v, lam):
        return iht_mod.hard_threshold(v, math.sqrt(2.0 * lam / self.objective.lipschitz()))

    monkeypatch.setattr(iht_mod._Problem, "prox", prox)
    ok, got = _run_broken("maiht_fixed_point", tmp_path)
    assert ok is False
    assert got["maiht-def31-nesting"] is False


# --- maiht_rate ----------------------------------------------------------------------------


def _solver_step_times(monkeypatch, name, factor):
    """``sparseopt.solvers.<name>`` taking ``factor`` times the step it is given."""
    import sparseopt.solvers as solvers

    orig = getattr(solvers, name)

    def broken(objective, *, step=None, **kw):
        return orig(objective, step=None if step is None else factor * step, **kw)

    monkeypatch.setattr(solvers, name, broken)


def test_rate_fails_when_iht_takes_half_the_step(monkeypatch, tmp_path):
    # the bound itself still holds (slack ~0.1); the settled iterate no longer follows
    # projected GD with step alpha and the tail decays at about half the predicted rate
    _solver_step_times(monkeypatch, "iht", 0.5)
    ok, got = _run_broken("maiht_rate", tmp_path)
    assert ok is False
    assert got["maiht-thm34-1"] is False


def test_rate_fails_when_the_gradient_is_off_by_2(monkeypatch, tmp_path):
    # a gradient 2 (W - W*) H / 2 = (W - W*) H: the step on the settled support is alpha / 2
    from sparseopt.objectives import LayerLoss

    orig = LayerLoss.grad
    monkeypatch.setattr(LayerLoss, "grad", lambda self, W: 0.5 * orig(self, W))
    if hasattr(LayerLoss, "value_and_grad"):
        vg = LayerLoss.value_and_grad

        def broken_vg(self, W):
            v, g = vg(self, W)
            return v, 0.5 * g

        monkeypatch.setattr(LayerLoss, "value_and_grad", broken_vg)
    ok, got = _run_broken("maiht_rate", tmp_path)
    assert ok is False
    assert got["maiht-thm34-1"] is False


# --- maiht_acceleration --------------------------------------------------------------------


def test_acceleration_fails_for_maiht_without_momentum(monkeypatch, tmp_path):
    # mAIHT without its extrapolation step is IHT: speed-up 1 < 1.5
    import sparseopt.solvers as solvers

    monkeypatch.setattr(solvers, "maiht", solvers.iht)
    ok, got = _run_broken("maiht_acceleration", tmp_path)
    assert ok is False
    assert got["maiht-fig1-faster"] is False


def test_acceleration_fails_for_maiht_with_half_the_step(monkeypatch, tmp_path):
    # a slower mAIHT (half the step): no longer >= 1.5x faster than IHT on most seeds, or
    # worse at equal budgets
    _solver_step_times(monkeypatch, "maiht", 0.5)
    ok, got = _run_broken("maiht_acceleration", tmp_path)
    assert ok is False
    assert got["maiht-fig1-faster"] is False


def test_acceleration_final_fails_for_maiht_stopped_early(monkeypatch, tmp_path):
    # mAIHT given a tenth of the budget: its returned point is worse than IHT's after the full
    # budget (Fig. 1's "ends at a better solution")
    import sparseopt.solvers as solvers

    orig = solvers.maiht
    monkeypatch.setattr(solvers, "maiht", lambda f, **kw: orig(f, **{**kw, "max_iter": kw["max_iter"] // 10}))
    ok, got = _run_broken("maiht_acceleration", tmp_path)
    assert ok is False
    assert got["maiht-fig1-final"] is False


# --- layer_fig2 ----------------------------------------------------------------------------


def test_fig2_fails_with_wanda_scores_using_h_instead_of_its_root(monkeypatch, tmp_path):
    # Wanda ranking by |w_j| H_jj instead of |w_j| H_jj^(1/2): not the optimum of a diagonal H
    import sparseopt.layer.wanda as wanda_mod

    monkeypatch.setattr(wanda_mod, "_input_scale",
                        lambda H: np.clip(np.diag(np.asarray(H, dtype=np.float64)), 0.0, None))
    ok, got = _run_broken("layer_fig2", tmp_path)
    assert ok is False
    assert got["kubler-fig2-alpha1"] is False


def test_fig2_prox_lowest_fails_when_prox_is_wanda(monkeypatch, tmp_path):
    # a "prox" that is Wanda: at alpha = 1 it is still optimal (Theorem 1), for alpha < 1
    # prox+GD is wanda+GD, which a Hessian-aware method beats on correlated inputs
    import dataclasses
    import functools

    from sparseopt.layer import methods, registry

    methods()  # the registry is filled on first use
    spec = registry._REGISTRY["prox"]
    wanda = registry.get_method("wanda").fn
    fn = functools.wraps(spec.fn)(lambda W, H, pattern, **kw: wanda(W, H, pattern))
    monkeypatch.setitem(registry._REGISTRY, "prox", dataclasses.replace(spec, fn=fn))
    ok, got = _run_broken("layer_fig2", tmp_path)
    assert ok is False
    assert got["kubler-fig2-prox"] is False
    assert got["kubler-fig2-alpha1"] is True


# --- layer_schedule ------------------------------------------------------------------------


def _prox_schedule(monkeypatch, lam0_of):
    """``sparseopt.layer.prune`` with method="prox" and lam_tilde given turned into
    lam0 = lam0_of(lam_tilde, mean |W*| of the Wanda-rescaled weights)."""
    import sparseopt.layer as layer

    orig = layer.prune

    def broken(W, H, *args, **kw):
        if kw.get("method") == "prox" and kw.get("lam_tilde") is not None:
            lt = kw.pop("lam_tilde")
            mean_abs = float(np.mean(np.abs(np.asarray(W)) * np.sqrt(np.diag(np.asarray(H)))))
            kw["lam0"] = lam0_of(lt, mean_abs)
        return orig(W, H, *args, **kw)

    monkeypatch.setattr(layer, "prune", broken)


def test_schedule_fails_without_the_mean_of_eq15(monkeypatch, tmp_path):
    # lambda_0 = lambda_tilde_0 (no 1 / Mean|W*|): pruning c W* is not c times pruning W*
    _prox_schedule(monkeypatch, lambda lt, mean_abs: lt)
    ok, got = _run_broken("layer_schedule", tmp_path)
    assert ok is False
    assert got["kubler-eq15-scale"] is False


def test_schedule_fails_with_the_wrong_power_of_the_mean(monkeypatch, tmp_path):
    # lambda_0 = lambda_tilde_0 Mean|W*| (the scaling of a degree-1 regulariser, not r_{2:4})
    _prox_schedule(monkeypatch, lambda lt, mean_abs: lt * mean_abs)
    ok, got = _run_broken("layer_schedule", tmp_path)
    assert ok is False
    assert got["kubler-eq15-scale"] is False

