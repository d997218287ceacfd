"""proxsparse-liu Prop. 2 and Cor. 3: the frozen-weight regularizer
Reg_W0(W) = || W / (W0 + eps sign(W0)) * (W - W0) ||_F^2 (Sec. 3.1), as implemented by the
torch adapter (``sparseopt_torch.proxsparse.reg_w0``; guard +eps for W0 >= 0, -eps below).

Claims (each recorded with ``_report.claim``):

* ``liu-prop2-null``: Reg_W0(W) = 0 iff W_i = W0_i for every i with W_i != 0 (Prop. 2 (1)).
  Matrices W whose entries are drawn from {0, W0_i, W0_i + delta_i} (delta_i != 0, also tiny:
  1e-8 |W0_i| + 1e-12) on a W0 with exact zeros, +-1e-12 entries and both signs: the value must
  be exactly 0.0 when no entry is perturbed and > 0 otherwise.
* ``liu-prop2-restrict``: Reg_W0(W) = Reg_{W0[W != 0]}(W[W != 0]) (Prop. 2 (2)): the value on
  the restricted vectors equals the full one (rel. 1e-13).
* ``liu-prop2-c1``: Reg_W0 is continuously differentiable (Prop. 2 (3)): the autograd gradient
  equals central finite differences (rel. 1e-6 of the gradient scale) at random points and at
  the points where an entry is 0 or W0_i; and it is continuous there: the jump
  |g(x + h) - g(x - h)| across such a point shrinks linearly in h (jump(1e-6) <= 1e-2 x
  jump(1e-3) + 1e-12 scale; linear scaling gives 1e-3), while it would stay of order 1 for a kink such as |W|.
* ``liu-cor3``: Reg_W0(W) = 0 and Reg_{2:4}(W) = 0 iff W is 2:4 sparse and its kept entries equal
  W0 (Cor. 3), both ways, on matrices that are / are not 2:4 and have / have no perturbed kept
  entry; Reg_{2:4} is the library's ``r_nm``.

What would make it fail: a regularizer that charges pruned entries (plain weight decay
(W - W0)^2: Prop. 2 (1), (2) and Cor. 3 fail; tested in ``tests/test_theory_checks_broken.py``),
a kink (|W| or |W - W0| to the first power: C^1 fails), a guard that lets the denominator
vanish (non-finite values at W0 = 0).
"""

from __future__ import annotations

import numpy as np

from sparseopt.regularizers import r_nm

from ._report import claim, figure, header, savefig, verdict

NAME = "liu_regw0"
EPS = 0.1


def _w0(rng, shape):
    W0 = rng.standard_normal(shape)
    u = rng.random(shape)
    W0[u < 0.1] = 0.0
    W0[(u >= 0.1) & (u < 0.15)] = 1e-12
    W0[(u >= 0.15) & (u < 0.2)] = -1e-12
    return W0


def _draw(rng, W0, p_zero, p_pert, tiny):
    """Entries 0, W0 or W0 + delta (delta != 0)."""
    u = rng.random(W0.shape)
    delta = (1e-8 * np.abs(W0) + 1e-12) if tiny else rng.standard_normal(W0.shape) * 0.3
    delta = np.where(delta == 0, 1e-3, delta) * rng.choice([-1.0, 1.0], W0.shape)
    W = np.where(u < p_zero, 0.0, W0)
    pert = (u >= p_zero) & (u < p_zero + p_pert)
    W = np.where(pert, W0 + delta, W)
    pert &= W != 0  # a perturbation that lands on 0 is a zero entry
    return W, pert


def run(out_dir, quick=False):
    try:
        import torch

        from sparseopt_torch.proxsparse import reg_w0
    except ImportError as exc:  # the regularizer lives in the torch adapter
        header(NAME, "proxsparse-liu Prop. 2, Cor. 3")
        return verdict(NAME, False, f"needs torch and the sparseopt_torch adapter: {exc}")

    def reg(W, W0):
        return float(reg_w0(torch.as_tensor(W), torch.as_tensor(W0), EPS))

    header(NAME, "proxsparse-liu Prop. 2 (null space, restriction, C^1) and Cor. 3 for Reg_W0 "
                 f"(eps = {EPS}), the torch adapter's reg_w0")
    rng = np.random.default_rng(23)
    trials = 40 if quick else 1000
    shape = (8, 16)

    # Prop. 2 (1) and (2)
    restrict_err = 0.0
    null_bad = 0
    n_zero = n_pos = 0
    for t in range(trials):
        W0 = _w0(rng, shape)
        W, pert = _draw(rng, W0, 0.4, 0.0 if t % 3 == 0 else 0.1, tiny=t % 2 == 1)
        v = reg(W, W0)
        want_zero = not pert.any()
        n_zero += want_zero
        n_pos += not want_zero
        null_bad += (v != 0.0) if want_zero else not (v > 0.0)
        nz = W != 0
        v_r = reg(W[nz], W0[nz])
        restrict_err = max(restrict_err, abs(v_r - v) / max(abs(v), 1e-300))
    figure("Prop. 2 (1): matrices misclassified (value 0 iff no kept entry moved)",
           f"{null_bad} of {trials} ({n_zero} with value 0 expected, {n_pos} positive)")
    figure("Prop. 2 (2): max rel. |Reg on W[W != 0] - Reg on W|", f"{restrict_err:.1e}")

    # Prop. 2 (3): C^1
    fd_err = 0.0
    jump_ratio = 0.0
    for t in range(10 if quick else 100):
        W0 = _w0(rng, (4, 4))
        W = rng.standard_normal((4, 4))
        W[0, :2] = 0.0  # entries at 0 ...
        W[1, :2] = W0[1, :2]  # ... and at W0: the candidate kinks
        Wt = torch.tensor(W, requires_grad=True)
        reg_w0(Wt, torch.as_tensor(W0), EPS).backward()
        g = Wt.grad.numpy()
        scale = max(1.0, float(np.max(np.abs(g))))
        h = 1e-6
        for i, j in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2), (3, 3)]:
            E = np.zeros_like(W)
            E[i, j] = h
            fd = (reg(W + E, W0) - reg(W - E, W0)) / (2 * h)
            fd_err = max(fd_err, abs(fd - g[i, j]) / scale)
            jumps = []
            for hh in (1e-3, 1e-6):
                gp, gm = (torch.tensor(W + s * hh * (E / h), requires_grad=True) for s in (1, -1))
                reg_w0(gp, torch.as_tensor(W0), EPS).backward()
                reg_w0(gm, torch.as_tensor(W0), EPS).backward()
                jumps.append(abs(float(gp.grad[i, j] - gm.grad[i, j])))
            jump_ratio = max(jump_ratio, (jumps[1] - 1e-12 * scale) / max(jumps[0], 1e-300))
    figure("Prop. 2 (3): autograd vs central differences, max error / gradient scale", f"{fd_err:.1e}")
    figure("Prop. 2 (3): gradient jump across 0 and W0, jump(1e-6) / jump(1e-3) (max)",
           f"{jump_ratio:.1e}")

    # Cor. 3
    cor_bad = 0
    cases = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for t in range(trials):
        W0 = _w0(rng, shape)
        W, pert = _draw(rng, W0, 0.0, 0.0 if t % 2 == 0 else 0.15, tiny=t % 4 == 1)
        keep = np.zeros(shape, dtype=bool)
        for r in range(shape[0]):
            for c in range(0, shape[1], 4):
                keep[r, c + rng.choice(4, size=2, replace=False)] = True
        if t % 4 >= 2:  # break the pattern in one group
            keep[rng.integers(shape[0]), 4 * rng.integers(shape[1] // 4) + np.arange(3)] = True
        W = np.where(keep, W, 0.0)
        pert &= keep
        is24 = bool(np.all(np.count_nonzero(W.reshape(-1, 4), axis=1) <= 2))
        frozen = not pert.any()
        both_zero = reg(W, W0) == 0.0 and r_nm(W) == 0.0
        cases[(is24, frozen)] += 1
        cor_bad += both_zero != (is24 and frozen)
    figure("Cor. 3: matrices misclassified", f"{cor_bad} of {trials}; cases (2:4, frozen): "
                                            f"{ {str(k): v for k, v in cases.items()} }")

    import matplotlib.pyplot as plt

    xs = np.linspace(-0.5, 1.5, 401)
    w0 = 1.0
    vals = [reg(np.array([x]), np.array([w0])) for x in xs]
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot(xs, vals)
    ax.axvline(0.0, color="k", ls=":")
    ax.axvline(w0, color="k", ls=":")
    ax.set_xlabel("w (w0 = 1)")
    ax.set_ylabel("Reg_W0(w)")
    ax.set_title("Reg_W0 is 0 at w = 0 and w = w0, smooth in between", fontsize=9)
    savefig(fig, out_dir, f"{NAME}.png")

    oks = [
        claim("liu-prop2-null", f"{null_bad} of {trials} matrices misclassified", null_bad == 0 and n_zero > 0
              and n_pos > 0),
        claim("liu-prop2-restrict", f"max rel. difference {restrict_err:.1e} <= 1e-13", restrict_err <= 1e-13),
        claim("liu-prop2-c1", f"autograd vs differences {fd_err:.1e} <= 1e-6; jump ratio {jump_ratio:.1e} "
                              f"<= 1e-2", fd_err <= 1e-6 and jump_ratio <= 1e-2),
        claim("liu-cor3", f"{cor_bad} of {trials} matrices misclassified, every case present: "
                          f"{min(cases.values()) > 0}", cor_bad == 0 and min(cases.values()) > 0),
    ]
    return verdict(NAME, all(oks), f"Prop. 2: {null_bad} misclassified, restriction {restrict_err:.1e}, "
                                   f"C^1 {fd_err:.1e} / {jump_ratio:.1e}; Cor. 3: {cor_bad} misclassified")
