"""maiht-wen App. D, Table 6: "Runtime scales approximately linearly with the number of
iterations" of mAIHT (LLaMA-7B at 50%: 1, 20, 50, 100 iterations take 148, 860, 1370, 2286 s).

Setting: one correlated layer problem (LayerLoss, d_out x d_in = 64 x 256; quick 64 x 192),
mAIHT with the adaptive lambda of Alg. 1 towards 50% sparsity (the paper's setting), step
0.99 / L, tol = 0 (no early stop: every run does exactly its iterations). Two measurements in
the same run, single-threaded:
  (a) separate runs with k_max in {1, 20, 50, 100, 200} (quick {1, 10, 25, 50, 100}), each the
      best of 5 wall times (5 interleaved rounds over the k_max); the least-squares line t = a + b k, its R^2, and the time per
      iteration between consecutive k_max, (t_j - t_{j-1}) / (k_j - k_{j-1});
  (b) the cumulative time the solver records per iteration (``history["time"]``) of the
      fastest of the five longest runs: R^2 of its line and the time per iteration in each fifth of the run.

Claim ``maiht-table6-linear``: in the same run (b), R^2 >= 0.99 and the time per iteration of
the five fifths within a factor 2 (max / min <= 2); across runs (a), where the load of a shared
machine enters between runs, R^2 >= 0.97 (the paper's own four points give R^2 = 0.976 and
per-iteration times 37.5 / 17.0 / 30.5 s, a spread of 2.2; the spread of (a) is printed). What makes it fail
(not tested, see below): an iteration whose cost grows with k (e.g. work over the whole history each step:
quadratic total time); a run that stops early (k != k_max). The claim is timed: the test suite
runs this check but asserts neither its status nor a failing variant.
"""

from __future__ import annotations

import time

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_time"
R2_MIN = 0.99  # (b), the same run
R2_MIN_RUNS = 0.97  # (a), separate runs (the paper's data: 0.976)
SPREAD_MAX = 2.0  # (b)


def _r2(x, y):
    A = np.vstack([np.ones_like(x), x]).T
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    res = y - A @ coef
    return float(1 - np.sum(res ** 2) / np.sum((y - y.mean()) ** 2)), coef


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    import sparseopt.solvers as solvers
    from sparseopt.threads import one_thread
    from theory_checks.check_maiht_descent import correlated_layer

    header(NAME, "Table 6: mAIHT runtime scales approximately linearly with the number of iterations")
    d_out, d_in = (64, 192) if quick else (64, 256)
    ks = np.array([1, 10, 25, 50, 100] if quick else [1, 20, 50, 100, 200])
    f = correlated_layer(0, d_out=d_out, d_in=d_in, n=2 * d_in, rho=0.9)
    step = 0.99 / float(f.lipschitz())
    target = d_out * d_in // 2
    times = np.full(len(ks), np.inf)
    best_runs = [None] * len(ks)
    with one_thread():
        solvers.maiht(f, target_nnz=target, step=step, max_iter=3, tol=0.0)  # warm-up
        # interleaved rounds (each runs every k_max once): a slow spell of a shared machine
        # then slows one run of every k_max, not all five runs of one of them
        for _ in range(5):
            for j, k in enumerate(ks):
                t0 = time.perf_counter()
                r = solvers.maiht(f, target_nnz=target, step=step, max_iter=int(k), tol=0.0)
                t = time.perf_counter() - t0
                if t < times[j]:
                    times[j], best_runs[j] = t, r
    nits = [r.nit for r in best_runs]
    last = best_runs[-1]
    exact = all(int(n) == int(k) for n, k in zip(nits, ks))
    r2_a, coef = _r2(ks.astype(float), times)
    per_it_a = np.diff(times) / np.diff(ks)
    spread_a = float(per_it_a.max() / per_it_a.min()) if np.all(per_it_a > 0) else np.inf

    T = np.asarray(last.history["time"])  # cumulative, index 0 = start
    it = np.arange(T.size, dtype=float)
    r2_b, _ = _r2(it[1:], T[1:])
    cuts = np.linspace(1, T.size - 1, 6).astype(int)
    per_it_b = np.diff(T[cuts]) / np.diff(cuts)
    spread_b = float(per_it_b.max() / per_it_b.min()) if np.all(per_it_b > 0) else np.inf

    figure("problem", f"LayerLoss {d_out} x {d_in}, adaptive lambda to 50%, step 0.99/L, tol 0")
    figure("(a) runs", ", ".join(f"k={k}: {1e3 * t:.2f} ms" for k, t in zip(ks, times))
           + f"; iterations as asked: {exact}")
    figure("(a) line", f"t = {1e3 * coef[0]:.2f} ms + {1e3 * coef[1]:.3f} ms x k, R^2 = {r2_a:.5f}; "
                       f"ms per iteration between runs {np.round(1e3 * per_it_a, 3).tolist()}, "
                       f"max/min {spread_a:.2f}")
    figure("(b) history of the k=%d run" % ks[-1], f"R^2 = {r2_b:.5f}; ms per iteration by fifths "
           f"{np.round(1e3 * per_it_b, 3).tolist()}, max/min {spread_b:.2f}")
    figure("paper (Table 6)", "148, 860, 1370, 2286 s at 1, 20, 50, 100 iterations: "
                              "37.5, 17.0, 30.5 s per iteration between them")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    axes[0].plot(ks, 1e3 * times, "o", label="best of 5")
    axes[0].plot(ks, 1e3 * (coef[0] + coef[1] * ks), "--", label=f"line, R^2 {r2_a:.4f}")
    axes[0].set_xlabel("k_max (iterations)")
    axes[0].set_ylabel("wall time [ms]")
    axes[0].legend(fontsize=8)
    axes[1].plot(it, 1e3 * T)
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("cumulative time (history) [ms]")
    axes[1].set_title(f"R^2 {r2_b:.4f}", fontsize=9)
    savefig(fig, out_dir, f"{NAME}.png")

    ok = exact and r2_a >= R2_MIN_RUNS and r2_b >= R2_MIN and spread_b <= SPREAD_MAX
    txt = (f"same run: R^2 {r2_b:.4f} >= {R2_MIN}, per-iteration time max/min {spread_b:.2f} <= "
           f"{SPREAD_MAX:g}; separate runs: R^2 {r2_a:.4f} >= {R2_MIN_RUNS} (spread {spread_a:.2f})")
    claim("maiht-table6-linear", txt, ok)
    return verdict(NAME, ok, txt)
