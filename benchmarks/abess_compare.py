"""Best-subset regression with k chosen automatically: sparseopt's estimators vs abess.

Data: abess's own generator, ``abess.datasets.make_glm_data(n, p, k, family="gaussian",
rho=rho, corr_type="exp", sigma=1)`` (abess's linear-regression tutorial setting: Gaussian
design with Toeplitz correlation rho^|i-j| -- rho = 0 is the independent design --, k nonzero
coefficients U[m, 100 m] times a random sign, m = 5 sqrt(2 log p / n), unit noise).
Defaults n = 500, p = 1000, k = 10, rho in {0, 0.5, 0.8}, 5 seeds per rho (seeds set through
``np.random.seed`` and ``random.seed``, which make_glm_data draws from). These signals are
strong (|b_j| >= m = 0.83 here, t-statistics near 18): every method recovers them. A second
setting, ``weak``, hands make_glm_data coefficients of equal size |b_j| = 2 sqrt(2 log p / n)
= 2 m / 5 = 0.33 (twice the universal-threshold level, t-statistics near 7), where the
methods and the criteria differ.

Every method chooses the support size itself:

abess          abess.LinearRegression() (defaults: ic_type="ebic", support sizes 0..
               n/(log log n log p), splicing)
iht-ebic       sparseopt.estimators.IHTRegressor(k="ebic"): hard thresholding pursuit along
               the warm-started path k = 0..k_max (abess's default k_max), EBIC
maiht-ebic     MAIHTRegressor(k="ebic"): mAIHT (maiht-wen eq. 4), step 1/L, max_iter 300
               per level, least-squares refit on each level's support, EBIC
iobs-ebic      IOBSRegressor(k="ebic"): top-k I-OBS (iobs-wu eq. 12, restricted Newton step),
               refit, EBIC
iht-cv         IHTRegressor(k="cv", cv=5): 5-fold CV on the validation MSE along the path

All fit an intercept. Reported per (rho, method), over the seeds: exact-support rate, TPR
(true nonzeros found / k), FPR (false nonzeros / (p - k)), the mean selected size, the mean
relative estimation error ||b_hat - b|| / ||b|| and the median wall time of ``fit``.

Usage: python benchmarks/abess_compare.py [--seeds 5] [--n 500] [--p 1000] [--k 10]
       [--rhos 0 0.5 0.8] [--signals abess weak] [--methods NAME ...] [--quick]
--quick: n = 100, p = 200, k = 5, one seed, rho in {0, 0.5} (a smoke test, seconds).
"""

from __future__ import annotations

import argparse
import random
import time
import warnings

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import numpy as np


def make_data(seed, n, p, k, rho, signal="abess"):
    """abess.datasets.make_glm_data (gaussian, Toeplitz 'exp' correlation), seeded; with
    signal="weak" the coefficients are handed to it (``coef_``): |b_j| = 2 sqrt(2 log p / n)
    on a random support with random signs."""
    from abess.datasets import make_glm_data

    np.random.seed(seed)
    random.seed(seed)
    coef = None
    if signal == "weak":
        coef = np.zeros(p)
        support = np.random.choice(p, k, replace=False)
        coef[support] = 2 * np.sqrt(2 * np.log(p) / n) * np.random.choice([-1.0, 1.0], k)
    data = make_glm_data(n=n, p=p, k=k, family="gaussian", rho=rho, corr_type="exp", sigma=1,
                         coef_=coef)
    return data.x, data.y, np.asarray(data.coef_)


def methods():
    from sparseopt.estimators import IHTRegressor, IOBSRegressor, MAIHTRegressor

    def fit_abess(X, y):
        import abess

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(abess.LinearRegression().fit(X, y).coef_)

    def est(model):
        return lambda X, y: model.fit(X, y).coef_

    return {
        "abess": fit_abess,
        "iht-ebic": est(IHTRegressor(k="ebic")),
        "maiht-ebic": est(MAIHTRegressor(k="ebic")),
        "iobs-ebic": est(IOBSRegressor(k="ebic")),
        "iht-cv": est(IHTRegressor(k="cv", cv=5)),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--p", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rhos", type=float, nargs="+", default=[0.0, 0.5, 0.8])
    parser.add_argument("--signals", nargs="+", default=["abess", "weak"],
                        choices=["abess", "weak"])
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--quick", action="store_true", help="small smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.p, args.k, args.seeds, args.rhos = 100, 200, 5, 1, [0.0, 0.5]

    meths = methods()
    if args.methods:
        unknown = set(args.methods) - set(meths)
        if unknown:
            parser.error(f"unknown methods {sorted(unknown)}; available {sorted(meths)}")
        meths = {m: f for m, f in meths.items() if m in args.methods}

    # warm-up outside the timings (imports, BLAS, caches)
    Xw, yw, _ = make_data(10_000, 60, 100, 3, 0.0)
    for fit in meths.values():
        fit(Xw, yw)

    print(f"n={args.n} p={args.p} k={args.k} sigma=1 seeds={args.seeds} "
          f"rho={args.rhos} (Toeplitz rho^|i-j|)", flush=True)
    rows = []
    for signal, rho in [(sig, r) for sig in args.signals for r in args.rhos]:
        stats = {m: {"exact": [], "tpr": [], "fpr": [], "size": [], "err": [], "time": []}
                 for m in meths}
        for seed in range(args.seeds):
            X, y, beta = make_data(seed, args.n, args.p, args.k, rho, signal)
            true = beta != 0
            for name, fit in meths.items():
                t0 = time.perf_counter()
                coef = fit(X, y)
                dt = time.perf_counter() - t0
                sel = coef != 0
                s = stats[name]
                s["exact"].append(bool(np.array_equal(sel, true)))
                s["tpr"].append((sel & true).sum() / true.sum())
                s["fpr"].append((sel & ~true).sum() / (~true).sum())
                s["size"].append(sel.sum())
                s["err"].append(np.linalg.norm(coef - beta) / np.linalg.norm(beta))
                s["time"].append(dt)
        for name in meths:
            s = stats[name]
            rows.append((signal, rho, name, np.mean(s["exact"]), np.mean(s["tpr"]),
                         np.mean(s["fpr"]), np.mean(s["size"]), np.mean(s["err"]),
                         np.median(s["time"])))
            print(f"  {signal} rho={rho:g} {name:11s} done", flush=True)

    print()
    print(f"{'signal':6s} {'rho':>4s} {'method':11s} {'exact':>6s} {'TPR':>6s} {'FPR':>8s} "
          f"{'size':>5s} {'rel.err':>8s} {'median s':>9s}")
    for signal, rho, name, exact, tpr, fpr, size, err, t in rows:
        print(f"{signal:6s} {rho:4g} {name:11s} {exact:6.0%} {tpr:6.3f} {fpr:8.5f} {size:5.1f} "
              f"{err:8.4f} {t:9.3f}")


if __name__ == "__main__":
    main()
