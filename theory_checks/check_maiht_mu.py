"""maiht-wen Remark 2.3: the mu-stabilised problem (eq. 5) is problem (2) with X <- (X'X + mu I)^{1/2}.

In the paper's orientation (W of shape d1 x d2, calibration X of shape N x d1):
    f_mu(W) = 0.5 ||X W_hat - X W||_F^2 + mu/2 ||W_hat - W||_F^2
            = 0.5 ||X_mu W_hat - X_mu W||_F^2,   X_mu = (X'X + mu I)^{1/2}.
We build both objectives from these formulas (sparseopt.objectives.Smooth, X_mu from an
eigendecomposition), compare values and gradients at random points, and run
``maiht(f, mu=mu)`` against ``maiht(f_{X_mu}, mu=0)`` from W_hat with the same step, in the
penalised, adaptive and 2:4 forms. PASS if the values agree to 1e-10 (relative) and the
iterates and objective histories agree to 1e-8.

Claim ``maiht-rem23``. What would make it fail: a mu term with another factor (mu instead of
mu / 2), a step or Lipschitz constant that ignores mu, a solver that applies mu differently in
one of the forms.
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_mu"


def paper_objective(X, W_hat):
    """0.5 ||X W_hat - X W||_F^2 as a Smooth objective over W of shape W_hat.shape."""
    from sparseopt.objectives import Smooth

    G = X.T @ X
    L = float(np.linalg.eigvalsh(G)[-1])
    return Smooth(lambda W: 0.5 * float(np.sum((X @ (W_hat - W)) ** 2)),
                  lambda W: -G @ (W_hat - W), shape=W_hat.shape, lipschitz=L)


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM
    from sparseopt.solvers import maiht

    header(NAME, "Remark 2.3: mAIHT with the mu term of eq. 5 = mAIHT on problem (2) with "
                 "X <- (X'X + mu I)^{1/2}")
    rng = np.random.default_rng(0)
    N, d1, d2 = 40, 24, 8
    X = rng.standard_normal((N, d1)) + 0.8 * rng.standard_normal((N, 1))
    W_hat = rng.standard_normal((d1, d2))
    worst_val, worst_it = 0.0, 0.0
    hist = {}
    for mu in (0.1, 1.0) if quick else (0.01, 0.1, 1.0, 10.0):
        ev, U = np.linalg.eigh(X.T @ X + mu * np.eye(d1))
        X_mu = (U * np.sqrt(ev)) @ U.T
        f = paper_objective(X, W_hat)
        f_mu = paper_objective(X_mu, W_hat)
        for _ in range(5):
            W = rng.standard_normal((d1, d2))
            lhs = f.value(W) + 0.5 * mu * float(np.sum((W_hat - W) ** 2))
            worst_val = max(worst_val, abs(lhs - f_mu.value(W)) / abs(lhs))
        step = 0.95 / f_mu.lipschitz()
        lam = 0.02 * float(np.mean(W_hat**2)) / step
        for form, kw in (("l0", dict(lam=lam)), ("adaptive", dict(target_nnz=W_hat.size // 3)),
                         ("2:4", dict(pattern=NM(2, 4)))):
            a = maiht(f, mu=mu, x0=W_hat, step=step, max_iter=200, refine_steps=20, tol=0.0, **kw)
            b = maiht(f_mu, x0=W_hat, step=step, max_iter=200, refine_steps=20, tol=0.0, **kw)
            d_x = float(np.max(np.abs(a.x - b.x))) / float(np.max(np.abs(b.x)))
            ha, hb = a.history["objective"], b.history["objective"]
            # relative to the history's scale ([0] is 0 in the 2:4 form: f(W_hat) = 0)
            d_h = float(np.max(np.abs(ha - hb)) / np.max(np.abs(hb)))
            if not (np.isfinite(d_x) and np.isfinite(d_h)):
                d_x = d_h = np.inf
            worst_it = max(worst_it, d_x, d_h)
            figure(f"mu = {mu:5g} {form:8s}", f"max rel. diff of final W {d_x:.1e}, of objective "
                   f"history {d_h:.1e}; support {np.count_nonzero(a.x)}")
            hist[(mu, form)] = (a.history["objective"], b.history["objective"])
    figure("max relative value difference f + mu/2||.||^2 vs f_{X_mu}", f"{worst_val:.1e}")
    figure("max relative difference of iterates / histories", f"{worst_it:.1e}")
    fig, ax = plt.subplots(figsize=(6, 4))
    for (mu, form), (ha, hb) in hist.items():
        if form == "l0":
            ax.semilogy(ha, label=f"mu={mu:g}: f + mu term")
            ax.semilogy(hb, "--", label=f"mu={mu:g}: X_mu problem")  # on top of each other
    ax.set_xlabel("iteration")
    ax.set_ylabel("L(W^k)")
    ax.legend(fontsize=7)
    savefig(fig, out_dir, f"{NAME}.png")
    ok = worst_val <= 1e-10 and worst_it <= 1e-8
    claim("maiht-rem23", f"values {worst_val:.1e} <= 1e-10, iterates / histories {worst_it:.1e} <= 1e-8", ok)
    return verdict(NAME, ok, f"values {worst_val:.1e} <= 1e-10, iterates {worst_it:.1e} <= 1e-8")
