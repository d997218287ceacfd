"""iobs-wu App. B.1: the curvature model of stochastic I-OBS, eq. (14), and its reading as
(L0, L1)-smoothness, eq. (15), with the library's mini-batch gradients.

Stochastic I-OBS (``sparseopt.solvers.stochastic_iobs``) replaces the Hessian by lam I + E[G],
G = g g' / ||g||^2, g an unbiased mini-batch gradient, under condition (14):
grad^2 f <= lam I + E[G]. On least squares f = 0.5 ||X theta - y||^2 (``LeastSquares``, Hessian
H = X'X; n = 10 samples, d = 6, three scales of X so that lambda_max(H) is about 0.1, 2 and 50)
at theta = 0 and at random 3-sparse points, every batch of size b in {1, 2, 3, 5, 8, n} is
enumerated (no sampling error), with the gradients of ``sampled_gradient`` (the solver's
default). First, what App. B.1 assumes: E_b[g] = grad f (unbiased) to 1e-12 relative.

Claim ``iobs-b1-batch-lambda`` (after eq. 14, DEVIATES): "if we use the full-batch gradient,
E[G] is of rank 1 and lam should be set to lambda_max(H); when the batch size is smaller, E[G]
is potentially of full rank, allowing us to choose a smaller lam." The smallest admissible lam
is lam_b = lambda_max(H - E_b[G]). What holds (checked in every case): rank E_n[G] = 1 and
lam_n in [lambda_max(H) - 1, lambda_max(H)]; for every b < n, E_b[G] has full rank d; and
lam_b >= lambda_max(H) - 1 (Weyl: tr E[G] = 1), so the gain is at most 1 in absolute terms
whatever the batch, i.e. negligible once lambda_max(H) >> 1 (printed per scale). What fails:
full rank does not imply a smaller lam: cases with lam_b > lam_n exist for every b < n (the
first is verified by the Rayleigh quotient of H - E_b[G] at its top eigenvector); the check
requires one such verified case and lam_b < lam_n in at least half of the cases for every b.

Claim ``iobs-eq15`` (DEVIATES): "since lambda_max(G(theta)) = ||g(theta)||^2 and
||grad f|| <= E||g||, (14) can be viewed as a matrix version of (L0, L1)-smoothness
||grad^2 f|| <= L0 + L1 ||grad f||^2". As stated it fails: G of (14) is normalised, so
lambda_max(G) = 1 for every g != 0 (checked; the number of sampled g with ||g||^2 != 1 is the
counterexample count). Corrected: for the unnormalised G = g g', lambda_max = ||g||^2, and
||grad f|| <= E||g||, ||grad f||^2 <= E||g||^2 (Jensen) hold on every enumerated case, so (14)
with g g' bounds ||grad^2 f|| by lam + E||g||^2, the (L0, L1) form; with the normalised G it
gives only ||grad^2 f|| <= lam + 1.

What would make it fail: a biased mini-batch gradient (e.g. without the n / |B| factor of
``sampled_gradient``), a G that is not normalised (then the rank / lam_b figures change and
lambda_max(G) = ||g||^2), an eigenvalue computation that is wrong.
"""

from __future__ import annotations

import itertools

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "iobs_stochastic"
BATCHES = (1, 2, 3, 5, 8, 10)
SCALES = (0.2, 1.0, 5.0)


def expected_G(sampler, theta, b):
    """(E_b[g], E_b[G] with G = g g' / ||g||^2, E_b[||g||], E_b[||g||^2], [every g]) over all
    batches of size b, equally likely (sampling without replacement)."""
    n = sampler.n_samples
    gs = [np.asarray(sampler.grad(theta, np.array(idx)), dtype=np.float64)
          for idx in itertools.combinations(range(n), b)]
    d = gs[0].size
    EG = np.zeros((d, d))
    for g in gs:
        nrm2 = float(g @ g)
        if nrm2 > 0:
            EG += np.outer(g, g) / nrm2
    m = len(gs)
    norms = np.array([np.linalg.norm(g) for g in gs])
    return sum(gs) / m, EG / m, float(norms.mean()), float(np.mean(norms ** 2)), gs


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt.objectives import LeastSquares
    from sparseopt.solvers.iobs import sampled_gradient

    header(NAME, "App. B.1: full-batch E[G] has rank 1, smaller batches give a full-rank E[G] and a "
                 "smaller admissible lam (eq. 14); lambda_max(G) = ||g||^2 (eq. 15)")
    n, d = 10, 6
    seeds = range(2 if quick else 4)
    unbiased = 0.0
    ok_rank, ok_full, ok_weyl = True, True, True
    smaller = {b: 0 for b in BATCHES if b < n}  # cases with lam_b < lam_n
    n_cases, counter = 0, None  # counter: a verified case with lam_b > lam_n
    ok_norm, ok_outer, ok_jensen = True, True, True
    n_counter, n_g = 0, 0
    gains = {s: 0.0 for s in SCALES}
    plot = []
    for scale in SCALES:
        for seed in seeds:
            rng = np.random.default_rng(seed)
            X = scale * rng.standard_normal((n, d)) / np.sqrt(n)
            y = X @ rng.standard_normal(d) + 0.3 * scale * rng.standard_normal(n)
            f = LeastSquares(X, y)
            sampler = sampled_gradient(f)
            H = f.hessian()
            lmax = float(np.linalg.eigvalsh(H)[-1])
            for point in range(2):
                theta = np.zeros(d)
                if point:
                    theta[rng.choice(d, 3, replace=False)] = rng.standard_normal(3)
                grad = f.grad(theta)
                gnorm = float(np.linalg.norm(grad))
                lam_b = {}
                for b in BATCHES:
                    Eg, EG, En, En2, gs = expected_G(sampler, theta, b)
                    unbiased = max(unbiased, float(np.linalg.norm(Eg - grad)) / max(gnorm, 1e-300))
                    lam_b[b] = float(np.linalg.eigvalsh(H - EG)[-1])
                    rank = int(np.linalg.matrix_rank(EG, tol=1e-10))
                    ok_rank &= (rank == 1) if b == n else (rank == d)
                    ok_weyl &= lam_b[b] >= lmax - 1.0 - 1e-12
                    for g in gs:
                        nrm2 = float(g @ g)
                        if nrm2 == 0:
                            continue
                        n_g += 1
                        lam_G = float(np.linalg.eigvalsh(np.outer(g, g) / nrm2)[-1])
                        ok_norm &= abs(lam_G - 1.0) <= 1e-12
                        n_counter += abs(lam_G - nrm2) > 1e-6 * max(nrm2, 1.0)
                        ok_outer &= abs(float(np.linalg.eigvalsh(np.outer(g, g))[-1]) - nrm2) <= 1e-12 * nrm2
                    ok_jensen &= gnorm <= En * (1 + 1e-12) and gnorm ** 2 <= En2 * (1 + 1e-12)
                n_cases += 1
                ok_full &= lmax - 1.0 - 1e-12 <= lam_b[n] <= lmax + 1e-12
                for b in smaller:
                    smaller[b] += lam_b[b] < lam_b[n]
                    if lam_b[b] > lam_b[n] and counter is None:
                        counter = (scale, seed, point, b, theta, H, sampler, lam_b[b], lam_b[n])
                gains[scale] = max(gains[scale], (lmax - min(lam_b.values())) / lmax)
                if point == 1:
                    plot.append((scale, [lam_b[b] / lmax for b in BATCHES]))
                if seed == 0 and point == 1:
                    figure(f"scale {scale}, seed 0, 3-sparse theta: lambda_max(H) = {lmax:.4f}, lam_b",
                           ", ".join(f"b={b}: {lam_b[b]:.4f}" for b in BATCHES))
    figure("unbiased mini-batch gradients (max rel. ||E_b g - grad f||)", f"{unbiased:.1e}")
    figure("largest relative gain (lambda_max(H) - min_b lam_b) / lambda_max(H) per scale",
           ", ".join(f"{s}: {g:.3f}" for s, g in gains.items()))
    figure("eq. 15", f"lambda_max(G) = 1 for all {n_g} sampled g: {ok_norm}; != ||g||^2 for "
                     f"{n_counter}; lambda_max(g g') = ||g||^2: {ok_outer}; Jensen: {ok_jensen}")

    fig, ax = plt.subplots(figsize=(6, 4))
    for scale, r in plot:
        ax.plot(BATCHES, r, "o-", color={0.2: "C0", 1.0: "C1", 5.0: "C2"}[scale])
    ax.axhline(1.0, color="k", ls=":")
    ax.set_xlabel("batch size b (n = 10: full batch)")
    ax.set_ylabel("lam_b / lambda_max(H)")
    ax.set_title("smallest lam of eq. (14); colours: lambda_max(H) ~ 0.1, 2, 50", fontsize=9)
    savefig(fig, out_dir, f"{NAME}.png")

    verified = False
    if counter is not None:  # the Rayleigh quotient of H - E_b[G] at its top eigenvector > lam_n
        scale, seed, point, b, theta, H, sampler, lb, ln = counter
        _, EG, _, _, _ = expected_G(sampler, theta, b)
        v = np.linalg.eigh(H - EG)[1][:, -1]
        verified = float(v @ (H - EG) @ v) > ln + 1e-9
        figure("counterexample (smaller batch, larger lam)", f"scale {scale}, seed {seed}, "
               f"{'3-sparse' if point else 'zero'} theta: lam_{b} = {lb:.4f} > lam_n = {ln:.4f}; "
               f"Rayleigh quotient check: {verified}")
    figure("cases with lam_b < lam_n (of %d)" % n_cases, ", ".join(f"b={b}: {c}" for b, c in smaller.items()))
    ok1 = (unbiased <= 1e-12 and ok_rank and ok_full and ok_weyl and verified
           and all(c >= n_cases / 2 for c in smaller.values()))
    claim("iobs-b1-batch-lambda", f"E_b[g] = grad f to {unbiased:.0e}; rank E[G] 1 (full batch), "
          f"d (b < n): {ok_rank}; lam_n in [lambda_max(H) - 1, lambda_max(H)]: {ok_full}; lam_b < "
          f"lam_n in " + ", ".join(f"{c}/{n_cases} (b={b})" for b, c in smaller.items())
          + f", a larger lam_b verified: {verified}; lam_b >= lambda_max(H) - 1: {ok_weyl}; largest "
          "relative gain " + ", ".join(f"{g:.1%}" for g in gains.values())
          + " at lambda_max(H) ~ 0.1, 2, 50", ok1)
    ok2 = unbiased <= 1e-12 and ok_norm and n_counter > 0 and ok_outer and ok_jensen
    claim("iobs-eq15", f"as stated: lambda_max(G) = 1, not ||g||^2, for {n_counter} of {n_g} sampled g; "
          f"corrected (G = g g'): lambda_max = ||g||^2 and ||grad f|| <= E||g||, ||grad f||^2 <= "
          f"E||g||^2 on every case: {ok_outer and ok_jensen}", ok2)
    return verdict(NAME, ok1 and ok2, f"batch lam {ok1}, eq. 15 {ok2}")
