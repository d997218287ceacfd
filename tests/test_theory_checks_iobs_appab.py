"""The theory checks of iobs-wu's App. A.2 (rounds, then overfitting) and App. B.1 (stochastic
I-OBS's curvature model, eqs. 14-15) (issue 46, missing claims): quick runs, and runs on
deliberately broken library functions that must fail."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

from theory_checks._testing import assert_quick_run_holds, run_quick

CHECKS = ["iobs_rounds_overfit", "iobs_stochastic"]
#: the modules whose names the tests patch (their packages re-export functions of those names)
layer_iobs = importlib.import_module("sparseopt.layer.iobs")
solver_iobs = importlib.import_module("sparseopt.solvers.iobs")


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_in_quick_mode(name, tmp_path):
    ok, got = run_quick(name, tmp_path)
    assert_quick_run_holds(name, ok, got, tmp_path)
    assert os.path.exists(tmp_path / f"{name}.png")


def test_rounds_fail_when_the_gradient_steps_do_nothing(monkeypatch, tmp_path):
    # a step 1e-6 times too short: the rounds after the first repeat SparseGPT, no gain
    orig = layer_iobs.gamma_max
    monkeypatch.setattr(layer_iobs, "gamma_max", lambda H: 1e6 * orig(H))
    ok, got = run_quick("iobs_rounds_overfit", tmp_path)
    assert ok is False
    assert got["iobs-a2-rounds"][1] is False


def test_rounds_fail_when_the_gradient_steps_go_uphill(monkeypatch, tmp_path):
    orig = layer_iobs.gamma_max
    monkeypatch.setattr(layer_iobs, "gamma_max", lambda H: -orig(H))
    ok, got = run_quick("iobs_rounds_overfit", tmp_path)
    assert ok is False
    assert got["iobs-a2-rounds"][1] is False


def test_stochastic_fails_for_a_biased_minibatch_gradient(monkeypatch, tmp_path):
    # the batch sum X_B'(X_B w - y_B) without the factor n / |B|: E_b[g] != grad f
    orig = solver_iobs.sampled_gradient

    def biased(objective):
        s = orig(objective)
        return solver_iobs.SampledGradient(
            s.n_samples, lambda w, idx: s.grad(w, idx) * len(idx) / s.n_samples)

    monkeypatch.setattr(solver_iobs, "sampled_gradient", biased)
    ok, got = run_quick("iobs_stochastic", tmp_path)
    assert ok is False
    assert got["iobs-b1-batch-lambda"][1] is False and got["iobs-eq15"][1] is False


def test_expected_G_enumerates_every_batch():
    from theory_checks.check_iobs_stochastic import expected_G

    # f_i = 0.5 (w - c_i)^2 in 1-D, n = 3: every batch of size 2, g = (3/2) sum (w - c_i)
    c = np.array([1.0, 2.0, 4.0])
    s = solver_iobs.SampledGradient(3, lambda w, idx: (3 / len(idx)) * np.sum(w - c[idx], keepdims=True))
    Eg, EG, En, En2, gs = expected_G(s, np.zeros(1), 2)
    assert len(gs) == 3
    assert Eg == pytest.approx([-7.0])  # grad f(0) = -(1 + 2 + 4)
    assert EG[0, 0] == pytest.approx(1.0)
    assert En == pytest.approx(np.mean([4.5, 7.5, 9.0]))
