"""scikit-learn estimators of sparseopt.estimators: the sklearn contract and recovery."""

import itertools

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from sparseopt.estimators import (IHTRegressor, IOBSRegressor, MAIHTRegressor,  # noqa: E402
                                  information_criterion)

# small solver budgets: check_estimator fits dozens of times
FAST = [IHTRegressor(max_iter=20), MAIHTRegressor(max_iter=30), IOBSRegressor(max_iter=10)]


@parametrize_with_checks(FAST)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _data(n=120, p=30, k=4, seed=0, noise=0.5, intercept=3.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 1.0  # non-centred columns: the intercept matters
    beta = np.zeros(p)
    S = np.sort(rng.choice(p, k, replace=False))
    beta[S] = rng.choice([-1.0, 1.0], k) * rng.uniform(1.5, 3, k)
    return X, X @ beta + intercept + noise * rng.standard_normal(n), beta, S


@pytest.mark.parametrize("cls", [IHTRegressor, MAIHTRegressor, IOBSRegressor])
@pytest.mark.parametrize("k", ["ebic", 4])
def test_recovers_support_and_intercept(cls, k):
    X, y, beta, S = _data()
    est = cls(k=k).fit(X, y)
    assert est.k_ == 4
    assert np.array_equal(np.flatnonzero(est.coef_), S)
    # coef_ and intercept_ are the least-squares fit with an intercept on the support
    A = np.column_stack([np.ones(len(y)), X[:, S]])
    sol = np.linalg.lstsq(A, y, rcond=None)[0]
    assert est.intercept_ == pytest.approx(sol[0], rel=1e-8)
    assert np.allclose(est.coef_[S], sol[1:], rtol=1e-8)
    assert np.allclose(est.predict(X), A @ sol)
    assert est.score(X, y) > 0.9


@pytest.mark.parametrize("k", ["gic", "bic", "aic", "cv"])
def test_weaker_criteria_screen_the_support(k):
    """The lighter penalties (and CV on the MSE) may add noise variables (overfit) but keep
    the true ones; k_ is the argmin of what they minimise."""
    X, y, beta, S = _data()
    est = IHTRegressor(k=k, cv=3).fit(X, y)
    assert set(S) <= set(np.flatnonzero(est.coef_))
    score = est.cv_mse_ if k == "cv" else est.ic_
    assert est.k_ == int(np.argmin(score)) >= 4


def test_criterion_is_minimised_over_the_path():
    """ic_ at each level equals the criterion of the best subset of that size (enumeration on
    tiny p), and k_ is its argmin."""
    X, y, _, _ = _data(n=60, p=8, k=3, seed=1)
    est = IHTRegressor(k="ebic", k_max=5).fit(X, y)
    Xc, yc = X - X.mean(0), y - y.mean()
    n, p = X.shape
    for k in range(6):
        rss = min((np.sum((Xc[:, S] @ np.linalg.lstsq(Xc[:, S], yc, rcond=None)[0] - yc) ** 2)
                   for S in itertools.combinations(range(p), k)), default=yc @ yc) \
            if k else yc @ yc
        # transcription of abess's EBIC: n log(RSS/n) + k (log n + 2 log p)
        assert est.ic_[k] == pytest.approx(n * np.log(rss / n) + k * (np.log(n) + 2 * np.log(p)),
                                           rel=1e-9)
    assert est.k_ == int(np.argmin(est.ic_)) == 3
    assert information_criterion(1.0, 2, n, p, "aic") == pytest.approx(n * np.log(1 / n) + 4)


def test_grid_search():
    X, y, _, S = _data(seed=2)
    gs = GridSearchCV(IHTRegressor(), {"k": [1, 2, 4]}, cv=3).fit(X, y)
    assert gs.best_params_ == {"k": 4}
    assert np.array_equal(np.flatnonzero(gs.best_estimator_.coef_), S)


def test_k_larger_than_n_features_is_rejected():
    X, y, _, _ = _data(p=5, k=2)
    with pytest.raises(ValueError, match="exceeds"):
        IHTRegressor(k=6).fit(X, y)
    with pytest.raises(ValueError):
        IHTRegressor(k="best").fit(X, y)
