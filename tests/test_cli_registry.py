"""One list of layer methods: a method registered in one file reaches ``sparseopt.prune`` and
``sparseopt prune --help``; contributed commands come from entry points and fail clearly
without the adapter."""

import importlib
import sys
from importlib.metadata import EntryPoint

import numpy as np
import pytest

import sparseopt.cli as cli
from sparseopt import NM, prune
from sparseopt.layer import PruneResult, get_method, methods
from sparseopt.layer import registry

NAME = "tmp_halfmagnitude"

# The whole method: one file, one decorator line.
METHOD_MODULE = f'''
from sparseopt.layer import PruneResult, register


@register("{NAME}")
def halved_magnitude(W, H, pattern, *, scale=0.5):
    """Magnitude mask, kept weights scaled (a test method)."""
    mask = pattern.mask(abs(W))
    return PruneResult(x=scale * W * mask, mask=mask)
'''


def _layer(seed=0, d_out=3, d_in=8):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((32, d_in))
    return rng.standard_normal((d_out, d_in)), X.T @ X / 32


@pytest.fixture
def new_method(tmp_path, monkeypatch):
    """Write the method module in tmp_path, import it; unregister it afterwards."""
    module = "sparseopt_test_new_method"
    (tmp_path / f"{module}.py").write_text(METHOD_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    methods()  # the built-ins are discovered first
    try:
        importlib.import_module(module)
        yield NAME
    finally:
        registry._REGISTRY.pop(NAME, None)
        sys.modules.pop(module, None)


def test_new_method_module_reaches_prune_and_the_cli(new_method, capsys):
    assert methods()[-1] == new_method  # order 1000: after the built-ins
    assert get_method(new_method).summary == "Magnitude mask, kept weights scaled (a test method)."
    pytest.importorskip("torch")  # the prune command comes from the torch adapter
    with pytest.raises(SystemExit) as exc:
        cli.main(["prune", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert new_method in out
    assert "Magnitude mask, kept weights scaled (a test method)." in out
    for name in methods():  # every registered method is listed with its summary
        assert f"{name} " in out and get_method(name).summary in out
    assert "proxsparse" in out and "all" in out


def test_new_method_runs_through_prune(new_method):
    W, H = _layer(seed=1)
    res = prune(W, H, method=new_method, pattern=NM(2, 4), refine_steps=3, scale=0.25)
    assert res.method == new_method
    mask = NM(2, 4).mask(np.abs(W))
    np.testing.assert_array_equal(res.mask, mask)
    assert NM(2, 4).satisfied(res.W)
    assert res.info["refine_steps"] == 3 and 0 <= res.rel_loss < 1
    with pytest.raises(TypeError, match="unknown option"):
        prune(W, H, method=new_method, alpha=1.0)


def test_new_method_is_unregistered_after_the_test():
    assert NAME not in methods()
    with pytest.raises(ValueError, match="method must be one of"):
        get_method(NAME)


def test_prune_with_a_plain_function():
    """``method=callable``: a function with the contract, registered nowhere."""
    def keep_first(W, H, pattern, *, shrink=1.0):
        """Keep the first n entries of every group."""
        groups = W.shape[1] // pattern.m
        keep = np.zeros((pattern.m,), dtype=bool)
        keep[:pattern.n] = True
        mask = np.broadcast_to(np.tile(keep, groups), W.shape).copy()
        return PruneResult(x=np.where(mask, shrink * W, 0.0).astype(W.dtype), mask=mask, nit=1,
                           stop_reason="done")

    W, H = _layer(seed=2)
    res = prune(W, H, method=keep_first, pattern=NM(2, 4), shrink=1.0)
    assert res.method == "keep_first" and res.nit == 1 and res.stop_reason == "done"
    expected = np.where(np.tile([True, True, False, False], 2), W, 0.0)
    np.testing.assert_array_equal(res.W, expected)
    D = expected - W
    assert res.loss == pytest.approx(float(np.sum((D @ H) * D)), rel=1e-12)
    assert NAME not in methods() and "keep_first" not in methods()  # nothing registered
    with pytest.raises(TypeError, match="must return a PruneResult"):
        prune(W, H, method=lambda W, H, pattern: W)


def test_demo_loads_no_contributed_command(monkeypatch):
    """Parsing a core command loads no entry point (the adapter costs seconds to import)."""
    def fail(*args, **kwargs):
        raise AssertionError("a contributed command was loaded")

    monkeypatch.setattr(cli, "_add_contributed", fail)
    args = cli._parser("demo").parse_args(["demo", "--quick", "--no-minilm"])
    assert args.handler is cli._demo and args.no_minilm


def test_contributed_command_without_its_dependencies_names_the_install(monkeypatch, capsys):
    """An entry point whose module cannot be imported (no torch): the command still parses
    and exits with the install command."""
    ep = EntryPoint(name="prune", value="sparseopt_no_such_module:add_prune",
                    group=cli.COMMAND_GROUP)
    monkeypatch.setattr(cli, "_command_entry_points", lambda: {"prune": ep})
    with pytest.raises(SystemExit) as exc:
        cli.main(["prune", "out", "--method", "wanda"])
    msg = str(exc.value.code)
    assert "sparseopt prune" in msg and "pip install torch==2.13.0" in msg
    assert "sparseopt_no_such_module" in msg


def test_no_adapter_installed_names_the_install(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_command_entry_points", lambda: {})
    with pytest.raises(SystemExit) as exc:
        cli.main(["prune", "out"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown command 'prune'" in err and "pip install torch==2.13.0" in err


def test_add_method_argument_refuses_a_clash():
    import argparse

    with pytest.raises(ValueError, match="clash"):
        cli.add_method_argument(argparse.ArgumentParser(), extra={"wanda": "twice"})
