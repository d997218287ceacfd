import numpy as np
import pytest

from sparseopt.prox import prox_nm
from sparseopt.prox.thresholds import lemma10_thresholds


def test_lemma10_values_and_errors():
    lam3, lam2 = lemma10_thresholds([1.4, 1.1, 1.0, 0.7])
    assert lam3 == pytest.approx(0.7 / (1.4 * 1.1 + 1.1 * 1.0 + 1.4 * 1.0))
    assert lam2 == pytest.approx(1.0 / (1.4 * 1.1))
    with pytest.raises(ValueError, match="sorted"):
        lemma10_thresholds([1.0, 2.0, 0.5, 0.1])
    with pytest.raises(ValueError, match="length 4"):
        lemma10_thresholds([1.0, 2.0, 0.5])


def test_lemma10_is_necessary_on_random_inputs():
    """Below lam2 the optimum is never 2-sparse, below lam3 never 3-sparse (Lemma 10)."""
    rng = np.random.default_rng(0)
    z = np.sort(np.abs(rng.standard_normal((4000, 4))), axis=1)[:, ::-1].copy()
    lam3, lam2 = lemma10_thresholds(z)
    for frac in [0.3, 0.9, 0.999]:
        for lam_ref, max_nnz in ((lam2, 2), (lam3, 3)):
            lam = frac * lam_ref
            for i in range(0, 4000, 400):  # one lam per call: sample every 400th group
                w = prox_nm(z[i], float(lam[i]))
                assert np.count_nonzero(w) > max_nnz
