"""maiht-wen theory checks in quick mode, and the helpers they rely on."""

from __future__ import annotations

import os

import numpy as np
import pytest

from theory_checks.check_maiht_descent import max_relative_increase
from theory_checks.check_maiht_fixed_point import fixed_point_violation

CHECKS = ["maiht_descent", "maiht_fixed_point", "maiht_rate", "maiht_acceleration",
          "maiht_magnitude", "maiht_mu", "maiht_accel_rate", "maiht_time",
          "maiht_risk", "maiht_step"]


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_in_quick_mode(name, tmp_path):
    """Every claim but the timed ones (``maiht_time``'s Table 6 claim, which is run and
    printed but never asserted: ``theory_checks._testing``)."""
    from theory_checks._testing import assert_quick_run_holds, run_quick

    ok, got = run_quick(name, tmp_path)
    assert_quick_run_holds(name, ok, got, tmp_path)
    assert os.path.exists(tmp_path / f"{name}.png")


def test_max_relative_increase_detects_an_increase():
    assert max_relative_increase([3.0, 2.0, 1.0]) < 0
    assert max_relative_increase([3.0, 2.0, 2.2]) == pytest.approx(0.1)


def test_fixed_point_violation_detects_non_fixed_points():
    from sparseopt.objectives import Quadratic

    # f = 0.5 ||w - b||^2: grad = w - b; with lam, alpha = 1 the fixed points keep |b_i| >= sqrt(2)
    b = np.array([3.0, 0.5, -2.0])
    f = Quadratic(np.eye(3), b)
    lam = 1.0
    good = np.array([3.0, 0.0, -2.0])
    assert fixed_point_violation(f, good, lam, 1.0) == 0.0
    assert fixed_point_violation(f, np.array([3.0, 0.5, -2.0]), lam, 1.0) > 0.1  # |0.5| < sqrt 2
    assert fixed_point_violation(f, np.array([2.0, 0.0, -2.0]), lam, 1.0) > 0.1  # grad != 0 on S
    assert fixed_point_violation(f, np.zeros(3), lam, 1.0) > 0.1  # |grad| = 3 > sqrt(2) off S
    # nesting: good is also an alpha_1-fixed point for alpha_1 < 1 ...
    assert fixed_point_violation(f, good, lam, 0.3) == 0.0
    # ... but [3, 0, 0] is only a fixed point for small alpha (|grad_3| = 2 <= sqrt(2/alpha))
    w = np.array([3.0, 0.0, 0.0])
    assert fixed_point_violation(f, w, lam, 0.4) == 0.0
    assert fixed_point_violation(f, w, lam, 1.0) > 0.1


def test_def31_residual_is_the_set_valued_prox_map():
    from theory_checks.check_maiht_fixed_point import def31_residual

    # f = Tr((w - b) H (w - b)') with H = I/2: grad = w - b; fixed points at alpha = 1, lam = 1
    # keep |b_i| >= sqrt 2 on the support, |b_i| <= sqrt 2 off it
    b = np.array([[3.0, 0.5, -2.0]])
    H = np.eye(3) / 2
    assert def31_residual(b, H, np.array([[3.0, 0.0, -2.0]]), 1.0, 1.0) == 0.0
    assert def31_residual(b, H, b, 1.0, 1.0) == pytest.approx(0.5 / 3)  # |0.5| < sqrt 2
    assert def31_residual(b, H, np.array([[3.0, 0.0, 0.0]]), 1.0, 1.0) == pytest.approx(2 / 3)
    # ... which is a fixed point for a small step (|alpha grad| = 2 alpha <= sqrt(2 alpha))
    assert def31_residual(b, H, np.array([[3.0, 0.0, 0.0]]), 1.0, 0.4) == 0.0
    # at |v| = sqrt(2 alpha lam) both branches of the prox are fixed points
    t = np.sqrt(2.0)
    assert def31_residual(np.array([[t]]), np.eye(1) / 2, np.array([[t]]), 1.0, 1.0) == 0.0
    assert def31_residual(np.array([[t]]), np.eye(1) / 2, np.array([[0.0]]), 1.0, 1.0) == 0.0


def test_maiht_step_fails_for_solvers_that_ignore_the_step(monkeypatch, tmp_path):
    """IHT and mAIHT that always step 0.25 / L whatever step they are given: the rate no longer
    grows with the step."""
    import sparseopt.solvers as solvers
    from theory_checks._testing import run_quick

    for name in ("iht", "maiht"):
        orig = getattr(solvers, name)
        monkeypatch.setattr(solvers, name, lambda f, _o=orig, **kw: _o(f, **{**kw, "step": 0.25 / f.lipschitz()}))
    ok, got = run_quick("maiht_step", tmp_path)
    assert ok is False
    assert got["maiht-sec3-larger-step"][1] is False
    # Sec. 4's step too: an IHT at 0.25 / L does not overshoot, the rise of L(W) that the
    # paper's step 0.95 / ||X'X|| causes is not shown
    assert got["maiht-sec4-step"][1] is False
