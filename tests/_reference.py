"""Independent references shared by the solver tests: exhaustive best subset and a
correlated least-squares generator."""

import itertools

import numpy as np


def best_subset(X, y, k):
    """Exhaustive best subset: (min over |S| = k of 0.5||X_S b - y||^2, that S as a tuple)."""
    best = (np.inf, None)
    for S in itertools.combinations(range(X.shape[1]), k):
        b = np.linalg.lstsq(X[:, S], y, rcond=None)[0]
        val = 0.5 * np.sum((X[:, S] @ b - y) ** 2)
        if val < best[0]:
            best = (val, S)
    return best


def correlated(seed, n=20, p=12, k=4, rho=0.8):
    """Least squares with AR(1)-correlated columns (correlation rho^|i-j|) and a k-sparse truth."""
    rng = np.random.default_rng(seed)
    C = rho ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(C).T
    b = np.zeros(p)
    b[rng.choice(p, k, replace=False)] = rng.standard_normal(k)
    return X, X @ b + 0.3 * rng.standard_normal(n)
