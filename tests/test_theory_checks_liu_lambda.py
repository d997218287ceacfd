"""The ``liu_lambda_tables`` theory check (proxsparse-liu Table 4's small-lambda_1 side, Table 5
and Fig. 2) in quick mode, and a break that must make it fail; it needs the torch adapter."""

from __future__ import annotations

import importlib

import pytest

from theory_checks._testing import assert_quick_run_holds, run_quick


def test_liu_lambda_tables_holds_quick(tmp_path):
    pytest.importorskip("torch")
    ok, got = run_quick("liu_lambda_tables", tmp_path)
    assert_quick_run_holds("liu_lambda_tables", ok, got, tmp_path)


def test_liu_lambda_tables_fails_without_reg_w0(monkeypatch, tmp_path):
    """Reg_W0 switched off (zero): a large lambda_2 no longer pulls the kept weights back to
    W0, so Fig. 2's drop of the norm gap at lambda_2 = 2500 is not shown."""
    pytest.importorskip("torch")
    ps = importlib.import_module("sparseopt_torch.proxsparse")  # the package's name is a function

    orig = ps.reg_w0
    monkeypatch.setattr(ps, "reg_w0", lambda W, W0, eps: 0.0 * orig(W, W0, eps))
    ok, got = run_quick("liu_lambda_tables", tmp_path,
                        only=["liu-fig2-normgap", "liu-table5-plateau"])  # the lambda_2 runs
    assert ok is False
    assert got["liu-fig2-normgap"][1] is False
    # lambda_2 does nothing: no spread over 0 .. 20 and no degradation at 2500 (Table 5)
    assert got["liu-table5-plateau"][1] is False


def _ignore_lam1(monkeypatch, lam1=0.3):
    """The adapter's ProxSparse run at ``lam1`` whatever lambda_1 its settings ask for."""
    import dataclasses

    ps = importlib.import_module("sparseopt_torch.proxsparse")
    orig = ps.proxsparse
    monkeypatch.setattr(ps, "proxsparse", lambda model, batches, loss, settings, **kw:
                        orig(model, batches, loss, dataclasses.replace(settings, lam1=lam1), **kw))


def test_liu_lambda_tables_fails_when_lambda_1_is_ignored(monkeypatch, tmp_path):
    """A ProxSparse that always runs at lambda_1 = 0.3: the lambda_1 = 0.001 run is the balanced
    one, so Table 4's under-learning at a small lambda_1 is not shown."""
    pytest.importorskip("torch")
    _ignore_lam1(monkeypatch)
    ok, got = run_quick("liu_lambda_tables", tmp_path, only=["liu-table4-small"])  # lambda_1 runs
    assert ok is False
    assert got["liu-table4-small"][1] is False


def test_liu_table3_holds_quick(tmp_path):
    pytest.importorskip("torch")
    ok, got = run_quick("liu_table3", tmp_path)
    assert_quick_run_holds("liu_table3", ok, got, tmp_path)


def test_liu_table3_fails_when_the_prox_does_not_relax(monkeypatch, tmp_path):
    """The adapter's prox step (Alg. 1 line 5) replaced by the projection onto 2:4: the
    "relaxed" sparsity is then the hard one, "both relaxed" ties "hard sparsity" and "hard
    frozen" ties "both hard", so the strict order of Table 3 is not shown."""
    pytest.importorskip("torch")
    ps = importlib.import_module("sparseopt_torch.proxsparse")

    def project(weights, lam, prox24):
        for W in weights:
            W.mul_(ps.mask_24(W))

    monkeypatch.setattr(ps, "_prox_layers", project)
    ok, got = run_quick("liu_table3", tmp_path, only=["liu-table3"])  # (no plot)
    assert ok is False
    figure, passed = got["liu-table3"]
    assert passed is False
    assert "strict: False" in figure
