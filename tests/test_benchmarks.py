"""Smoke tests of the core benchmark scripts, each on a problem of a few seconds: a script
that no longer runs is a benchmark nobody can rerun (``benchmarks/prox_passes.py`` raised a
TypeError for a session after a kernel's signature changed, and no test noticed). The
figures themselves are read by people (``docs/benchmarks.md``), not asserted here."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script, *args):
    out = subprocess.run([sys.executable, os.path.join("benchmarks", script), *args],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_prox_passes_runs_and_checks_its_passes():
    """The script asserts that the fused passes give the arrays of the plain expressions,
    then prints one row per size."""
    rows = [line.split() for line in _run("prox_passes.py", "--sizes", "8x8", "12x16",
                                          "--repeat", "2").splitlines()[1:]]
    assert [r[0] for r in rows] == ["8x8", "12x16"]
    assert all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows)


@pytest.mark.parametrize("script, args, expect", [
    ("masked_gd.py", ("--sizes", "8x16", "--steps", "3", "--repeat", "1"), "8x16"),
    ("prox_screen.py", ("--sizes", "8x16", "--repeat", "1"), "float32"),
    ("prox.py", ("--cells", "1024", "--repeat", "1"), "alm float32"),
    # the synthetic layer alone (``--layers`` without names: no MiniLM)
    ("prox_schedule.py", ("--layers", "--synthetic", "32x64", "--gd", "5"),
     "cost until the mask in products"),
])
def test_benchmark_runs_on_a_small_problem(script, args, expect):
    assert expect in _run(script, *args)
