"""Shared printing and plotting for the theory checks.

A run may be restricted to some claim ids (a mutation test needs only the part of a check
that records the claim its break hits): ``theory_checks._testing.run_quick(name, out_dir,
only=ids)`` sets the restriction for the duration of the run. A check asks
``wanted(*claim_ids)`` before each part and skips a part none of whose claims is wanted, and
draws its plot only under ``wanted()`` (no ids: True only without a restriction). Without
one (``python -m theory_checks``, the quick PASS tests) every part runs.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # no screen on CI machines
import matplotlib.pyplot as plt  # noqa: E402


def header(name: str, claim: str) -> None:
    """Print the check's name and the claim it tests."""
    print(f"\n=== {name} ===\n{claim}", flush=True)


def figure(label: str, value) -> None:
    """Print one measured figure."""
    print(f"  {label}: {value}", flush=True)


def verdict(name: str, passed: bool, detail: str = "") -> bool:
    """Print the PASS/FAIL line and return ``passed``."""
    word = "PASS" if passed else "FAIL"
    print(f"{word}: {name}" + (f" ({detail})" if detail else ""), flush=True)
    return bool(passed)


def savefig(fig, out_dir: str, filename: str) -> str:
    """Save ``fig`` as ``out_dir/filename`` and close it; return the path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, filename)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"  plot: {path}", flush=True)
    return path


#: The claim ids a restricted run records (None: no restriction); set by ``_testing.run_quick``.
_ONLY: frozenset | None = None


def wanted(*claim_ids: str) -> bool:
    """True when no restriction is active or any of ``claim_ids`` is wanted (``wanted()``:
    no restriction is active)."""
    return _ONLY is None or any(cid in _ONLY for cid in claim_ids)


#: claim id -> (figure, passed) recorded by :func:`claim` since the last :func:`take_claims`.
_RECORDED: dict = {}


def claim(claim_id: str, figure: str, passed: bool) -> bool:
    """Record the measured ``figure`` and verdict of one paper claim (an id of
    ``theory_checks.claims``) for ``docs/claims.md``; print it; return ``passed``."""
    _RECORDED[claim_id] = (str(figure), bool(passed))
    print(f"  claim {claim_id}: {'PASS' if passed else 'FAIL'} ({figure})", flush=True)
    return bool(passed)


def take_claims() -> dict:
    """The claims recorded since the last call (and forget them)."""
    out = dict(_RECORDED)
    _RECORDED.clear()
    return out

