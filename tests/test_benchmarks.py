"""Smoke tests of the benchmark scripts that run in seconds: a script that no longer runs
is a benchmark nobody can rerun (``benchmarks/prox_passes.py`` raised a TypeError for a
session after a kernel's signature changed)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_prox_passes_runs_and_checks_its_passes():
    """The script asserts that the fused passes give the arrays of the plain expressions,
    then prints one row per size."""
    out = subprocess.run([sys.executable, os.path.join("benchmarks", "prox_passes.py"),
                          "--sizes", "8x8", "12x16", "--repeat", "2"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["8x8", "12x16"]
    assert all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows)
