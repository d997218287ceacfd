"""Exact closed-form proxes of r_{0:M} (soft-thresholding) and r_{1:M} (quadratic).

Both act on groups of m consecutive entries along the last axis, compute in float64 and
return the dtype of the input. They are what ``prox_nm`` uses for n = 0 and n = 1 whatever
``method`` is asked for (prox24-kubler Sec. 3.4: "for 1:M sparsity the proximal operator
... can be solved in closed form").
"""

from __future__ import annotations

import numpy as np

__all__ = ["prox_r0m", "prox_r1m"]


def prox_r0m(y, lam):
    """Prox of lam * r_{0:M} = lam * ||.||_1: soft-thresholding.

    Parameters
    ----------
    y : ndarray, float32 or float64
    lam : float, >= 0

    Returns
    -------
    ndarray, shape and dtype of y: ``sign(y) * max(|y| - lam, 0)``.

    Notes
    -----
    r_{0:M}(w) = e_1(|w|) = sum |w_i| (prox24-kubler eq. 6 with N = 0), so the problem is
    separable and each coordinate is the l1 prox (proxsparse-liu Fact 5 after Lemma 3).
    """
    y = np.asarray(y)
    a = np.abs(y.astype(np.float64))
    t = np.maximum(a - float(lam), 0.0)
    w = np.where(y < 0, 0.0 - t, t)  # 0.0 - 0.0 is +0.0: no negative zeros
    return w.astype(y.dtype)


def prox_r1m(y, lam, m):
    """Exact prox of lam * r_{1:M} on every group of ``m`` entries along the last axis.

    Parameters
    ----------
    y : ndarray, float32 or float64, last axis divisible by m (checked by the caller)
    lam : float, >= 0
    m : int

    Returns
    -------
    ndarray, shape and dtype of y.

    Notes
    -----
    After Lemma 3 (prox24-kubler) take z sorted descending, z >= 0, and minimize over
    w >= 0

        f(w) = 0.5 ||w - z||^2 + lam e_2(w),   e_2(w) = ((sum w)^2 - sum w^2) / 2.

    Its Hessian is constant, (1 - lam) I + lam 1 1^T, with eigenvalues 1 - lam (multiplicity
    m - 1) and 1 + lam (m - 1).

    *lam < 1.* f is strictly convex, so the minimizer over the orthant is unique and is the
    KKT point. By Lemma 3 its support is the top-s entries for some s. On that support
    stationarity reads w_i - z_i + lam (T - w_i) = 0 with T = sum_S w, i.e.
    (1 - lam) w_i = z_i - lam T; summing over S gives T = Z_s / (1 + lam (s - 1)) with
    Z_s = z_1 + .. + z_s, and w_i = (z_i - lam T) / (1 - lam). We form this candidate for
    every s = 1..m, discard the ones with a negative entry (infeasible; w_s is the smallest
    entry since 1 - lam > 0) and keep the one of least objective: the unique minimizer is
    among them and every other candidate is a feasible point, so the least one is the
    minimizer.

    *lam > 1.* On any face with s >= 2 nonzeros the restricted Hessian has the eigenvalue
    1 - lam < 0, so no point with two or more nonzeros is a local minimum over the orthant
    (the minimizer restricted to its face must have a PSD Hessian there). The minimizer is
    therefore at most 1-sparse, and then r_{1:M} = 0, so w = (z_1, 0, .., 0).

    *lam = 1.* f(w) = 0.5 ||z||^2 - z.w + 0.5 T^2. For a fixed T = sum w >= 0, -z.w is
    smallest with all mass on z_1, and 0.5 T^2 - z_1 T is smallest at T = z_1: again
    w = (z_1, 0, .., 0) (one of several minimizers if z_1 = z_2).
    """
    y = np.asarray(y)
    g = y.reshape(-1, m).astype(np.float64)
    a = np.abs(g)
    order = np.argsort(-a, axis=1, kind="stable")
    z = np.take_along_axis(a, order, axis=1)
    lam = float(lam)
    w = np.zeros_like(z)
    if lam >= 1.0:
        w[:, 0] = z[:, 0]
    else:
        best = np.full(z.shape[0], np.inf)
        cums = np.cumsum(z, axis=1)
        idx = np.arange(m)
        for s in range(1, m + 1):
            T = cums[:, s - 1] / (1.0 + lam * (s - 1))
            cand = np.where(idx < s, (z - lam * T[:, None]) / (1.0 - lam), 0.0)
            feasible = cand[:, s - 1] >= 0.0
            tsum = cand.sum(axis=1)
            val = 0.5 * np.sum((cand - z) ** 2, axis=1) + lam * 0.5 * (
                tsum * tsum - np.sum(cand * cand, axis=1)
            )
            take = feasible & (val < best)
            best = np.where(take, val, best)
            w[take] = cand[take]
    res = np.empty_like(w)
    np.put_along_axis(res, order, w, axis=1)
    res = np.where(g < 0, 0.0 - res, res)
    return res.reshape(y.shape).astype(y.dtype)
