"""The repaired prox theory checks FAIL on deliberately broken implementations (issue 11,
acceptance: "for each repaired check, a test shows it fails on a deliberately broken
implementation").

Each test monkeypatches one library function the check calls (a lam off by a factor 2, a
wrong exponent, hard instead of soft thresholding, a solver stopped too early), runs the
check in quick mode and asserts that it returns False and that the claim the break should
hit is recorded as failed. The unbroken runs are in ``test_theory_checks_prox.py``.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import sparseopt.prox as prox_pkg
import sparseopt.prox.pgd as pgd_mod
from theory_checks._testing import run_quick


def _run_broken(name, tmp_path, only=None):
    """Run check ``name`` in quick mode (only the parts recording the claim ids ``only``, if
    given); return (ok, {claim id: passed})."""
    ok, got = run_quick(name, tmp_path, only=only)
    return ok, {cid: passed for cid, (_, passed) in got.items()}


def _prox_lam_times(factor, methods=None):
    """``prox_nm`` solving at ``factor * lam`` (for ``methods``, default all)."""
    orig = prox_pkg.prox_nm

    def broken(y, lam, n=2, m=4, *, method="alm", **kw):
        if methods is None or method in methods:
            lam = factor * lam
        return orig(y, lam, n, m, method=method, **kw)

    return broken


def test_lemma10_fails_with_lam_off_by_2(monkeypatch, tmp_path):
    # a solver at 2 lam sparsifies below the thresholds of Lemma 10
    monkeypatch.setattr(prox_pkg, "prox_nm", _prox_lam_times(2.0))
    ok, got = _run_broken("lemma10", tmp_path)
    assert ok is False
    assert got["kubler-lemma10-2sparse"] is False
    assert got["kubler-lemma10-kkt"] is False  # lam = (z.w - ||w||^2) / (3 r) no longer holds


def test_lemma10_fails_with_threshold_off_by_2(monkeypatch, tmp_path):
    import theory_checks.check_lemma10 as chk

    orig = chk.lemma10_thresholds
    monkeypatch.setattr(chk, "lemma10_thresholds", lambda z: tuple(2.0 * np.asarray(t) for t in orig(z)))
    ok, got = _run_broken("lemma10", tmp_path)
    assert ok is False
    assert got["kubler-lemma10-2sparse"] is False or got["kubler-lemma10-3sparse"] is False


def test_paths_fails_when_one_solver_is_off(monkeypatch, tmp_path):
    # EnumPGD solving at 1.5 lam: the three solution paths no longer agree
    monkeypatch.setattr(prox_pkg, "prox_nm", _prox_lam_times(1.5, methods=("pgd",)))
    ok, got = _run_broken("paths", tmp_path)
    assert ok is False
    assert got["liu-fig3-paths"] is False


def test_paths_fails_when_every_solver_is_off_by_2(monkeypatch, tmp_path):
    # all three agree, but the paths sparsify before the Lemma 10 thresholds of Fig. 1
    monkeypatch.setattr(prox_pkg, "prox_nm", _prox_lam_times(2.0))
    ok, got = _run_broken("paths", tmp_path)
    assert ok is False
    assert got["liu-fig3-paths"] is True
    assert got["kubler-fig1-thresholds"] is False


@pytest.mark.parametrize("broken", ["half_threshold", "hard_threshold"])
def test_r0m_soft_fails_with_wrong_closed_form(broken, monkeypatch, tmp_path):
    def prox_r0m(y, lam):
        y = np.asarray(y)
        a = np.abs(y.astype(np.float64))
        if broken == "half_threshold":
            t = np.maximum(a - 0.5 * float(lam), 0.0)
        else:
            t = np.where(a > lam, a, 0.0)
        return np.where(y < 0, -t, t).astype(y.dtype)

    # prox_nm(n=0) answers with this closed form for every method
    monkeypatch.setattr(prox_pkg, "prox_r0m", prox_r0m)
    ok, got = _run_broken("r0m_soft", tmp_path)
    assert ok is False
    assert got["liu-fact5-r0m-soft"] is False


def test_scale_covariance_fails_with_wrong_exponent(monkeypatch, tmp_path):
    # solve every group as z / z_1 with lam z_1^N instead of lam z_1^(N-1)
    orig = prox_pkg.prox_nm

    def broken(y, lam, n=2, m=4, *, method="alm", **kw):
        y = np.asarray(y, dtype=np.float64)
        g = y.reshape(-1, m)
        s = np.maximum(np.max(np.abs(g), axis=1, keepdims=True), 1e-300)
        if n >= 2:  # one call for all groups: by the true prox's own rule (exponent N - 1),
            # prox_{lam s^N}(u) = prox_{lam}(c u) / c with c = s^(N / (N - 1))
            c = s ** (n / (n - 1))
            return (s / c * orig(c * (g / s), lam, n, m, method=method, **kw)).reshape(y.shape)
        out = np.empty_like(g)
        for i in range(g.shape[0]):  # 1:M (no such rule): one lam per group, a loop
            out[i] = s[i, 0] * orig(g[i:i + 1] / s[i], lam * s[i, 0] ** n, n, m, method=method, **kw)[0]
        return out.reshape(y.shape)

    monkeypatch.setattr(prox_pkg, "prox_nm", broken)
    ok, got = _run_broken("scale_covariance", tmp_path,
                          only=["kubler-prox-scale", "kubler-eq6-homogeneous"])  # (no plot)
    assert ok is False
    assert got["kubler-prox-scale"] is False
    assert got["kubler-eq6-homogeneous"] is True  # the regularizer itself is untouched


def test_scale_covariance_fails_with_lam_off_by_2(monkeypatch, tmp_path):
    # covariant (both sides off alike) but not optimal: only the brute-force part sees it
    monkeypatch.setattr(prox_pkg, "prox_nm", _prox_lam_times(2.0))
    ok, got = _run_broken("scale_covariance", tmp_path)
    assert ok is False
    assert got["kubler-prox-scale"] is False


def test_scale_covariance_fails_for_a_regularizer_of_the_wrong_degree(monkeypatch, tmp_path):
    # r_{N:M} computed with e_N in place of e_{N+1} (homogeneous of degree N, not N + 1): the
    # degree claim fails; the prox (its own kernels) is untouched and stays covariant
    import theory_checks.check_scale_covariance as chk
    from sparseopt import NM

    orig = chk.r_nm_groups
    monkeypatch.setattr(chk, "r_nm_groups", lambda W, p: orig(W, NM(max(p.n - 1, 0), p.m)))
    ok, got = _run_broken("scale_covariance", tmp_path)
    assert ok is False
    assert got["kubler-eq6-homogeneous"] is False
    assert got["kubler-prox-scale"] is True


def test_conjecture9_fails_when_pgd_stops_early(monkeypatch, tmp_path):
    # EnumPGD capped at 200 iterations: ill-conditioned dense optima (near the transitions)
    # are not reached
    orig = pgd_mod.enum_pgd_sorted

    def broken(z, lam, n=2, tol=1e-12, max_iter=100_000, return_info=False):
        return orig(z, lam, n, tol, min(max_iter, 200), return_info)

    monkeypatch.setattr(pgd_mod, "enum_pgd_sorted", broken)
    ok, got = _run_broken("conjecture9", tmp_path)
    assert ok is False
    assert got["kubler-conj9"] is False
    assert got["kubler-conj9-3sparse"] is False  # the 3-sparse problems (13) too


def test_liu_regw0_fails_for_plain_weight_decay(monkeypatch, tmp_path):
    # (W - W0)^2 / den^2 charges pruned entries: Prop. 2 (1), (2) and Cor. 3 must fail
    torch = pytest.importorskip("torch")
    ps = importlib.import_module("sparseopt_torch.proxsparse")  # the package exports a function of that name

    def reg_w0(W, W0, eps):
        denom = torch.where(W0 >= 0, W0 + eps, W0 - eps)
        return ((W - W0) / denom).square().sum()

    monkeypatch.setattr(ps, "reg_w0", reg_w0)
    ok, got = _run_broken("liu_regw0", tmp_path)
    assert ok is False
    assert got["liu-prop2-null"] is False and got["liu-cor3"] is False


def test_liu_regw0_fails_for_a_kink(monkeypatch, tmp_path):
    # |W| |W - W0| / den without the square: zero set right, but not C^1
    torch = pytest.importorskip("torch")
    ps = importlib.import_module("sparseopt_torch.proxsparse")  # the package exports a function of that name

    def reg_w0(W, W0, eps):
        denom = torch.where(W0 >= 0, W0 + eps, W0 - eps)
        return ((W / denom) * (W - W0)).abs().sum()

    monkeypatch.setattr(ps, "reg_w0", reg_w0)
    ok, got = _run_broken("liu_regw0", tmp_path)
    assert ok is False
    assert got["liu-prop2-null"] is True
    assert got["liu-prop2-c1"] is False


# --- alm_decrease (proxsparse-liu Props. 6, 8; Prop. 6 on the production kernel) ----------


def test_alm_decrease_fails_when_the_kernel_solves_another_lam(monkeypatch, tmp_path):
    # the production EnumALM kernel at 1.001 lam: its output is not stationary for lam; the
    # NumPy trace of Alg. 2 (Props. 6 and 8) is untouched and still passes
    import sparseopt.prox.alm as alm_mod

    orig = alm_mod.enum_alm_sorted

    def broken(z, lam, n, tol, max_iter, **kw):
        return orig(z, 1.001 * lam, n, tol, max_iter, **kw)

    monkeypatch.setattr(alm_mod, "enum_alm_sorted", broken)
    ok, got = _run_broken("alm_decrease", tmp_path)
    assert ok is False
    assert got["liu-prop6-kernel-critical"] is False
    assert got["liu-prop8"] is True and got["liu-prop6"] is True


def test_alm_decrease_fails_for_a_kernel_returning_the_top_n_point(monkeypatch, tmp_path):
    # a "kernel" that always returns the N largest entries unchanged is stationary on its
    # support (w_i = z_i, e_N of the others is 0) but not off it (z_{N+1} > lam e_N(w))
    import sparseopt.prox.alm as alm

    def top_n(z, lam, n, tol, max_iter, *a, **kw):
        w = np.zeros_like(z)
        w[:, :n] = z[:, :n]
        return w

    monkeypatch.setattr(alm, "enum_alm_sorted", top_n)
    ok, got = _run_broken("alm_decrease", tmp_path)
    assert ok is False
    assert got["liu-prop6-kernel-critical"] is False
    assert got["liu-prop8"] is True


def _alm_sweep(monkeypatch, change):
    """``alm_trace``'s sweep (the NumPy transcription of Alg. 2 that Props. 6 and 8 are
    checked on) replaced by ``change(original sweep)``; the production kernel is untouched."""
    import sparseopt.prox.alm as alm

    monkeypatch.setattr(alm, "_alm_sweep_np", change(alm._alm_sweep_np))


def test_alm_decrease_prop8_fails_for_a_sweep_at_half_lam(monkeypatch, tmp_path):
    # each coordinate set to max(z_i - (lam / 2) e_N, 0): not the exact minimizer of f at lam,
    # so eq. 9 fails; the sweeps still halt (at the lam / 2 point), Prop. 6's count holds
    _alm_sweep(monkeypatch, lambda orig: lambda w, z, lam, n, s: orig(w, z, 0.5 * lam, n, s))
    ok, got = _run_broken("alm_decrease", tmp_path)
    assert ok is False
    assert got["liu-prop8"] is False
    assert got["liu-prop6"] is True and got["liu-prop6-kernel-critical"] is True


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reflected iterates overflow
def test_alm_decrease_prop6_fails_for_sweeps_that_overshoot(monkeypatch, tmp_path):
    # w + 2 (sweep(w) - w): every sweep reflects the group through its coordinate minimizers,
    # f does not fall, the iterates keep moving and do not halt within 3 lam ||z||^3 / eps^2
    # sweeps (and eq. 9 fails)
    def overshoot(orig):
        def sweep(w, z, lam, n, s):
            old = w.copy()
            orig(w, z, lam, n, s)
            w[:] = old + 2.0 * (w - old)

        return sweep

    _alm_sweep(monkeypatch, overshoot)
    ok, got = _run_broken("alm_decrease", tmp_path)
    assert ok is False
    assert got["liu-prop6"] is False
    assert got["liu-prop8"] is False


# --- table1 (proxsparse-liu Table 1 in full) -----------------------------------------------

#: table1's claims that a wrong solver or reference breaks (the run skips the timing)
TABLE1_EXACT = ["liu-table1-alm-ipm", "liu-table1-alm-le-ipm", "liu-table1-pgd"]


def test_table1_fails_when_alm_is_slightly_off(monkeypatch, tmp_path):
    # EnumALM solving at 1.001 lam: suboptimal by far more than 1e-13 and worse than IPM
    monkeypatch.setattr(prox_pkg, "prox_nm", _prox_lam_times(1.001, methods=("alm",)))
    ok, got = _run_broken("table1", tmp_path, only=TABLE1_EXACT)
    assert ok is False
    assert got["liu-table1-alm-ipm"] is False
    assert got["liu-table1-alm-le-ipm"] is False
    assert got["liu-table1-pgd"] is True


def test_table1_fails_when_pgd_stops_early(monkeypatch, tmp_path):
    orig = prox_pkg.prox_nm

    def broken(y, lam, n=2, m=4, *, method="alm", **kw):
        if method == "pgd":
            kw["max_iter"] = 5
        return orig(y, lam, n, m, method=method, **kw)

    monkeypatch.setattr(prox_pkg, "prox_nm", broken)
    ok, got = _run_broken("table1", tmp_path, only=TABLE1_EXACT)
    assert ok is False
    assert got["liu-table1-pgd"] is False
    assert got["liu-table1-alm-ipm"] is True


def test_table1_fails_when_reference_objective_is_wrong(monkeypatch, tmp_path):
    # the check's own objective with lam doubled: solvers and reference agree with each other
    # under it, but the certificate (its own objective) refuses the reference points
    import theory_checks.check_table1 as chk

    orig = chk._objective_ld
    monkeypatch.setattr(chk, "_objective_ld", lambda w, y, lam: orig(w, y, 2 * np.asarray(lam)))
    ok, got = _run_broken("table1", tmp_path, only=TABLE1_EXACT)
    assert ok is False
    assert got["liu-table1-alm-ipm"] is False


# --- maiht_accel_rate (Thm 3.4 (2)) ------------------------------------------------------
# (the timed claims, table1's runtime and maiht_time's Table 6, have no mutation test: whether a
# slowed implementation fails them depends on the machine and its load)


def _patch_maiht(monkeypatch, change):
    import sparseopt.solvers as solvers

    orig = solvers.maiht

    def broken(f, **kw):
        return orig(f, **change(dict(kw)))

    monkeypatch.setattr(solvers, "maiht", broken)


def test_maiht_accel_rate_fails_when_stopped_early(monkeypatch, tmp_path):
    # 40 iterations: the run ends above the support-restricted optimum L*
    _patch_maiht(monkeypatch, lambda kw: {**kw, "max_iter": min(kw.get("max_iter", 1000), 40)})
    ok, got = _run_broken("maiht_accel_rate", tmp_path)
    assert ok is False
    assert got["maiht-thm34-2"] is False


def test_maiht_accel_rate_fails_with_another_step(monkeypatch, tmp_path):
    # the solver runs with alpha / 4 while the constants (and the monitor step V) use alpha
    _patch_maiht(monkeypatch, lambda kw: {**kw, "step": kw["step"] / 4})
    ok, got = _run_broken("maiht_accel_rate", tmp_path)
    assert ok is False
    assert got["maiht-thm34-2"] is False


# --- maiht_risk (Thm 3.6 / 3.8) ---------------------------------------------------------------


def test_maiht_risk_fails_for_a_sign_error_in_the_gradient(monkeypatch, tmp_path):
    # grad = 2 (W + W*) H: IHT and mAIHT converge to a point of much larger risk
    import sparseopt.objectives as objectives

    def grad(self, W):
        return 2 * (W + self.W_star) @ self.H

    def value_and_grad(self, W):
        return self.value(W), grad(self, W)

    monkeypatch.setattr(objectives.LayerLoss, "grad", grad)
    monkeypatch.setattr(objectives.LayerLoss, "value_and_grad", value_and_grad)
    ok, got = _run_broken("maiht_risk", tmp_path)
    assert ok is False
    assert got["maiht-thm36"] is False and got["maiht-thm38"] is False


def test_maiht_risk_fails_when_the_limit_is_too_sparse(monkeypatch, tmp_path):
    # lam 100x: the limit keeps fewer than s entries (premise s* >= s fails) and its risk is large
    import sparseopt.solvers as solvers

    for name in ("iht", "maiht"):
        orig = getattr(solvers, name)
        monkeypatch.setattr(solvers, name, lambda f, _o=orig, **kw: _o(f, **{**kw, "lam": 100 * kw["lam"]}))
    ok, got = _run_broken("maiht_risk", tmp_path)
    assert ok is False
    assert got["maiht-thm36"] is False and got["maiht-thm38"] is False


# --- iobs_fig1a, iobs_digits (iobs-wu Fig. 1a, 1b, n < d) -----------------------------------------------------


IOBS_FIG1 = [("iobs_fig1a", "iobs-fig1a"), ("iobs_digits", "iobs-fig1b")]


@pytest.mark.parametrize("eta", [0.5, 2.0])
@pytest.mark.parametrize("name,cid", IOBS_FIG1)
def test_iobs_fig1_fails_for_a_newton_step_off_by_2(name, cid, eta, monkeypatch, tmp_path):
    # H = X'X against the 2 X'X of L = ||y - X theta||^2: the Newton step is half or twice as long
    import sparseopt.solvers as solvers

    if name == "iobs_digits":
        pytest.importorskip("sklearn")
    orig = solvers.topk_iobs
    monkeypatch.setattr(solvers, "topk_iobs", lambda f, **kw: orig(f, **{**kw, "step": eta}))
    ok, got = _run_broken(name, tmp_path)
    assert ok is False
    assert got[cid] is False
    if name == "iobs_fig1a":  # and one step is no longer exact in the paper's n > d setting
        assert got["iobs-fig1a-paper-setting"] is False


@pytest.mark.parametrize("name,cid", IOBS_FIG1)
def test_iobs_fig1_fails_when_iobs_is_a_gradient_step(name, cid, monkeypatch, tmp_path):
    # a "Top-k I-OBS" that takes the k-IHT step (no second-order information)
    import sparseopt.solvers as solvers

    if name == "iobs_digits":
        pytest.importorskip("sklearn")

    def fake(f, *, pattern, x0, max_iter, tol, **_):
        return solvers.iht(f, pattern=pattern, x0=x0, step=1.0 / f.lipschitz(), max_iter=max_iter, tol=tol)

    monkeypatch.setattr(solvers, "topk_iobs", fake)
    ok, got = _run_broken(name, tmp_path)
    assert ok is False
    assert got[cid] is False
    if name == "iobs_fig1a":
        assert got["iobs-fig1a-paper-setting"] is False


def test_maiht_accel_tail_rate_fails_for_plain_iht(monkeypatch, tmp_path):
    # plain IHT in place of mAIHT: the bounds of Thm 3.4 (2) still hold (they are loose), but
    # the tail rate is IHT's own (ratio 1 < 1.1)
    import sparseopt.solvers as solvers

    orig_iht = solvers.iht
    monkeypatch.setattr(solvers, "maiht", lambda f, **kw: orig_iht(f, **kw))
    ok, got = _run_broken("maiht_accel_rate", tmp_path)
    assert ok is False
    assert got["maiht-accel-tail-rate"] is False
