"""The proxsparse-liu end-to-end ProxSparse theory check (Prop. 7, Fig. 1 / Table 4) in quick
mode, and on a deliberately broken adapter; it needs the torch adapter."""

import sys

import pytest

from theory_checks._testing import run_quick
from theory_checks.claims import missing_claims


def test_liu_proxsparse_passes_quick(tmp_path, capsys):
    pytest.importorskip("torch")
    ok, got = run_quick("liu_proxsparse", tmp_path)
    assert ok is True
    assert got and missing_claims("liu_proxsparse", got) == []
    assert all(passed for _, passed in got.values()), got
    assert "PASS: liu_proxsparse" in capsys.readouterr().out
    assert (tmp_path / "liu_proxsparse.png").stat().st_size > 1000


def test_liu_proxsparse_fails_when_the_adapter_prox_is_at_2_lam(monkeypatch, tmp_path):
    """The adapter's prox at 2 lam (while the objective says lam): the iterates converge to a
    critical point of another objective, so the prox-gradient mapping of the stated one does
    not vanish (it stays at about 1e-2 of its start) and Prop. 7's claim fails."""
    pytest.importorskip("torch")
    import sparseopt_torch.proxsparse  # noqa: F401  (the module, not the function)

    mod = sys.modules["sparseopt_torch.proxsparse"]
    orig = mod._prox_function

    def broken(backend):
        prox = orig(backend)
        return lambda Y, lam: prox(Y, 2.0 * lam)

    monkeypatch.setattr(mod, "_prox_function", broken)
    ok, got = run_quick("liu_proxsparse", tmp_path, only=["liu-prop7"])  # the Prop. 7 runs only
    assert ok is False
    assert got["liu-prop7"][1] is False


def test_liu_proxsparse_fails_when_lambda_1_is_ignored(monkeypatch, tmp_path):
    """A ProxSparse that always runs at lambda_1 = 0.3: the "too large" lambda_1 = 100 run is the
    balanced one, so it neither commits to its mask earlier (Fig. 1) nor prunes worse (Table 4)."""
    pytest.importorskip("torch")
    import dataclasses

    import sparseopt_torch.proxsparse  # noqa: F401  (the module, not the function)

    mod = sys.modules["sparseopt_torch.proxsparse"]
    orig = mod.proxsparse
    monkeypatch.setattr(mod, "proxsparse", lambda model, batches, loss, settings, **kw:
                        orig(model, batches, loss, dataclasses.replace(settings, lam1=0.3), **kw))
    ok, got = run_quick("liu_proxsparse", tmp_path, only=["liu-fig1-commit", "liu-table4-large"])
    assert ok is False
    assert got["liu-fig1-commit"][1] is False
    assert got["liu-table4-large"][1] is False
