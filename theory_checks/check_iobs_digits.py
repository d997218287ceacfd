"""iobs-wu Sec. 4.1, Fig. 1b with a real image prior: scikit-learn's 8x8 digits instead of MNIST.

theta* = one digits image (d = 64, pixel values 0..16, k* = its nonzero pixels), n = 2d = 128
Gaussian measurements X_ij ~ N(0, 1/n), y = X theta*, sparsity k = 2k* per step. The digits
are dense for 8x8 images (k* is 16..42, median 33), so 2k* exceeds d for most of them; k is then
capped at d (the constraint is void and both methods are their unconstrained versions: Newton
and gradient descent). The check reports how often the cap binds. Top-k I-OBS (eq. 12) and
k-IHT (step 1/lambda_max(H)) run for a fixed budget of steps; the recovered images of both are
shown next to the truth (values clipped to [0, 16] as the paper clips to [0, 255]).
"""

from __future__ import annotations

import numpy as np
from sparseopt.threads import one_thread

from sparseopt import TopK
from sparseopt.objectives import LeastSquares
from sparseopt.solvers import iht, topk_iobs

from ._report import claim, figure, header, savefig, verdict

NAME = "iobs_digits"


def run(out_dir, quick: bool = False) -> bool:
    from sklearn.datasets import load_digits

    header(
        NAME,
        "iobs-wu Fig. 1b (digits prior): for a fixed number of steps Top-k I-OBS recovers the\n"
        "image theta* from n = 2d Gaussian measurements (k = 2k*), k-IHT is still far from it.",
    )
    images = load_digits().data  # (1797, 64), values 0..16
    d = images.shape[1]
    n = 2 * d
    n_exp = 3 if quick else 20
    budgets = [1, 10, 50, 200] if quick else [1, 10, 50, 200, 1000, 4000]
    show_at = 10
    rng = np.random.default_rng(2024)
    picks = rng.choice(len(images), n_exp, replace=False)
    rel = {"topk_iobs": np.zeros((n_exp, len(budgets))), "iht": np.zeros((n_exp, len(budgets)))}
    shown = []
    capped = 0
    for e, idx in enumerate(picks):
        theta_star = images[idx].astype(np.float64)
        kstar = int(np.count_nonzero(theta_star))
        k = min(2 * kstar, d)
        capped += 2 * kstar > d
        X = rng.standard_normal((n, d)) / np.sqrt(n)
        f = LeastSquares(X, X @ theta_star)
        step = 1.0 / f.lipschitz()
        norm = np.linalg.norm(theta_star)
        snaps = {}
        with one_thread():
            for key in rel:
                x, done = np.zeros(d), 0
                for j, T in enumerate(budgets):
                    if key == "topk_iobs":
                        x = topk_iobs(f, pattern=TopK(k), x0=x, max_iter=T - done, tol=0.0).x
                    else:
                        x = iht(f, pattern=TopK(k), x0=x, step=step, max_iter=T - done, tol=0.0).x
                    done = T
                    rel[key][e, j] = np.linalg.norm(x - theta_star) / norm
                    if T == show_at:
                        snaps[key] = x.copy()
        if len(shown) < 4:
            shown.append((theta_star, snaps["topk_iobs"], snaps["iht"], kstar, k))
        print(f"  image {idx}: k*={kstar}, k={k}; relative error after {budgets}: I-OBS "
              f"{np.array2string(rel['topk_iobs'][e], precision=1)}, k-IHT "
              f"{np.array2string(rel['iht'][e], precision=1)}", flush=True)

    figure("experiments (images)", n_exp)
    figure("images with 2k* > d = 64 (k capped at d)", f"{capped} of {n_exp}")
    for j, T in enumerate(budgets):
        figure(f"median relative error after {T} steps (I-OBS / k-IHT)",
               f"{np.median(rel['topk_iobs'][:, j]):.2e} / {np.median(rel['iht'][:, j]):.2e}")

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(shown), 3, figsize=(6, 2 * len(shown)))
    axes = np.atleast_2d(axes)
    for r, (truth, a, b, kstar, k) in enumerate(shown):
        for c, (img, title) in enumerate(((truth, f"truth (k*={kstar})"),
                                          (a, f"Top-k I-OBS, {show_at} steps"),
                                          (b, f"k-IHT, {show_at} steps"))):
            axes[r, c].imshow(np.clip(img, 0, 16).reshape(8, 8), cmap="gray_r", vmin=0, vmax=16)
            axes[r, c].set_title(title, fontsize=8)
            axes[r, c].axis("off")
    fig.suptitle(f"iobs-wu Fig. 1b with sklearn digits: d=64, n=128, k=min(2k*, d)", fontsize=9)
    savefig(fig, out_dir, f"{NAME}.png")

    j_show = budgets.index(show_at)
    claim("iobs-fig1b", f"after {show_at} steps: I-OBS max rel. error "
                        f"{np.max(rel['topk_iobs'][:, j_show]):.1e} < 1e-8, k-IHT min "
                        f"{np.min(rel['iht'][:, j_show]):.1e} > 100x that ({n_exp} digit images, "
                        f"k capped at d on {capped})",
          bool(np.max(rel["topk_iobs"][:, j_show]) < 1e-8
               and np.min(rel["iht"][:, j_show]) > 100 * np.max(rel["topk_iobs"][:, j_show])))
    passed = (
        np.max(rel["topk_iobs"][:, j_show]) < 1e-8
        and np.min(rel["iht"][:, j_show]) > 100 * np.max(rel["topk_iobs"][:, j_show])
    )
    return verdict(
        NAME,
        passed,
        f"after {show_at} steps: I-OBS max rel. error {np.max(rel['topk_iobs'][:, j_show]):.1e}, "
        f"k-IHT min {np.min(rel['iht'][:, j_show]):.1e}",
    )
