"""The ``table1_alg2`` theory check (proxsparse-liu Table 1, Props. 6 and 8 on Alg. 2 as printed
and on the production ALM kernel) in quick mode, and the breaks that must make it fail."""

from __future__ import annotations

import numpy as np

from theory_checks._testing import assert_quick_run_holds, run_quick


def test_table1_alg2_holds_quick(tmp_path):
    ok, got = run_quick("table1_alg2", tmp_path)
    assert_quick_run_holds("table1_alg2", ok, got, tmp_path)


def test_table1_alg2_fails_when_the_printed_alg2_does_not_stall(monkeypatch, tmp_path):
    """Alg. 3 'as printed' replaced by the production kernel: no tied cell above the optimum,
    so the refutation is no longer shown."""
    import theory_checks.check_table1_alg2 as chk

    monkeypatch.setattr(chk, "printed_grid", chk.kernel_grid)
    ok, got = run_quick("table1_alg2", tmp_path,
                        only=["liu-table1-tied-printed", "liu-table1-tied-kernel"])
    assert ok is False
    assert got["liu-table1-tied-printed"][1] is False
    assert got["liu-table1-tied-kernel"][1] is True


def test_table1_alg2_fails_for_a_kernel_at_a_slightly_wrong_lam(monkeypatch, tmp_path):
    """The production kernel solving at 1.001 lam: above the certified optimum on tied cells."""
    import sparseopt.prox as prox_pkg

    orig = prox_pkg.prox_nm

    def broken(y, lam, n=2, m=4, *, method="alm", **kw):
        return orig(y, 1.001 * lam if method == "alm" else lam, n, m, method=method, **kw)

    monkeypatch.setattr(prox_pkg, "prox_nm", broken)
    ok, got = run_quick("table1_alg2", tmp_path, only=["liu-table1-tied-kernel"])
    assert ok is False
    assert got["liu-table1-tied-kernel"][1] is False


def _figure_value(figure, label):
    """The number after ``label`` in a claim's figure string."""
    return float(figure.split(label, 1)[1].split()[0])


def test_table1_alg2_prop8_fails_for_a_sweep_that_is_not_the_coordinate_minimizer(monkeypatch, tmp_path):
    """The kernel's candidate solver (its plain-Python body, ``_alm24.py_func``) with sweeps
    that soft-threshold at lam / 2, not at the exact coordinate minimizer of f at lam: eq. 9
    fails on some sweep (Prop. 8)."""
    from sparseopt.prox import alm

    sweep = alm._sweep24

    def half_lam_sweep(w1, w2, w3, w4, z1, z2, z3, z4, lam, s):
        return sweep(w1, w2, w3, w4, z1, z2, z3, z4, 0.5 * lam, s)

    monkeypatch.setattr(alm, "_alm24", alm._alm24.py_func)
    monkeypatch.setattr(alm, "_sweep24", half_lam_sweep)
    ok, got = run_quick("table1_alg2", tmp_path, only=["liu-prop8-kernel", "liu-prop6-kernel"])
    assert ok is False
    figure, passed = got["liu-prop8-kernel"]
    assert passed is False
    assert _figure_value(figure, "worst slack") < -1e-12
    # the sweeps converge to the lam / 2 point, f at lam does not fall by the steps: the
    # telescoped halting bound of Prop. 6 fails too
    assert got["liu-prop6-kernel"][1] is False


def test_table1_alg2_prop6_fails_for_sweeps_that_overshoot(monkeypatch):
    """The kernel's candidate solver (its plain-Python body) with every sweep over-relaxed,
    w + 2 (sweep(w) - w): each coordinate step is reflected through the coordinate minimizer,
    so f does not fall by 0.5 ||step||^2 and the group keeps moving; the kernel no longer
    halts within Prop. 6's 3 lam ||z||^3 / eps^2 sweeps. Runs the check's own trace statistics
    (the quick run's groups) and its criterion for ``liu-prop6-kernel``: the rest of the
    check (Table 1's grids and their certificates) does not use the traced solver."""
    import theory_checks.check_table1_alg2 as chk
    from sparseopt.prox import alm

    sweep = alm._sweep24

    def overshoot(w1, w2, w3, w4, z1, z2, z3, z4, lam, s):
        out = sweep(w1, w2, w3, w4, z1, z2, z3, z4, lam, s)
        w = (w1, w2, w3, w4)
        return tuple(w[i] + 2.0 * (out[i] - w[i]) for i in range(4)) + tuple(out[4:])

    good = chk._trace_stats(np.random.default_rng(8), 60)
    assert chk.prop6_kernel_holds(good)  # the unbroken kernel, same groups
    monkeypatch.setattr(alm, "_alm24", alm._alm24.py_func)
    monkeypatch.setattr(alm, "_sweep24", overshoot)
    st = chk._trace_stats(np.random.default_rng(8), 60)
    assert st["p6_bad"] > 0 and st["tele_bad"] > 0
    assert not chk.prop6_kernel_holds(st)


def test_table1_alg2_prop8_fails_for_a_newton_step_that_raises_f(monkeypatch, tmp_path):
    """The kernel's candidate solver with its safeguard off (any Newton step accepted) and
    Newton steps three times too long: f rises between sweeps, which the check must catch."""
    from sparseopt.prox import alm

    newton = alm._face_newton24

    def long_newton(w1, w2, w3, w4, z1, z2, z3, z4, lam):
        b1, b2, b3, b4, st = newton(w1, w2, w3, w4, z1, z2, z3, z4, lam)
        return (w1 + 3 * (b1 - w1), w2 + 3 * (b2 - w2), w3 + 3 * (b3 - w3), w4 + 3 * (b4 - w4), st)

    monkeypatch.setattr(alm, "_alm24", alm._alm24.py_func)
    monkeypatch.setattr(alm, "_face_newton24", long_newton)
    monkeypatch.setattr(alm, "_OBJ_SLACK", np.inf)
    ok, got = run_quick("table1_alg2", tmp_path, only=["liu-prop8-kernel"])
    assert ok is False
    figure, passed = got["liu-prop8-kernel"]
    assert passed is False
    assert _figure_value(figure, "Newton rise") > 1e-12
