"""Small models and batches shared by the adapter's tests (fixtures: ../../conftest.py)."""

import torch


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
