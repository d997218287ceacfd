"""Synthetic test problems of the papers, shared by the demo, the theory checks, the tests and
the benchmarks, so that all of them work on exactly the same inputs.

Each generator is seeded (its own NumPy generator, no global state) and names in its
docstring the paper and figure it reproduces.

- :data:`LIU_Y`: the 2:4 group of proxsparse-liu App. C, Fig. 3 (regularization path).
- :func:`fig2_problem`: the layer of prox24-kubler Sec. 4.1, Fig. 2 (2:4 layer pruning).
- :func:`correlated_hessian`: a layer Hessian of correlated inputs (not from a paper: the
  benchmark's stand-in for LLM activations).
"""

from __future__ import annotations

import numpy as np

from .validation import check_int

__all__ = ["LIU_Y", "fig2_problem", "correlated_hessian"]

#: The group y = [1.4, 1.1, 1.0, 0.7] of proxsparse-liu App. C, Figure 3 (the 2:4 prox's
#: regularization path by EnumALM, EnumPGD and EnumIPM).
LIU_Y = np.array([1.4, 1.1, 1.0, 0.7])


def fig2_problem(d, alpha, *, seed=0):
    """Synthetic weights and Hessian of prox24-kubler Sec. 4.1 (Fig. 2).

    Parameters
    ----------
    d : int
        Input dimension (a multiple of 4 for 2:4 pruning).
    alpha : float
        Mixing weight in ``[0, 1]``: 1 gives a diagonal (uncorrelated) Hessian,
        0 a fully correlated Wishart-like one.
    seed : int, optional
        Seed of the NumPy generator.

    Returns
    -------
    W : ndarray, shape (1, d), float64
        Dense weights ``randn(1, d)``.
    H : ndarray, shape (d, d), float64
        ``alpha diag(U) + (1 - alpha) Z Z'`` with ``U ~ Uniform(0, 1)^d`` and
        ``Z = randn(d, d) / sqrt(d)``.

    Notes
    -----
    Follows the code snippet of prox24-kubler Sec. 4.1 (same order of draws:
    diagonal, Z, weights), with NumPy instead of torch.

    Examples
    --------
    >>> W, H = fig2_problem(8, 1.0, seed=0)
    >>> W.shape, H.shape, bool(np.all(H == np.diag(np.diag(H))))
    ((1, 8), (8, 8), True)
    """
    check_int(d, "d", minimum=1)
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    rng = np.random.default_rng(seed)
    u = rng.uniform(0.0, 1.0, d)
    Z = rng.standard_normal((d, d)) / np.sqrt(d)
    W = rng.standard_normal((1, d))
    H = alpha * np.diag(u) + (1.0 - alpha) * (Z @ Z.T)
    return W, H


def correlated_hessian(d, *, n_samples=None, rho=0.5, seed=0, dtype=np.float64):
    """Hessian ``H = X X' / n`` of correlated Gaussian inputs (``benchmarks/layer.py``,
    ``benchmarks/adapter_kernels.py``; not a problem of the papers).

    Parameters
    ----------
    d : int
        Input dimension.
    n_samples : int, optional
        Number of samples ``n`` (default ``2 d``).
    rho : float, optional
        Inputs are an AR(1)-like mixture: ``x_j = rho x_{j-1} + sqrt(1-rho^2) e_j``
        with per-channel scales drawn log-uniformly, so neighbouring channels are
        correlated and channel energies differ (as in LLM activations).
    seed : int, optional
    dtype : numpy dtype, optional
        dtype of the returned matrix.

    Returns
    -------
    H : ndarray, shape (d, d)

    Examples
    --------
    >>> H = correlated_hessian(16, seed=0)
    >>> H.shape, bool(np.allclose(H, H.T)), bool(np.linalg.eigvalsh(H).min() > 0)
    ((16, 16), True, True)
    """
    check_int(d, "d", minimum=1)
    if not -1.0 < float(rho) < 1.0:
        raise ValueError(f"rho must lie in (-1, 1), got {rho!r}")
    n = 2 * d if n_samples is None else int(n_samples)
    if n < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples!r}")
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((d, n))
    X = np.empty_like(E)
    X[0] = E[0]
    c = np.sqrt(1.0 - rho**2)
    for j in range(1, d):  # AR(1) along the channel axis
        X[j] = rho * X[j - 1] + c * E[j]
    X *= np.exp(rng.uniform(-1.0, 1.0, d))[:, None]
    return ((X @ X.T) / n).astype(dtype, copy=False)
