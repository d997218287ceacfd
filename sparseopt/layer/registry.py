"""The one list of layer methods: every name ``prune``, the CLI, the demo and the torch
adapter know comes from here.

Registering a method is one file plus one decorator line::

    from sparseopt.layer import PruneResult, register

    @register("mymethod")
    def my_prune(W, H, pattern, *, alpha=1.0):
        '''One line that the CLI shows.'''
        ...
        return PruneResult(x=W_pruned, mask=mask)

A module inside ``sparseopt/layer/`` is found by itself; a module elsewhere is registered when
it is imported, or, for the ``sparseopt`` command, through the ``sparseopt.layer_methods``
entry point group of its package.

The contract of a method ``fn(W, H, pattern, **options)`` (see docs/contributing.md):

- ``W``: dense weights W* (d_out, d_in), float32 or float64, a NumPy array or a torch tensor,
  validated (finite, d_in divisible by m). Not to be modified.
- ``H``: the float64 symmetric Hessian in W's array library and device, checked PSD unless
  the method registered ``psd=False``.
- ``pattern``: an instance of one of the registered ``patterns``.
- options: keyword-only arguments with defaults; ``prune`` refuses unknown names.
- returns a :class:`~sparseopt.layer.result.PruneResult` with ``x`` (pruned weights in W's
  dtype and library) and ``mask`` (bool, the support; n entries per group so that "+GD" may
  use all slots), plus ``nit``, ``stop_reason``, ``history`` (with ``objective`` = the local
  loss and ``time`` when it iterates) and ``info`` where the method has them. ``prune``
  adds the loss, relative loss, time, refinement and method name, and gives the history
  the common keys (``COMMON_HISTORY_KEYS``, empty where they do not apply).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

from ..patterns import NM, TopK

__all__ = ["LayerMethod", "register", "methods", "get_method"]

# Modules of this package that hold no method.
_NOT_METHODS = {"registry", "result", "loss"}


@dataclass(frozen=True)
class LayerMethod:
    """A registered layer method: its name, function and what it accepts."""

    name: str
    fn: Callable
    patterns: tuple = (NM,)
    psd: bool = True
    order: int = 1000

    @property
    def summary(self) -> str:
        """First line of the function's docstring (shown by the CLI)."""
        doc = (self.fn.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else self.name


_REGISTRY: dict[str, LayerMethod] = {}
_DISCOVERED = False


def register(name: str, *, patterns=(NM,), psd: bool = True, order: int = 1000):
    """Decorator registering ``fn`` as the layer method ``name``.

    Parameters
    ----------
    name : str
        The name ``prune(method=...)`` and ``sparseopt prune --method`` use.
    patterns : tuple of pattern classes, default (NM,)
        The patterns the method supports (``(NM, TopK)`` for both).
    psd : bool, default True
        False for a method that handles an indefinite H itself (SparseGPT damps H);
        ``prune`` then checks H for PSD only when "+GD" steps follow.
    order : int, default 1000
        Position in listings (the built-in methods use 10-60).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier, got {name!r}")
    bad = [p for p in patterns if p not in (NM, TopK)]
    if bad or not patterns:
        raise ValueError(f"patterns must be a non-empty tuple of NM and TopK, got {patterns!r}")

    def deco(fn):
        old = _REGISTRY.get(name)
        if old is not None and (old.fn.__module__, old.fn.__qualname__) != \
                (fn.__module__, fn.__qualname__):
            raise ValueError(f"a layer method named {name!r} is already registered "
                             f"({old.fn.__module__}.{old.fn.__qualname__})")
        _REGISTRY[name] = LayerMethod(name, fn, tuple(patterns), bool(psd), int(order))
        return fn
    return deco


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    from . import __path__ as pkg_path

    for mod in pkgutil.iter_modules(pkg_path):
        if mod.name not in _NOT_METHODS and not mod.name.startswith("_"):
            importlib.import_module(f"{__package__}.{mod.name}")
    for ep in entry_points(group="sparseopt.layer_methods"):
        ep.load()


def methods() -> tuple:
    """Names of the registered layer methods, in listing order."""
    _discover()
    return tuple(sorted(_REGISTRY, key=lambda n: (_REGISTRY[n].order, n)))


def get_method(method) -> LayerMethod:
    """The :class:`LayerMethod` of a name, or a one-off one for a callable (any pattern,
    PSD H; like ``scipy.optimize.minimize(method=callable)``)."""
    if callable(method):
        return LayerMethod(getattr(method, "__name__", "callable"), method, (NM, TopK))
    _discover()
    if not isinstance(method, str) or method not in _REGISTRY:
        raise ValueError(f"method must be one of {sorted(_REGISTRY)} or a callable, "
                         f"got {method!r}")
    return _REGISTRY[method]
