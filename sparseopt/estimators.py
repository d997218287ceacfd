"""scikit-learn estimators for best-subset (k-sparse) linear regression.

``IHTRegressor`` (hard thresholding pursuit: :func:`sparseopt.solvers.iht` with ``refit``),
``MAIHTRegressor`` (:func:`sparseopt.solvers.maiht`, maiht-wen eq. 4) and ``IOBSRegressor``
(:func:`sparseopt.solvers.topk_iobs`, iobs-wu eq. 12) fit min 0.5 ||y - b0 - X b||^2 subject
to ||b||_0 <= k. The sparsity level ``k`` is an integer, or chosen automatically:

- ``k="ebic"`` (default), ``"gic"``, ``"bic"``, ``"aic"``: an information criterion along the
  warm-started path k = 0, 1, ..., ``k_max`` (:mod:`sparseopt.paths`), the criteria of abess
  (Zhu et al. 2020): with L_k = RSS_k / n,

  - aic  = n log L_k + 2 k
  - bic  = n log L_k + k log n
  - gic  = n log L_k + k log p log log n
  - ebic = n log L_k + k (log n + 2 log p)

- ``k="cv"``: the k of smallest mean validation MSE over ``cv`` folds (one path per fold),
  then one path on all the data up to that k.

This module needs scikit-learn; ``import sparseopt`` does not import it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import check_cv
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .objectives import LeastSquares
from .paths import iht_path, iobs_path, maiht_path

__all__ = ["IHTRegressor", "MAIHTRegressor", "IOBSRegressor", "information_criterion",
           "default_k_max"]

CRITERIA = ("aic", "bic", "gic", "ebic")


def information_criterion(rss, k, n, p, criterion="ebic"):
    """n log(RSS / n) + penalty(k) for the criteria of abess (module docstring); arrays
    broadcast. RSS is floored at 1e-300 so that an exact fit gives a finite value."""
    rss = np.maximum(np.asarray(rss, dtype=np.float64), 1e-300)
    k = np.asarray(k, dtype=np.float64)
    fit = n * np.log(rss / n)
    if criterion == "aic":
        pen = 2.0 * k
    elif criterion == "bic":
        pen = k * math.log(n)
    elif criterion == "gic":
        pen = k * math.log(p) * math.log(math.log(n)) if n > math.e else k * math.log(p)
    elif criterion == "ebic":
        pen = k * (math.log(n) + 2.0 * math.log(p))
    else:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    return fit + pen


def default_k_max(n, p):
    """abess's default largest support size, n / (log log n log p), kept in [1, min(p, n)]."""
    denom = math.log(max(math.log(max(n, 3)), math.e)) * max(math.log(max(p, 2)), 1.0)
    return int(max(1, min(p, n, int(n / denom))))


class _SparseRegressor(RegressorMixin, BaseEstimator):
    """Shared fit / predict: centring, the k grid, the path, the choice of k."""

    _parameter_constraints = {
        "k": [Interval(numbers.Integral, 0, None, closed="left"),
              StrOptions(set(CRITERIA) | {"cv"})],
        "k_max": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "fit_intercept": ["boolean"],
        "cv": ["cv_object"],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
    }

    # -- subclasses: the path of the solver on f = LeastSquares(X, y) over the levels ks
    def _path(self, f, ks):
        raise NotImplementedError

    def _debiased_path(self, f, ks):
        """Coefficients (p, len(ks)) and the path; each point refitted by least squares on its
        support (the solvers' own point when that is already the refit)."""
        path = self._path(f, ks)
        coefs = path.coefs.copy()
        for j in range(coefs.shape[1]):
            coefs[:, j] = f.minimize_on_support(coefs[:, j] != 0)
        return coefs, path

    def _center(self, X, y):
        if self.fit_intercept:
            X_mean, y_mean = X.mean(axis=0), y.mean()
            return X - X_mean, y - y_mean, X_mean, y_mean
        return X, y, np.zeros(X.shape[1]), 0.0

    def fit(self, X, y):
        """Fit the k-sparse model; ``k`` chosen as the parameter says (module docstring)."""
        self._validate_params()
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        n, p = X.shape
        Xc, yc, X_mean, y_mean = self._center(X, y)
        f = LeastSquares(Xc, yc)
        if isinstance(self.k, numbers.Integral):
            if self.k > p:
                raise ValueError(f"k = {self.k} exceeds n_features = {p}")
            ks = np.asarray([int(self.k)])
        else:
            k_max = default_k_max(n, p) if self.k_max is None else min(int(self.k_max), p)
            ks = np.arange(k_max + 1)
        if self.k == "cv":
            ks = self._cv_levels(X, y, ks)
        coefs, path = self._fit_levels(f, ks)
        if isinstance(self.k, str) and self.k in CRITERIA:
            rss = np.array([2.0 * f.value(coefs[:, j]) for j in range(len(ks))])
            self.ic_ = information_criterion(rss, ks, n, p, self.k)
            j = int(np.argmin(self.ic_))
        else:
            j = len(ks) - 1  # an integer k, or the CV level (the last of its path)
        self.ks_ = ks
        self.k_ = int(ks[j])
        self.coef_ = coefs[:, j]
        self.intercept_ = float(y_mean - X_mean @ self.coef_) if self.fit_intercept else 0.0
        self.n_iter_ = int(path.nit[j]) if path is not None else 0
        self.path_ = path
        return self

    def _fit_levels(self, f, ks):
        if not float(f.lipschitz()) > 0:  # X (centred) is 0: every coefficient is 0
            return np.zeros((f.shape[0], len(ks))), None
        return self._debiased_path(f, ks)

    def _cv_levels(self, X, y, ks):
        """The levels 0..k* with k* of smallest mean validation MSE (one path per fold)."""
        cv = check_cv(self.cv)
        mse = np.zeros(len(ks))
        for train, test in cv.split(X, y):
            Xc, yc, X_mean, y_mean = self._center(X[train], y[train])
            f = LeastSquares(Xc, yc)
            kk = ks[ks <= Xc.shape[1]]
            coefs, _ = self._fit_levels(f, kk)
            intercepts = y_mean - X_mean @ coefs
            pred = X[test] @ coefs + intercepts
            mse += np.mean((y[test][:, None] - pred) ** 2, axis=0)
        self.cv_mse_ = mse / cv.get_n_splits(X, y)
        return ks[: int(np.argmin(self.cv_mse_)) + 1]

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags


_DOC_PARAMS = """
    Parameters
    ----------
    k : int or {"ebic", "gic", "bic", "aic", "cv"}, default "ebic"
        Sparsity level, or how to choose it (module docstring of sparseopt.estimators).
    k_max : int, optional
        Largest level tried when k is chosen; default abess's n / (log log n log p).
    fit_intercept : bool, default True
        Fit b0 (X and y are centred; the intercept is not penalised).
    cv : int or cross-validation generator, default 5
        Folds for k="cv".
    max_iter : int
        Iterations of the solver at each level of the path.
    tol : float
        Stopping tolerance of the solver (its docstring says on what)."""

_DOC_ATTRS = """
    Attributes
    ----------
    coef_ : ndarray (n_features,)
        Least-squares coefficients on the selected support of size ``k_``.
    intercept_ : float
    k_ : int
        The selected level.
    ks_ : ndarray
        Levels solved (the path).
    ic_ : ndarray
        The criterion at each level (k a criterion).
    cv_mse_ : ndarray
        Mean validation MSE at each level (k="cv").
    n_iter_ : int
        Solver iterations at the selected level.
    path_ : sparseopt.paths.Path
        The warm-started path on all the data (None when X is constant)."""


class IHTRegressor(_SparseRegressor):
    __doc__ = ("""k-sparse least squares by hard thresholding pursuit: IHT (maiht-wen eq. 3
    with the TopK projection) with a least-squares refit on each new support (``refit=True``,
    Foucart 2011), along the warm-started path of :func:`sparseopt.paths.iht_path`.
""" + _DOC_PARAMS + """
    refit : bool, default True
        HTP (True) or plain IHT with step 1/L (False; then many more iterations).
    step : float, optional
        Step of the gradient step; default 1/L.
""" + _DOC_ATTRS)

    _parameter_constraints = {
        **_SparseRegressor._parameter_constraints,
        "refit": ["boolean"],
        "step": [Interval(numbers.Real, 0, None, closed="neither"), None],
    }

    def __init__(self, k="ebic", *, k_max=None, fit_intercept=True, cv=5, max_iter=100,
                 tol=1e-8, refit=True, step=None):
        self.k = k
        self.k_max = k_max
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.max_iter = max_iter
        self.tol = tol
        self.refit = refit
        self.step = step

    def _path(self, f, ks):
        return iht_path(f, ks=ks, x0=np.zeros(f.shape), max_iter=self.max_iter, tol=self.tol,
                        refit=self.refit, step=self.step)


class MAIHTRegressor(_SparseRegressor):
    __doc__ = ("""k-sparse least squares by mAIHT (maiht-wen eq. 4, TopK projection) along the
    warm-started path of :func:`sparseopt.paths.maiht_path`; each level's support is then
    refitted by least squares.
""" + _DOC_PARAMS + """
    mu : float, default 0.0
        Stabiliser of maiht-wen eq. 5 (centred at each level's start).
    step : float, optional
        alpha of eq. 4; default 1/L.
""" + _DOC_ATTRS)

    _parameter_constraints = {
        **_SparseRegressor._parameter_constraints,
        "mu": [Interval(numbers.Real, 0, None, closed="left")],
        "step": [Interval(numbers.Real, 0, None, closed="neither"), None],
    }

    def __init__(self, k="ebic", *, k_max=None, fit_intercept=True, cv=5, max_iter=300,
                 tol=1e-6, mu=0.0, step=None):
        self.k = k
        self.k_max = k_max
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.max_iter = max_iter
        self.tol = tol
        self.mu = mu
        self.step = step

    def _path(self, f, ks):
        return maiht_path(f, ks=ks, x0=np.zeros(f.shape), max_iter=self.max_iter,
                          tol=self.tol, mu=self.mu, step=self.step)


class IOBSRegressor(_SparseRegressor):
    __doc__ = ("""k-sparse least squares by top-k I-OBS (iobs-wu eq. 12) along the
    warm-started path of :func:`sparseopt.paths.iobs_path`; each level's support is then
    refitted by least squares.
""" + _DOC_PARAMS + """
    newton : {"restricted", "full"}, default "restricted"
        Newton step on supp(theta) plus the k largest |grad| off it (a 2k x 2k system), or
        the full step of eq. 12 (needs damping when p > n); see ``topk_iobs``.
    damping : float, default 1e-8
        Relative Levenberg-Marquardt damping of the Newton system (topk_iobs ``damping``),
        which keeps it defined on tiny or collinear data.
""" + _DOC_ATTRS)

    _parameter_constraints = {
        **_SparseRegressor._parameter_constraints,
        "newton": [StrOptions({"restricted", "full"})],
        "damping": [Interval(numbers.Real, 0, None, closed="left")],
    }

    def __init__(self, k="ebic", *, k_max=None, fit_intercept=True, cv=5, max_iter=50,
                 tol=1e-8, newton="restricted", damping=1e-8):
        self.k = k
        self.k_max = k_max
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.max_iter = max_iter
        self.tol = tol
        self.newton = newton
        self.damping = damping

    def _path(self, f, ks):
        return iobs_path(f, ks=ks, x0=np.zeros(f.shape), max_iter=self.max_iter, tol=self.tol,
                         newton=self.newton, damping=self.damping)
