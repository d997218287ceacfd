"""Doctests of the adapter need torch: see tests/torch/conftest.py."""

import os

try:
    import torch  # noqa: F401
except ImportError:
    if os.environ.get("SPARSEOPT_REQUIRE_TORCH") == "1":
        raise
    collect_ignore_glob = ["*.py"]
