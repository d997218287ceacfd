"""proxsparse-liu Table 1 redone: runtime and worst suboptimality of EnumIPM, EnumPGD, EnumALM.

Problems: 100 groups ``y ~ N(0, 1)^4`` (seed 1) x 200 values of ``lam`` on a log grid
``logspace(-2, 2, 200)`` (quick: 20 x 40). Each method solves the whole batch of groups
by one ``prox_nm(Y, lam, method=...)`` call per ``lam`` (after a warm-up call, so Numba
compilation is not timed); the reported runtime is the sum over the ``lam`` calls.
Suboptimality of a method on a (problem, lam) pair is ``f_method - min_{ALM, PGD, IPM} f``
with ``f`` the float64 prox objective (prox24-kubler eq. 7). Liu et al. report IPM 1e-13,
PGD 1e-6, ALM < 1e-13; here ALM and IPM must be <= 1e-10 (PGD is reported).
Also reported (not in the paper, not a criterion): the same suboptimalities on nearly tied
groups ``y = +-(1.6 + 0.01 N(0, 1))``, the hard inputs of prox24-kubler Fig. 1.
Certificates (a criterion): a random sample of (problem, lam) pairs (50; quick: 10) of the
paper's problems and as many of the nearly tied variant are certified globally optimal to
1e-6 relative with ``sparseopt.prox.certify`` at the best of the three solutions (a rigorous
moment/SOS lower bound, with spatial branch-and-bound where the order-2 relaxation of the
whole box is not tight); the certified fraction and the cost per group (seconds, SDP solves,
boxes bounded) are printed.
"""

from __future__ import annotations

import time

import numpy as np

from sparseopt.prox import METHODS
from sparseopt.regularizers import prox_objective

from ._report import figure, header, savefig, verdict

NAME = "table1"
TOL = 1e-10


def _solve_all(Y, lams):
    """Every method on the batch Y at every lam: W[meth] (L, P, 4), F[meth] (L, P), seconds."""
    from sparseopt.prox import prox_nm

    W = {meth: np.empty((len(lams), Y.shape[0], 4)) for meth in METHODS}
    F = {meth: np.empty((len(lams), Y.shape[0])) for meth in METHODS}
    secs = dict.fromkeys(METHODS, 0.0)
    for k, lam in enumerate(lams):
        for meth in METHODS:
            t0 = time.perf_counter()
            W[meth][k] = prox_nm(Y, float(lam), method=meth)
            secs[meth] += time.perf_counter() - t0
            F[meth][k] = prox_objective(W[meth][k], Y, float(lam))[:, 0]
    return W, F, secs


def run(out_dir, quick=False):
    from sparseopt.prox import certify, prox_nm

    header(NAME, "proxsparse-liu Table 1: EnumALM and EnumIPM optimal to <= 1e-10 on "
                 "100 problems x 200 lambdas; runtimes and PGD's suboptimality reported")
    rng = np.random.default_rng(1)
    n_prob, n_lam = (20, 40) if quick else (100, 200)
    Y = rng.standard_normal((n_prob, 4))
    lams = np.logspace(-2, 2, n_lam)
    for meth in METHODS:
        prox_nm(Y[:2], 0.5, method=meth)  # compile / warm up

    W, F, secs = _solve_all(Y, lams)
    stack = np.stack([F[meth] for meth in METHODS])
    f_best = stack.min(axis=0)
    subopt = {meth: float(np.max(F[meth] - f_best)) for meth in METHODS}

    figure("problems", f"{n_prob} groups y ~ N(0,1)^4 x {n_lam} lams in logspace(-2, 2); "
                       f"one batched prox_nm call per (method, lam)")
    for meth in METHODS:
        figure(f"Enum{meth.upper()}", f"total runtime {secs[meth]:.4f} s "
                                      f"({1e6 * secs[meth] / (n_prob * n_lam):.2f} us/cell), "
                                      f"worst suboptimality {subopt[meth]:.2e}")
    best_idx = np.argmin(stack, axis=0)
    wins = {meth: int(np.sum(F[meth] == f_best)) for meth in METHODS}
    figure("pairs where the method attains the best objective (ties count for all)", wins)

    # not in the paper: the same on nearly tied groups (the hard inputs of prox24-kubler
    # Fig. 1); reported only, the claim above is about the paper's random problems
    Y_tied = np.sign(rng.standard_normal((n_prob, 4))) * (1.6 + 0.01 * rng.standard_normal((n_prob, 4)))
    W_t, F_t, _ = _solve_all(Y_tied, lams)
    best_t = np.min(np.stack([F_t[meth] for meth in METHODS]), axis=0)
    figure("nearly tied variant (reported)", "y = +-(1.6 + 0.01 N(0,1)), same lams: worst "
           "suboptimality " + ", ".join(
        f"{meth.upper()} {np.max(F_t[meth] - best_t):.2e} "
        f"({int(np.sum(F_t[meth] - best_t > 1e-10))} pairs > 1e-10)"
        for meth in METHODS))

    # certificates at the best of the three solutions: a sample of the paper's problems and
    # as many nearly tied ones (where the order-2 relaxation of the whole box is not always
    # tight: certify then branches)
    n_cert = 10 if quick else 50
    stack_t = np.stack([F_t[meth] for meth in METHODS])
    samples = {"random": (Y, np.stack([W[meth] for meth in METHODS]), best_idx),
               "tied": (Y_tied, np.stack([W_t[meth] for meth in METHODS]), np.argmin(stack_t, axis=0))}
    all_certified = True
    for kind, (YY, W_all, best) in samples.items():
        flat = rng.choice(n_lam * n_prob, size=n_cert, replace=False)
        rows = []  # (certified, gap / max y^2, seconds, SDP solves, nodes, stop)
        for k, p in zip(*np.unravel_index(flat, (n_lam, n_prob))):
            cert = certify(YY[p], float(lams[k]), W_all[best[k, p], k, p])  # one group
            info = cert.info
            rows.append((bool(cert.certified[0]), float(cert.gap[0] / np.max(YY[p] ** 2)),
                         float(info["seconds"][0]), int(info["solves"][0]), int(info["nodes"][0]),
                         str(info["stop"][0])))
        ok_c, gap, sec, solves, nodes, stops = (np.array(c) for c in zip(*rows))
        all_certified &= bool(ok_c.all())
        figure(f"certify {kind} sample", f"{int(ok_c.sum())}/{n_cert} certified "
               f"({ok_c.mean():.0%}, tol 1e-6 relative); gap/max y^2 largest {gap.max():.2e}, "
               f"median {np.median(gap):.2e}; {int(np.sum(nodes > 1))} branched")
        figure(f"certify {kind} cost per group", f"{sec.mean():.3f} s mean, {sec.max():.3f} s max "
               f"({sec.sum():.1f} s total); SDP solves {solves.mean():.2f} mean, {solves.max()} max; "
               f"boxes {nodes.mean():.2f} mean, {nodes.max()} max")
        if not ok_c.all():
            figure(f"certify {kind} not certified (stop reasons)",
                   dict(zip(*np.unique(stops[~ok_c], return_counts=True))))

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    names = [f"Enum{m.upper()}" for m in METHODS]
    axes[0].bar(names, [secs[m] for m in METHODS], color=["C0", "C1", "C2"])
    axes[0].set_yscale("log")
    axes[0].set_ylabel("total runtime [s]")
    axes[0].set_title(f"{n_prob} problems x {n_lam} lambdas (batched per lambda)", fontsize=9)
    axes[1].bar(names, [max(subopt[m], 1e-17) for m in METHODS], color=["C0", "C1", "C2"])
    axes[1].axhline(TOL, color="k", ls="--", lw=1, label="1e-10")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("worst suboptimality vs best of three")
    axes[1].legend(fontsize=8)
    savefig(fig, out_dir, "table1.png")

    ok = subopt["alm"] <= TOL and subopt["ipm"] <= TOL and all_certified
    return verdict(NAME, ok, f"ALM {subopt['alm']:.1e}, IPM {subopt['ipm']:.1e} <= {TOL:g}; "
                             f"PGD {subopt['pgd']:.1e} (reported); sampled optima "
                             f"{'all' if all_certified else 'NOT all'} certified")
