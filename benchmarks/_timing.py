"""Timing helpers shared by the benchmark scripts (run as `python benchmarks/<name>.py`,
which puts this folder on sys.path)."""

from __future__ import annotations

import argparse
import math
import time


def parse_size(text):
    """argparse type for a layer size such as ``1536x384``."""
    try:
        a, b = text.lower().split("x")
        return int(a), int(b)
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 1536x384, got {text!r}") from None


def best_time(fn, repeats):
    """Minimum wall time of ``repeats`` calls of ``fn`` (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def best_times(fns, repeats):
    """Minimum wall time of each function over ``repeats`` interleaved rounds (after one
    warm-up round): round r calls every function once, in order, so that all of them see
    the same machine load."""
    for fn in fns:
        fn()
    best = [math.inf] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best
