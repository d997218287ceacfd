"""Layer-pruning theory checks (prox24-kubler Sec. 4.1, 4.2): their references and quick runs."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from sparseopt.problems import correlated_hessian, fig2_problem
from sparseopt.threads import one_thread
from theory_checks.check_layer_fig2 import diagonal_optimum
from theory_checks.check_layer_toy import (
    PAPER_OPTIMUM,
    best_weights_on_mask,
    bruteforce_nm,
    layer_loss_ref,
    toy_problem,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Single-threaded (see ``sparseopt.threads.one_thread``): these small products are
    10-50x slower with oversubscribed thread pools on the shared 2-core machine."""
    with one_thread():
        yield


def _random_psd(d, rank, rng):
    X = rng.standard_normal((d, rank))
    return X @ X.T / rank


# --- brute-force reference of check_layer_toy -------------------------------------------


def test_bruteforce_toy_optimum_is_the_papers():
    W_star, H = toy_problem()
    W, mask, loss, row_losses = bruteforce_nm(W_star, H)
    assert row_losses.shape == (1, 36)
    np.testing.assert_allclose(W, PAPER_OPTIMUM, atol=1e-10)
    assert loss == pytest.approx(9.0, abs=1e-10)
    # Wanda's mask (keep 5, 3 | 5, 5) costs 16: the two pruned '2's add up in the 4/8 block.
    assert np.sort(row_losses[0])[1] == pytest.approx(16.0, abs=1e-10)
    assert mask.sum() == 4


def test_bruteforce_diagonal_hessian_matches_theorem1():
    # Theorem 1 (an independent closed form): for diagonal H the Wanda mask is optimal.
    rng = np.random.default_rng(0)
    for _ in range(5):
        W_star = rng.standard_normal((2, 8))
        h = rng.uniform(0.1, 2.0, 8)
        W, mask, loss, _ = bruteforce_nm(W_star, np.diag(h))
        keep, rel = diagonal_optimum(W_star, h)
        np.testing.assert_array_equal(mask, keep)
        np.testing.assert_allclose(W, np.where(keep, W_star, 0.0), atol=1e-12)
        assert loss / np.sum(W_star**2 * h) == pytest.approx(rel, rel=1e-12)


def test_bruteforce_beats_random_feasible_points_and_satisfies_kkt():
    rng = np.random.default_rng(1)
    for rank in (3, 12):  # singular and regular H
        H = _random_psd(8, rank, rng)
        W_star = rng.standard_normal((1, 8))
        W, mask, loss, row_losses = bruteforce_nm(W_star, H)
        assert loss == pytest.approx(row_losses.min(), rel=1e-12)
        # Stationarity on the kept set: (H (w - w*))_S = 0.
        np.testing.assert_allclose((H @ (W - W_star)[0])[mask[0]], 0.0, atol=1e-9)
        # No random 2:4 point does better.
        for _ in range(300):
            Z = rng.standard_normal((1, 8)) * 3
            keep = np.zeros(8, dtype=bool)
            for g in range(2):
                keep[g * 4 + rng.choice(4, 2, replace=False)] = True
            assert layer_loss_ref(np.where(keep, Z, 0.0), W_star, H) >= loss - 1e-9


def test_best_weights_on_mask_matches_projected_gradient_descent():
    # Independent algorithm: many masked gradient steps (eq. 5) from W* converge to the
    # mask's optimum (convex quadratic on the kept coordinates).
    rng = np.random.default_rng(2)
    H = _random_psd(8, 20, rng)
    w_star = rng.standard_normal(8)
    step = 1.0 / (2.0 * np.linalg.eigvalsh(H).max())
    for keep in itertools.islice(itertools.combinations(range(8), 4), 0, 70, 7):
        s = np.zeros(8, dtype=bool)
        s[list(keep)] = True
        w = np.where(s, w_star, 0.0)
        for _ in range(20000):
            w = w - step * 2.0 * np.where(s, H @ (w - w_star), 0.0)
        np.testing.assert_allclose(best_weights_on_mask(w_star, H, s), w, atol=1e-6)


def test_bruteforce_rejects_bad_input():
    W_star, H = toy_problem()
    with pytest.raises(ValueError, match="m=4"):
        bruteforce_nm(W_star[:, :6], H[:6, :6])
    with pytest.raises(ValueError, match="H must have shape"):
        bruteforce_nm(W_star, H[:4, :4])
    with pytest.raises(ValueError, match="max_masks"):
        bruteforce_nm(np.ones((1, 40)), np.eye(40))


# --- problem generators ----------------------------------------------------------------


def test_fig2_problem_limits_and_determinism():
    W1, H1 = fig2_problem(16, 1.0, seed=3)
    W0, H0 = fig2_problem(16, 0.0, seed=3)
    np.testing.assert_array_equal(W1, W0)  # same draws, only the mixture changes
    assert np.count_nonzero(H1 - np.diag(np.diag(H1))) == 0
    assert np.all((np.diag(H1) > 0) & (np.diag(H1) < 1))
    np.testing.assert_allclose(H0, H0.T)
    assert np.linalg.eigvalsh(H0).min() > -1e-12
    Wh, Hh = fig2_problem(16, 0.5, seed=3)
    np.testing.assert_allclose(Hh, 0.5 * H1 + 0.5 * H0, atol=1e-14)
    with pytest.raises(ValueError, match="alpha"):
        fig2_problem(16, 1.5)
    with pytest.raises(ValueError, match="d must"):
        fig2_problem(0, 0.5)


def test_one_thread_restores_numba_threads():
    import numba

    most = numba.config.NUMBA_NUM_THREADS
    if most < 2:
        pytest.skip("Numba has a single thread here: nothing to restore")
    outer = numba.get_num_threads()  # 1 under the module fixture
    numba.set_num_threads(most)
    try:
        with one_thread():
            assert numba.get_num_threads() == 1
        assert numba.get_num_threads() == most
    finally:
        numba.set_num_threads(outer)


def test_correlated_hessian_is_psd_and_correlated():
    H = correlated_hessian(32, seed=0)
    assert H.dtype == np.float64 and H.shape == (32, 32)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    assert np.linalg.eigvalsh(H).min() > 0
    C = H / np.sqrt(np.outer(np.diag(H), np.diag(H)))
    assert np.mean(np.diag(C, 1)) > 0.3  # neighbouring channels correlate (rho = 0.5)
    assert correlated_hessian(8, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="rho"):
        correlated_hessian(8, rho=1.0)


# --- the checks themselves, quick mode -----------------------------------------------------


@pytest.mark.parametrize("name", ["layer_toy", "layer_schedule"])
def test_layer_check_passes_in_quick_mode(name, tmp_path, capsys):
    import importlib

    module = importlib.import_module(f"theory_checks.check_{name}")
    ok = module.run(str(tmp_path), quick=True)
    from theory_checks._report import take_claims
    from theory_checks.claims import missing_claims

    assert missing_claims(name, take_claims()) == []  # every claim registered to it was recorded
    out = capsys.readouterr().out
    assert (f"PASS: {name}" if ok else f"FAIL: {name}") in out
    assert ok, out[-3000:]
    assert os.path.getsize(tmp_path / f"{name}.png") > 1000


@pytest.fixture(scope="module")
def fig2_quick(tmp_path_factory):
    from theory_checks.check_layer_fig2 import run_check

    out = tmp_path_factory.mktemp("fig2")
    passed, claims = run_check(str(out), quick=True)
    return passed, claims, out


@pytest.mark.parametrize("claim", ["alpha=1 wanda", "alpha=1 sparsegpt", "alpha=1 iobs",
                                   "alpha=1 prox", "alpha=1 maiht", "alpha<1 prox lowest"])
def test_fig2_quick_claims(fig2_quick, claim):
    passed, claims, out = fig2_quick
    assert claims[claim]
    assert os.path.getsize(out / "layer_fig2.png") > 1000


def test_fig2_quick_maiht_reaches_theorem1_optimum(fig2_quick):
    passed, claims, _ = fig2_quick
    assert claims["alpha=1 maiht"]
    assert passed


def test_bruteforce_diagonal_is_the_full_enumeration():
    # the cell-wise enumeration equals the enumeration of all masks of the row (diagonal H)
    from theory_checks.check_layer_fig2 import bruteforce_diagonal

    rng = np.random.default_rng(4)
    for _ in range(3):
        W_star = rng.standard_normal((2, 8))
        H = np.diag(rng.uniform(0.1, 2.0, 8))
        mask, W, rel = bruteforce_diagonal(W_star, H)
        W_full, mask_full, loss, _ = bruteforce_nm(W_star, H)
        np.testing.assert_array_equal(mask, mask_full)
        np.testing.assert_allclose(W, W_full, atol=1e-12)
        assert rel == pytest.approx(loss / np.sum((W_star @ H) * W_star), rel=1e-12)
    with pytest.raises(ValueError, match="diagonal"):
        bruteforce_diagonal(W_star, H + 0.1)
