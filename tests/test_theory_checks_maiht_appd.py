"""The theory checks of maiht-wen's Fig. 1 stages and App. D tables (issue 46, missing claims):
quick runs, and runs on deliberately broken solvers that must fail."""

from __future__ import annotations

import os

import numpy as np
import pytest

import sparseopt.solvers as solvers
from theory_checks._testing import assert_quick_run_holds, run_quick

CHECKS = ["maiht_two_stage", "maiht_layer_tables"]


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_in_quick_mode(name, tmp_path):
    ok, got = run_quick(name, tmp_path)
    assert_quick_run_holds(name, ok, got, tmp_path)
    assert os.path.exists(tmp_path / f"{name}.png")


def _patch(monkeypatch, name, change):
    """Replace ``sparseopt.solvers.<name>`` by a call with its keywords changed by ``change``."""
    orig = getattr(solvers, name)
    monkeypatch.setattr(solvers, name, lambda f, _o=orig, **kw: _o(f, **change(kw)))


def _failed(name, tmp_path, claim_id):
    ok, got = run_quick(name, tmp_path)
    assert ok is False
    assert got[claim_id][1] is False


def test_two_stage_fails_when_iht_takes_half_the_step(monkeypatch, tmp_path):
    # the fixed-support window no longer follows P_S GD with the step the check passed
    _patch(monkeypatch, "iht", lambda kw: {**kw, "step": kw["step"] / 2})
    _failed("maiht_two_stage", tmp_path, "maiht-fig1-two-stage")


def test_two_stage_fails_for_maiht_without_momentum(monkeypatch, tmp_path):
    # t^k stays 1 (sqrt returns 1 in the t update): Y^k = Z^k, no momentum term; the Z chain
    # is plain IHT, no faster than P_S GD on the window
    import math
    import sys
    import types

    maiht_mod = sys.modules["sparseopt.solvers.maiht"]
    monkeypatch.setattr(maiht_mod, "math", types.SimpleNamespace(sqrt=lambda v: 1.0, nan=math.nan))
    _failed("maiht_two_stage", tmp_path, "maiht-fig1-two-stage")


def test_two_stage_fails_for_plain_iht_as_maiht(monkeypatch, tmp_path):
    # an "mAIHT" that is IHT has no accepted history: the read-back of W^k fails, not a crash
    orig = solvers.iht
    monkeypatch.setattr(solvers, "maiht", lambda f, **kw: orig(f, **kw))
    _failed("maiht_two_stage", tmp_path, "maiht-fig1-two-stage")


def test_two_stage_helpers():
    from theory_checks.check_maiht_two_stage import stages

    a = np.array([[1.0, 2.0, 3.0]])
    b = np.array([[1.0, 2.0, 0.0]])
    c = np.array([[1.0, 0.0, 3.0]])
    W = [a, a, b, b, b, c, c]
    ka, changes, window = stages(W, None, 2)
    assert ka == 2 and changes == [5] and window == (2, 5)
    assert stages([a, a], None, 2)[0] is None


def _maiht_prune_changed(monkeypatch, change):
    """The layer pruner's call of sparseopt.solvers.maiht with its keywords changed."""
    _patch(monkeypatch, "maiht", change)


def test_layer_tables_fail_when_maiht_stops_after_one_iteration(monkeypatch, tmp_path):
    # quality no longer improves with the iterations (Table 6)
    _maiht_prune_changed(monkeypatch, lambda kw: {**kw, "max_iter": min(kw["max_iter"], 1)})
    ok, got = run_quick("maiht_layer_tables", tmp_path)
    assert ok is False
    assert got["maiht-table6-quality"][1] is False


def test_layer_tables_fail_when_refinement_is_skipped(monkeypatch, tmp_path):
    # full mAIHT = mAIHT without refinement (Table 9)
    _maiht_prune_changed(monkeypatch, lambda kw: {**kw, "refine_steps": 0})
    ok, got = run_quick("maiht_layer_tables", tmp_path)
    assert ok is False
    assert got["maiht-table9-refinement"][1] is False


def test_layer_tables_fail_when_the_projection_keeps_the_smallest(monkeypatch, tmp_path):
    # a 2:4 projection that keeps the two smallest |w| of every cell: SparseGPT wins (Table 7)
    from sparseopt.patterns import NM

    orig = NM.project

    def broken(self, x):
        if self.m != 4:
            return orig(self, x)
        x = np.asarray(x)
        return np.where(~self.mask(x), x, 0.0)

    monkeypatch.setattr(NM, "project", broken)
    ok, got = run_quick("maiht_layer_tables", tmp_path)
    assert ok is False
    assert got["maiht-table7-nm"][1] is False
