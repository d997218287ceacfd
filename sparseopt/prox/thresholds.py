"""Necessary conditions on lam for sparse 2:4 prox optima (prox24-kubler Lemma 10)."""

from __future__ import annotations

import numpy as np

__all__ = ["lemma10_thresholds"]


def lemma10_thresholds(z):
    """Necessary conditions on ``lam`` for a sparse 2:4 prox optimum (prox24-kubler Lemma 10).

    Parameters
    ----------
    z : array_like, shape (..., 4)
        Inputs, each row sorted descending and non-negative with ``z_1, z_2 > 0``
        (the reduced problem of Lemma 3, eq. 9).

    Returns
    -------
    lam_3sparse : ndarray, shape (...)
        ``z_4 / (z_1 z_2 + z_2 z_3 + z_1 z_3)``: below it the optimum is never 3-sparse.
    lam_2sparse : ndarray, shape (...)
        ``z_3 / (z_1 z_2)``: below it the optimum is never 2-sparse.

    Notes
    -----
    Lemma 10 (App. B.4) derives both from the KKT conditions of eq. (9) with the
    multipliers ``nu = grad f(w) >= 0`` on the zero coordinates:

    * 2-sparse ``w = [z_1, z_2, 0, 0]``: ``nu_3 = -z_3 + lam z_1 z_2 >= 0`` gives
      ``lam >= z_3 / (z_1 z_2)`` (``nu_4 >= 0`` is weaker since ``z_4 <= z_3``).
    * 3-sparse ``w = [w_1, w_2, w_3, 0]``: ``nu_4 = -z_4 + lam e_2(w_{1:3}) >= 0``. Since
      ``0 < w_i <= z_i`` this implies the weaker, w-free condition
      ``lam >= z_4 / (z_1 z_2 + z_2 z_3 + z_1 z_3)``, which is what is returned here
      (see :func:`critical_lam_3sparse` for the sharp one along a path).

    In the caption of prox24-kubler Fig. 1 these are called ``lambda_1^*`` (3-sparse) and
    ``lambda_2^*`` (2-sparse); ``lam_3sparse <= lam_2sparse`` always, because
    ``z_4 z_1 z_2 <= z_3 (z_1 z_2 + z_2 z_3 + z_1 z_3)``.

    Examples
    --------
    >>> lam3, lam2 = lemma10_thresholds([1.4, 1.1, 1.0, 0.7])
    >>> print(f"{lam3:.4f} {lam2:.4f}")
    0.1733 0.6494
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 0 or z.shape[-1] != 4:
        raise ValueError(f"z must have a last axis of length 4, got shape {z.shape}")
    z1, z2, z3, z4 = z[..., 0], z[..., 1], z[..., 2], z[..., 3]
    if np.any(z < 0) or np.any(np.diff(z, axis=-1) > 0):
        raise ValueError("z must be non-negative and sorted descending along the last axis")
    if np.any(z2 <= 0):
        raise ValueError("z must have z_1 >= z_2 > 0 (Lemma 10 assumes it)")
    return z4 / (z1 * z2 + z2 * z3 + z1 * z3), z3 / (z1 * z2)
