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


def synced(fn, device):
    """``fn`` followed by a wait for the work it queued on ``device`` (a CUDA device: kernels
    run asynchronously, so a wall time without the wait measures only their launch). On
    the CPU (``device`` None or "cpu") ``fn`` itself."""
    if device is None or str(device) == "cpu":
        return fn
    import torch

    def run():
        out = fn()
        torch.cuda.synchronize(device)
        return out
    return run


def check_device(parser, device):
    """``--device`` of a benchmark: None (NumPy arrays), "cpu" or a CUDA device that exists,
    else ``parser.error`` naming it."""
    if device is None:
        return None
    try:
        import torch
    except ImportError:
        parser.error("--device needs torch (the adapter's extra: pip install -e .[torch])")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        parser.error(f"--device {device!r} is not a torch device: {err}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {device!r}: CUDA is not available on this machine")
    if dev.type not in ("cpu", "cuda"):
        parser.error(f"--device {device!r}: only cpu and cuda devices are timed here")
    return dev
