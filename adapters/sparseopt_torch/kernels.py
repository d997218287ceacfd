"""The torch kernels of sparseopt: the hot loops of the core, batched, for tensors on an
accelerator.

The core's layer pruners are written once against the array API (``sparseopt.backend``):
given torch tensors they compute with torch on the tensors' device. Only their hot kernels
differ per backend; this module registers the torch ones, and the core finds it through the
``sparseopt.kernels`` entry point (``pyproject.toml``; the core never imports the adapter):

* ``"prox_nm"``: :func:`prox24`, the exact 2:4 prox of ``lam * r_{2:4}`` over all groups of
  4 (EnumALM; NumPy/Numba twin ``sparseopt.prox.prox_nm(y, lam, 2, 4, method="alm")``).
* ``"sparsegpt_sweep"``: :func:`sparsegpt_sweep`, the OBS sweep inside one block of
  SparseGPT (twins ``sparseopt.layer.sparsegpt._sweep_block`` and ``_sweep_block_numpy``).
* ``"inverse_hessian_factor"``, ``"cholesky_ok"``: the damped Cholesky of SparseGPT and the
  PSD test with ``torch.linalg`` on the device (``sparseopt.linalg``).
* ``"synchronize"``: waits for queued CUDA work (timings).

CPU tensors use the Numba kernels on NumPy views (7-10x faster there than these,
docs/benchmarks.md); inside ``sparseopt.backend.device_kernels()`` they take these torch kernels
instead, which is how the tests check them against the core without a GPU
(tests/adapter/test_kernels.py).

The EnumALM kernel of the core (``sparseopt.prox.alm._solve_chunk24``) solves the candidates
of one group at a time on local scalars. Here the same arithmetic runs on 1-d tensors holding
one coordinate of every group: a sweep of ALM is a fixed sequence of elementwise operations
over all groups whose candidate has not converged yet (a convergence mask; converged groups
are dropped from the working set), so there is no Python loop over groups. The candidates
solved and their sweeps are the core's without its upper-bound cut (which only skips
candidates that cannot win), hence the result agrees with the core's up to rounding (tested).

Cost (benchmarks/adapter_kernels.py, CPU, 1 thread, loaded 2-core machine): the torch prox
is 7-10x slower than the Numba kernel on 4M cells. Two reasons: every ALM sweep is ~30
elementwise tensor ops plus a face-Newton attempt (~150 ops) instead of one fused loop, and a
call runs as many Python-level sweeps as its slowest group needs (up to ~800 at large lambda),
a fixed overhead per call.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from sparseopt.backend import register_kernel
from sparseopt.prox.alm import (
    _BRACKET,
    _MAX_NEWTON,
    _NEWTON_START24,
    _OBJ_SLACK,
    _WARM,
    DEFAULT_MAX_ITER,
    _run_groups,
    default_tol,
)
from sparseopt.validation import check_float_array, check_int, check_real

__all__ = ["prox24", "sparsegpt_sweep"]


# --------------------------------------------------------------------------------------
# 2:4 EnumALM on columns (one 1-d tensor per coordinate, one entry per group)
# --------------------------------------------------------------------------------------


def _f24(w1, w2, w3, w4, z1, z2, z3, z4, lg):
    """0.5 ||w - z||^2 + lg e_3(w) per group (prox24-kubler eq. 10)."""
    d1, d2, d3, d4 = w1 - z1, w2 - z2, w3 - z3, w4 - z4
    e3 = w1 * w2 * (w3 + w4) + w3 * w4 * (w1 + w2)
    return 0.5 * (d1 * d1 + d2 * d2 + d3 * d3 + d4 * d4) + lg * e3


def _newton3(a1, a2, a3, y1, y2, y3, lg):
    """Newton step for 0.5 ||a - y||^2 + lg a1 a2 a3 (eq. 12, Hessian eq. 23) by the adjugate.

    Returns (b1, b2, b3, step); step = -1 (and b = a) where the Hessian is not positive
    definite or the step leaves the open orthant, as ``alm._newton3``.
    """
    f1 = a1 - y1 + lg * a2 * a3
    f2 = a2 - y2 + lg * a1 * a3
    f3 = a3 - y3 + lg * a1 * a2
    p, q, r = lg * a3, lg * a2, lg * a1
    c11, c22, c33 = 1.0 - r * r, 1.0 - q * q, 1.0 - p * p
    c12, c13, c23 = q * r - p, p * r - q, p * q - r
    det = c11 + p * c12 + q * c13
    ok = (c33 > 0.0) & (det > 0.0)
    s = -1.0 / torch.where(ok, det, torch.ones_like(det))
    x1 = s * (c11 * f1 + c12 * f2 + c13 * f3)
    x2 = s * (c12 * f1 + c22 * f2 + c23 * f3)
    x3 = s * (c13 * f1 + c23 * f2 + c33 * f3)
    b1, b2, b3 = a1 + x1, a2 + x2, a3 + x3
    ok = ok & (b1 > 0.0) & (b2 > 0.0) & (b3 > 0.0)
    step = torch.maximum(x1.abs(), torch.maximum(x2.abs(), x3.abs()))
    return (torch.where(ok, b1, a1), torch.where(ok, b2, a2), torch.where(ok, b3, a3),
            torch.where(ok, step, torch.full_like(step, -1.0)))


def _newton4(w1, w2, w3, w4, z1, z2, z3, z4, lg):
    """Newton step for eq. 10 at w > 0 (Hessian eq. 24) by square-root-free LDL^T, as
    ``alm._newton4``; step = -1 (and b = w) on refusal."""
    f1 = w1 - z1 + lg * (w2 * w3 + w2 * w4 + w3 * w4)
    f2 = w2 - z2 + lg * (w1 * w3 + w1 * w4 + w3 * w4)
    f3 = w3 - z3 + lg * (w1 * w2 + w1 * w4 + w2 * w4)
    f4 = w4 - z4 + lg * (w1 * w2 + w1 * w3 + w2 * w3)
    h12, h13, h14 = lg * (w3 + w4), lg * (w2 + w4), lg * (w2 + w3)
    one = torch.ones_like(w1)
    d2 = 1.0 - h12 * h12
    ok = d2 > 0.0
    r2 = 1.0 / torch.where(ok, d2, one)
    m32 = lg * (w1 + w4) - h13 * h12
    m42 = lg * (w1 + w3) - h14 * h12
    d3 = 1.0 - h13 * h13 - m32 * m32 * r2
    ok = ok & (d3 > 0.0)
    r3 = 1.0 / torch.where(ok, d3, one)
    m43 = lg * (w1 + w2) - h14 * h13 - m42 * m32 * r2
    d4 = 1.0 - h14 * h14 - m42 * m42 * r2 - m43 * m43 * r3
    ok = ok & (d4 > 0.0)
    t1 = -f1
    t2 = -f2 - h12 * t1
    t3 = -f3 - h13 * t1 - m32 * r2 * t2
    t4 = -f4 - h14 * t1 - m42 * r2 * t2 - m43 * r3 * t3
    x4 = t4 / torch.where(ok, d4, one)
    x3 = t3 * r3 - m43 * r3 * x4
    x2 = t2 * r2 - m32 * r2 * x3 - m42 * r2 * x4
    x1 = t1 - h12 * x2 - h13 * x3 - h14 * x4
    b1, b2, b3, b4 = w1 + x1, w2 + x2, w3 + x3, w4 + x4
    ok = ok & (b1 > 0.0) & (b2 > 0.0) & (b3 > 0.0) & (b4 > 0.0)
    step = torch.maximum(torch.maximum(x1.abs(), x2.abs()), torch.maximum(x3.abs(), x4.abs()))
    return (torch.where(ok, b1, w1), torch.where(ok, b2, w2), torch.where(ok, b3, w3),
            torch.where(ok, b4, w4), torch.where(ok, step, torch.full_like(step, -1.0)))


def _face_newton24(w, z, lg):
    """Newton step on the face {i : w_i > 0}, batched (``alm._face_newton24``).

    ``w``, ``z``: lists of four 1-d tensors. Four positives: eq. 24; three: eq. 23 on those
    three; two or fewer: the face's quadratic minimizer w_i = z_i. Returns (b, step) with
    step = -1 where refused (b = w there).
    """
    pos = [wi > 0.0 for wi in w]
    npos = pos[0].int() + pos[1].int() + pos[2].int() + pos[3].int()
    b = [wi.clone() for wi in w]
    step = torch.full_like(w[0], -1.0)
    # integer indices from one nonzero per face, tested by their length: every boolean test
    # or boolean index is a host synchronization on a GPU
    idx = (npos == 4).nonzero().squeeze(1)
    if idx.numel():
        res = _newton4(*[wi[idx] for wi in w], *[zi[idx] for zi in z], lg[idx])
        for i in range(4):
            b[i][idx] = res[i]
        step[idx] = res[4]
    m3 = npos == 3
    if bool(m3.any()):
        for k in range(4):  # the face with w_k = 0
            idx = (m3 & ~pos[k]).nonzero().squeeze(1)
            if not idx.numel():
                continue
            keep = [i for i in range(4) if i != k]
            res = _newton3(*[w[i][idx] for i in keep], *[z[i][idx] for i in keep], lg[idx])
            for j, i in enumerate(keep):
                b[i][idx] = res[j]
            step[idx] = res[3]
    idx = (npos <= 2).nonzero().squeeze(1)
    if idx.numel():
        ws = [wi[idx] for wi in w]
        bs = [torch.where(pos[i][idx], z[i][idx], torch.zeros_like(ws[i])) for i in range(4)]
        bad = torch.zeros_like(ws[0], dtype=torch.bool)
        for i in range(4):
            bad = bad | (pos[i][idx] & (bs[i] <= 0.0))
        st = torch.maximum(torch.maximum((bs[0] - ws[0]).abs(), (bs[1] - ws[1]).abs()),
                           torch.maximum((bs[2] - ws[2]).abs(), (bs[3] - ws[3]).abs()))
        for i in range(4):
            b[i][idx] = torch.where(bad, ws[i], bs[i])
        step[idx] = torch.where(bad, torch.full_like(st, -1.0), st)
    return b, step


def _alm24(z, s, lg, x, tol, max_iter, budget, few):
    """ALM (proxsparse-liu Alg. 2) with face-Newton steps for the candidate of support size s,
    batched over groups (``alm._alm24``).

    ``z``: four 1-d tensors (normalized, z1 = 1); for s = 3 the fourth coordinate is fixed at
    0 and z4 is not used. ``x``: the start (four tensors). Returns (w, sweeps, maxed,
    deferred): the candidate, the sweeps each group used, whether it hit max_iter, and
    whether it was still running after ``budget`` < max_iter sweeps, or once at most ``few``
    groups were (its w is not converged; :func:`_prox24_groups` hands such groups to the
    core's kernel).

    All groups start together, so the global sweep counter is every group's counter; a group
    leaves the working set once a sweep moves no coordinate by more than ``tol`` (the Alg. 2
    rule; z1 = 1, so the core's ``tol * z1`` is ``tol``).
    """
    G = z[0].shape[0]
    dev, dt = z[0].device, z[0].dtype
    zero = torch.zeros(G, device=dev, dtype=dt)
    zz = [z[0], z[1], z[2], z[3] if s == 4 else zero]
    w_out = [x[0].clone(), x[1].clone(), x[2].clone(), x[3].clone() if s == 4 else zero.clone()]
    sweeps = torch.full((G,), max_iter, device=dev, dtype=torch.int64)
    maxed = torch.ones(G, device=dev, dtype=torch.bool)
    newton_stop = 0.01 * tol
    # the working set: indices of unconverged groups and their state
    act = torch.arange(G, device=dev)
    w = [wi.clone() for wi in w_out]
    za, lga = zz, lg
    for it in range(1, min(max_iter, budget) + 1):
        w1, w2, w3, w4 = w
        z1, z2, z3, z4 = za
        v = (z1 - lga * (w2 * w3 + w2 * w4 + w3 * w4)).clamp_min(0.0)
        delta = (v - w1).abs()
        w1 = v
        v = (z2 - lga * (w1 * w3 + w1 * w4 + w3 * w4)).clamp_min(0.0)
        delta = torch.maximum(delta, (v - w2).abs())
        w2 = v
        v = (z3 - lga * (w1 * w2 + w1 * w4 + w2 * w4)).clamp_min(0.0)
        delta = torch.maximum(delta, (v - w3).abs())
        w3 = v
        if s == 4:
            v = (z4 - lga * (w1 * w2 + w1 * w3 + w2 * w3)).clamp_min(0.0)
            delta = torch.maximum(delta, (v - w4).abs())
            w4 = v
        w = [w1, w2, w3, w4]
        done = delta <= tol
        fin = done.nonzero().squeeze(1)  # integer indices: one host synchronization
        if fin.numel():
            idx = act[fin]
            for i in range(4):
                w_out[i][idx] = w[i][fin]
            sweeps[idx] = it
            maxed[idx] = False
            keep = (~done).nonzero().squeeze(1)
            act = act[keep]
            w = [wi[keep] for wi in w]
            za = [zi[keep] for zi in za]
            lga = lga[keep]
            delta = delta[keep]
            if act.numel() == 0:
                break
        if budget < max_iter and act.numel() <= few:
            break  # the last few groups: a sweep here costs as much as one of all groups
        near = (delta <= _NEWTON_START24).nonzero().squeeze(1)  # z1 = 1
        if near.numel():
            _newton_phase(w, za, lga, near, newton_stop)
    deferred = torch.zeros(G, device=dev, dtype=torch.bool)
    if act.numel():
        for i in range(4):
            w_out[i][act] = w[i]
        if budget < max_iter:
            deferred[act], maxed[act] = True, False
    return w_out, sweeps, maxed, deferred


def _newton_phase(w, z, lg, idx, newton_stop):
    """Up to _MAX_NEWTON safeguarded face-Newton steps on the groups ``idx`` (indices, in
    place on the columns ``w``): a step is taken only if the objective does not increase by
    more than rounding; a group stops at the first refusal or once its step is below
    ``newton_stop`` (quadratic convergence: the confirming sweep can follow)."""
    ws = [wi[idx] for wi in w]
    zs = [zi[idx] for zi in z]
    lgs = lg[idx]
    f_old = _f24(*ws, *zs, lgs)
    for _ in range(_MAX_NEWTON):
        b, st = _face_newton24(ws, zs, lgs)
        f_new = _f24(*b, *zs, lgs)
        ok = (st >= 0.0) & ~(f_new > f_old + _OBJ_SLACK * f_old.abs())
        if not bool(ok.any()):
            break
        ws = [torch.where(ok, bi, wi) for bi, wi in zip(b, ws)]
        f_old = torch.where(ok, f_new, f_old)
        # write back the accepted steps now: groups that stop here keep them
        for i in range(4):
            w[i][idx] = ws[i]
        go = (ok & ~(st * st <= newton_stop)).nonzero().squeeze(1)
        if not go.numel():
            break
        idx, ws, zs, lgs, f_old = idx[go], [wi[go] for wi in ws], [zi[go] for zi in zs], \
            lgs[go], f_old[go]


def _bracket3(z1, z2, z3, lg, cap):
    """_BRACKET Jacobi passes bracketing every interior stationary point of support 3
    (``alm._solve_chunk24``); returns (ok, l, u)."""
    u1, u2, u3 = torch.minimum(z1, cap), torch.minimum(z2, cap), torch.minimum(z3, cap)
    ok = torch.ones_like(z1, dtype=torch.bool)
    for _ in range(_BRACKET):
        l1 = (z1 - lg * u2 * u3).clamp_min(0.0)
        l2 = (z2 - lg * u1 * u3).clamp_min(0.0)
        l3 = (z3 - lg * u1 * u2).clamp_min(0.0)
        u1 = torch.minimum(u1, z1 - lg * l2 * l3)
        u2 = torch.minimum(u2, z2 - lg * l1 * l3)
        u3 = torch.minimum(u3, z3 - lg * l1 * l2)
        ok = ok & (u1 > 0.0) & (u2 > 0.0) & (u3 > 0.0) & (lg * l1 <= 1.0) \
            & (l1 <= u1) & (l2 <= u2) & (l3 <= u3)
    return ok, (l1, l2, l3), (u1, u2, u3)


def _bracket4(z1, z2, z3, z4, lg, cap):
    """As ``_bracket3`` for support 4 (PSD needs lg (u_k + u_l) <= 1)."""
    u1, u2 = torch.minimum(z1, cap), torch.minimum(z2, cap)
    u3, u4 = torch.minimum(z3, cap), torch.minimum(z4, cap)
    ok = torch.ones_like(z1, dtype=torch.bool)
    for _ in range(_BRACKET):
        l1 = (z1 - lg * (u2 * u3 + u2 * u4 + u3 * u4)).clamp_min(0.0)
        l2 = (z2 - lg * (u1 * u3 + u1 * u4 + u3 * u4)).clamp_min(0.0)
        l3 = (z3 - lg * (u1 * u2 + u1 * u4 + u2 * u4)).clamp_min(0.0)
        l4 = (z4 - lg * (u1 * u2 + u1 * u3 + u2 * u3)).clamp_min(0.0)
        u1 = torch.minimum(u1, torch.minimum(z1 - lg * (l2 * l3 + l2 * l4 + l3 * l4), cap - l2))
        u2 = torch.minimum(u2, torch.minimum(z2 - lg * (l1 * l3 + l1 * l4 + l3 * l4), cap - l1))
        u3 = torch.minimum(u3, torch.minimum(z3 - lg * (l1 * l2 + l1 * l4 + l2 * l4), cap - l1))
        u4 = torch.minimum(u4, torch.minimum(z4 - lg * (l1 * l2 + l1 * l3 + l2 * l3), cap - l1))
        ok = ok & (u1 > 0.0) & (u2 > 0.0) & (u3 > 0.0) & (u4 > 0.0) \
            & (lg * (l1 + l2) <= 1.0) & (l1 <= u1) & (l2 <= u2) & (l3 <= u3) & (l4 <= u4)
    return ok, (l1, l2, l3, l4), (u1, u2, u3, u4)


def _candidate(z, s, lg, best, tol, max_iter, budget, few):
    """Pruning, start and ALM for the candidate of support size s on all groups.

    Returns (idx, w, val, sweeps, maxed, deferred) for the groups whose candidate was
    computed (the others are excluded by the exact necessary conditions of
    ``alm._solve_chunk24``); ``budget``, ``few``: see :func:`_alm24`.
    """
    z1, z2, z3, z4 = z
    cap = torch.where(lg > 0.0, 1.0 / torch.where(lg > 0.0, lg, torch.ones_like(lg)),
                      torch.full_like(lg, math.inf))
    if s == 3:
        ok, lo, up = _bracket3(z1, z2, z3, lg, cap)
        g = [z1 - up[0], z2 - up[1], z3 - up[2]]
        lb = 0.5 * (z4 * z4 + g[0] * g[0] + g[1] * g[1] + g[2] * g[2])
    else:
        ok, lo, up = _bracket4(z1, z2, z3, z4, lg, cap)
        g = [z1 - up[0], z2 - up[1], z3 - up[2], z4 - up[3]]
        lb = 0.5 * (g[0] * g[0] + g[1] * g[1] + g[2] * g[2] + g[3] * g[3])
    lb = lb + sum(li * gi for li, gi in zip(lo, g)) / 3.0
    run = (z[s - 1] > 0.0) & ok & (lb <= best * (1.0 + _OBJ_SLACK))
    idx = run.nonzero().squeeze(1)
    if idx.numel() == 0:
        return idx, None, None, None, None, None
    zs = [zi[idx] for zi in z]
    lgs = lg[idx]
    los, ups = [li[idx] for li in lo], [ui[idx] for ui in up]
    # start: the middle of a tight bracket, else the balanced start t + C(s-1, 2) lg t^2 = mean z
    width = los[0].new_zeros(idx.shape[0])
    for li, ui in zip(los, ups):
        width = torch.maximum(width, ui - li)
    warm = width <= _WARM  # z1 = 1
    zb = sum(zs[:s]) / s
    t = 2.0 * zb / (1.0 + torch.sqrt(1.0 + (4.0 if s == 3 else 12.0) * lgs * zb))
    if s == 3:
        bal = [t + zs[0] - zb, t + zs[1] - zb, (t + zs[2] - zb).clamp_min(0.0)]
    else:
        bal = [t + zs[0] - zb] + [(t + zi - zb).clamp_min(0.0) for zi in zs[1:4]]
    x = [torch.where(warm, 0.5 * (li + ui), bi) for li, ui, bi in zip(los, ups, bal)]
    if s == 3:
        x.append(torch.zeros_like(x[0]))
    w, sweeps, maxed, deferred = _alm24(zs, s, lgs, x, tol, max_iter, budget, few)
    z4v = zs[3] if s == 4 else torch.zeros_like(zs[3])
    val = _f24(*w, zs[0], zs[1], zs[2], z4v, lgs)
    if s == 3:
        val = val + 0.5 * zs[3] * zs[3]
    return idx, w, val, sweeps, maxed, deferred


#: Sweeps per candidate that :func:`prox24` runs on the tensor's device; groups still
#: unconverged after them (about 0.05% at lambda = 0.3 and 0.4% at 2 of N(0, 1) groups) are
#: finished by the core's NumPy kernel on the CPU. On a GPU every sweep is a few dozen kernel
#: launches and a synchronization, whatever the number of groups still running, so a tail
#: of a few groups needing hundreds of sweeps cost 1000x a sort (``benchmarks/prox.py
#: --device cuda``, ``docs/benchmarks.md``).
DEVICE_SWEEPS = 16
#: With the hand-off on (``device_sweeps`` < max_iter), a candidate's sweeps also stop on the
#: device once at most min(DEVICE_FEW, 1% of the groups) are still running: on a GPU a sweep
#: of a few groups costs the launches of a sweep of all (on a 384 x 384 layer at lambda 2,
#: 10 of the 11 Newton phases were of 1-6 groups).
DEVICE_FEW = 4096


def _prox24_groups(y, lam, tol, max_iter, device_sweeps=DEVICE_SWEEPS):
    """EnumALM on the rows of y (G, 4), any float dtype; arithmetic in float64.

    Returns (w (G, 4) float64, sweeps (G,) int64, maxed (G,) bool). Candidates run at most
    ``device_sweeps`` sweeps here, and stop once few groups run (:data:`DEVICE_FEW`); the
    groups of one still running then are recomputed whole by the core's kernel
    (:func:`_on_host`, the same algorithm) on the CPU, and their ``sweeps`` and ``maxed``
    are the core's.
    """
    G = y.shape[0]
    yd = y.to(torch.float64)
    a, perm = torch.sort(yd.abs(), dim=1, descending=True, stable=True)  # Lemma 3
    scale = a[:, 0]
    pos = scale > 0.0
    # work on z / z1 with lg = lam z1 (r_{2:4} is cubic): no overflow of the cubic terms,
    # scale-free tolerances (alm._solve_chunk24)
    inv = 1.0 / torch.where(pos, scale, torch.ones_like(scale))
    z = [a[:, i] * inv for i in range(4)]
    lg = lam * scale
    best = 0.5 * (z[2] * z[2] + z[3] * z[3])
    b = [torch.zeros_like(scale) for _ in range(4)]
    two_sparse = torch.ones(G, dtype=torch.bool, device=y.device)
    sweeps = torch.zeros(G, dtype=torch.int64, device=y.device)
    maxed = torch.zeros(G, dtype=torch.bool, device=y.device)
    deferred = torch.zeros(G, dtype=torch.bool, device=y.device)
    sel = pos.nonzero().squeeze(1)
    zp, lgp = [zi[sel] for zi in z], lg[sel]
    bestp = best[sel]
    for s in (3, 4):
        idx, w, val, sw, mx, df = _candidate(zp, s, lgp, bestp, tol, max_iter, device_sweeps,
                                             min(DEVICE_FEW, G // 100))
        if idx.numel() == 0:
            continue
        gidx = sel[idx]
        sweeps[gidx] += sw
        maxed[gidx] |= mx
        deferred[gidx] |= df
        # rounding ties: sparser wins; integer indices (one synchronization, as in _alm24)
        better = (val < bestp[idx] - _OBJ_SLACK * bestp[idx]).nonzero().squeeze(1)
        bidx = idx[better]
        bestp[bidx] = val[better]
        g2 = sel[bidx]
        two_sparse[g2] = False
        for i in range(4):
            b[i][g2] = w[i][better] * scale[g2]
    # the 2-sparse candidate is exactly the input entries (zero groups: all zero)
    b[0] = torch.where(two_sparse, a[:, 0], b[0])
    b[1] = torch.where(two_sparse, a[:, 1], b[1])
    bw = torch.stack(b, dim=1)
    out = torch.empty_like(bw).scatter_(1, perm, bw)
    out = torch.where(yd < 0, 0.0 - out, out)  # 0.0 - 0.0 is +0.0: no negative zeros
    idx = deferred.nonzero().squeeze(1)
    if idx.numel():  # the slow tail: the core's kernel, on the CPU
        out[idx], sweeps[idx], maxed[idx] = _on_host(yd[idx], lam, tol, max_iter)
    return out, sweeps, maxed


def _on_host(rows, lam, tol, max_iter):
    """The core's 2:4 EnumALM kernel (``sparseopt.prox.alm._run_groups``) on a host copy of
    the groups ``rows`` (G, 4); (w, sweeps, maxed) come back on the rows' device, w in
    their dtype (the kernel computes in float64 and rounds a float32 result once)."""
    w, sweeps, maxed = _run_groups(np.ascontiguousarray(rows.cpu().numpy()), lam, 2, tol,
                                   max_iter)
    dev = rows.device
    return (torch.from_numpy(w).to(dev), torch.from_numpy(sweeps).to(dev),
            torch.from_numpy(maxed).to(dev))


def _cuda_kernel(rows, lam, tol, max_iter):
    """The core's 2:4 kernel compiled for the GPU (``sparseopt.prox.cuda24``: one thread per
    group running the CPU kernel's per-group code) on the CUDA rows (G, 4); (w in their
    dtype, sweeps, maxed) on their device."""
    from numba import cuda

    from sparseopt.prox import cuda24

    rows = rows.contiguous()
    G = rows.shape[0]
    out = torch.empty_like(rows)
    sweeps = torch.empty(G, dtype=torch.int64, device=rows.device)
    maxed = torch.empty(G, dtype=torch.bool, device=rows.device)
    with cuda.gpus[rows.device.index or 0]:
        bad = cuda24.prox24_cuda(rows, lam, tol, max_iter, out, sweeps, maxed,
                                 stream=torch.cuda.current_stream(rows.device).cuda_stream)
    if bad:  # prox24 has refused NaN and Inf already: this is a kernel fault
        raise RuntimeError(f"prox24: the CUDA kernel saw {bad} non-finite groups in a finite Y")
    return out, sweeps, maxed


#: ``prox24``'s kernels: "cuda", the core's kernel compiled by numba-cuda (CUDA tensors);
#: "torch", the batched torch kernel above (any device) with its hand-off to the CPU.
KERNELS = ("auto", "cuda", "torch")


def prox24(Y, lam, *, tol=None, max_iter=None, kernel="auto", device_sweeps=DEVICE_SWEEPS,
           return_info=False):
    """Prox of ``lam * r_{2:4}`` on every group of 4 consecutive entries along the last dim.

    Parameters
    ----------
    Y : torch.Tensor, float32 or float64
        Input of any shape whose last dim is a multiple of 4, on any device. Not modified
        (gradients are not tracked through the prox).
    lam : float
        Regularization weight, finite and >= 0 (a Python number or a one-element tensor).
    tol : float, optional, keyword-only
        Relative sweep tolerance: a candidate's ALM stops when a sweep moves no coordinate
        by more than ``tol * max|y_group|``. Default as the core: 1e-12 for float64 input,
        1e-8 for float32.
    max_iter : int, optional, keyword-only
        Sweeps per candidate (default 10000); a ``RuntimeWarning`` reports groups that
        reached it.
    kernel : {"auto", "cuda", "torch"}, keyword-only
        ``"cuda"``: the core's 2:4 kernel compiled for the GPU by numba-cuda
        (``sparseopt.prox.cuda24``, one thread per group, one launch), for CUDA tensors;
        it needs the ``numba-cuda`` package. ``"torch"``: the batched torch kernel of this
        module, on any device. ``"auto"`` (default): ``"cuda"`` for a CUDA tensor when
        numba-cuda is installed, else ``"torch"``. Both compute the core's EnumALM, and
        agree with it up to rounding.
    device_sweeps : int, keyword-only
        ``kernel="torch"`` only: sweeps per candidate on Y's device (default
        :data:`DEVICE_SWEEPS` = 16). The groups
        of a candidate still running after them are recomputed by the core's NumPy kernel
        on the CPU (the same algorithm; on a GPU the sweeps of a slow tail of a few groups
        would cost as much as those of all). ``device_sweeps >= max_iter``: no hand-off;
        0: every group on the CPU (one copy of Y each way; ``benchmarks/prox.py --device``
        times both).
    return_info : bool, keyword-only
        Also return ``{"n_iter": sweeps per group, "max_iter_reached": bool per group}``
        (tensors on Y's device, shape ``Y.shape[:-1] + (Y.shape[-1] // 4,)``).

    Returns
    -------
    torch.Tensor
        Same shape, dtype and device as ``Y``.

    Raises
    ------
    ValueError
        ``Y`` not a float32/float64 tensor, NaN/Inf in ``Y``, last dim not divisible by 4,
        ``lam`` negative or not finite, ``tol <= 0``, ``max_iter < 1``,
        ``device_sweeps < 0``, ``kernel`` not one of :data:`KERNELS`, ``kernel="cuda"``
        for a tensor not on a CUDA device or without numba-cuda.

    Notes
    -----
    The algorithm of the core's 2:4 EnumALM kernel (``sparseopt.prox.alm``), batched over
    groups: Lemma 3 of prox24-kubler (sort |y| descending; signs and order restored at the
    end), then the candidates of Alg. 1 / eq. 11-14 by support size -- the 2-sparse
    candidate (z_1, z_2, 0, 0) exactly, the 3-sparse and the dense candidate by ALM
    (proxsparse-liu Alg. 2, coordinate updates by soft-thresholding, Fact 5) from the
    balanced start, with the core's exact pruning and safeguarded face-Newton steps -- and
    the candidate with the least objective 0.5 ||w - y||^2 + lam r_{2:4}(w) (eq. 7) wins,
    ties going to the sparser one. Arithmetic is float64 whatever the input dtype (as in
    the core, which rounds a float32 result once), so the device must support float64.
    Groups whose ALM needs more than ``device_sweeps`` sweeps are finished by the core's
    kernel (``sparseopt.prox.alm``) on the CPU: one copy of those few groups each way.

    Examples
    --------
    >>> import torch
    >>> prox24(torch.tensor([3.0, -0.1, 2.0, 0.2], dtype=torch.float64), 5.0)
    tensor([3., 0., 2., 0.], dtype=torch.float64)
    """
    if not isinstance(Y, torch.Tensor):
        raise ValueError(f"Y must be a torch.Tensor, got {type(Y).__name__}")
    check_float_array(Y, "Y")
    if Y.ndim == 0:
        raise ValueError("Y must have at least one dim")
    if Y.shape[-1] % 4 != 0:
        raise ValueError(f"last dim of Y has length {Y.shape[-1]}, not divisible by 4")
    lam = check_real(lam, "lam")
    if tol is None:
        tol = default_tol({torch.float32: "float32", torch.float64: "float64"}[Y.dtype])
    else:
        tol = check_real(tol, "tol", positive=True)
    max_iter = DEFAULT_MAX_ITER if max_iter is None else check_int(max_iter, "max_iter",
                                                                   minimum=1)
    device_sweeps = check_int(device_sweeps, "device_sweeps", minimum=0)
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "cuda" and Y.device.type != "cuda":
        raise ValueError(f"kernel='cuda' needs a CUDA tensor, Y is on {Y.device}")
    if kernel != "torch" and Y.device.type == "cuda":
        from sparseopt.prox import cuda24

        if cuda24.available():
            kernel = "cuda"
        elif kernel == "cuda":
            raise ValueError("kernel='cuda' needs the numba-cuda package and a CUDA driver "
                             "that numba sees (pip install numba-cuda)")
    Y = Y.detach()
    gshape = Y.shape[:-1] + (Y.shape[-1] // 4,)
    if Y.numel() == 0 or lam == 0.0:
        out = Y.clone()  # lam = 0: the prox of the zero function is the identity
        sweeps = torch.zeros(gshape, dtype=torch.int64, device=Y.device)
        maxed = torch.zeros(gshape, dtype=torch.bool, device=Y.device)
    else:
        with torch.no_grad():
            if kernel == "cuda":
                w, sweeps, maxed = _cuda_kernel(Y.reshape(-1, 4), lam, tol, max_iter)
            elif device_sweeps == 0:
                w, sweeps, maxed = _on_host(Y.reshape(-1, 4), lam, tol, max_iter)
            else:
                w, sweeps, maxed = _prox24_groups(Y.reshape(-1, 4), lam, tol, max_iter,
                                                  device_sweeps)
        out = w.to(Y.dtype).reshape(Y.shape)
        n_max = int(maxed.sum())
        if n_max:
            warnings.warn(
                f"prox24: ALM reached max_iter={max_iter} in {n_max} of {maxed.numel()} "
                f"groups; their candidates are not converged to tol={tol:g}",
                RuntimeWarning,
                stacklevel=2,
            )
        sweeps, maxed = sweeps.reshape(gshape), maxed.reshape(gshape)
    if return_info:
        return out, {"n_iter": sweeps, "max_iter_reached": maxed}
    return out


@register_kernel("prox_nm", "torch")
def prox_nm_torch(Y, lam, n=2, m=4, *, method="alm", tol=None, max_iter=None):
    """The ``"prox_nm"`` kernel for tensors: :func:`prox24` (2:4, EnumALM only)."""
    if (n, m) != (2, 4) or method != "alm":
        raise ValueError(f"the torch prox kernel computes the 2:4 prox by EnumALM only; got "
                         f"pattern {n}:{m}, prox_method={method!r} (for other patterns, run "
                         "the pruner on CPU tensors or NumPy arrays)")
    return prox24(Y, lam, tol=tol, max_iter=max_iter)


# --------------------------------------------------------------------------------------
# SparseGPT: the OBS sweep inside one block
# --------------------------------------------------------------------------------------


@register_kernel("sparsegpt_sweep", "torch")
def sparsegpt_sweep(W1, U1, n, m, keep1, Err1):
    """OBS sweep inside one block of SparseGPT, in place (the torch twin of
    ``sparseopt.layer.sparsegpt._sweep_block``).

    ``W1`` (B, d_out): columns of W as rows (a view, updated in place), ``U1`` (B, B): the
    diagonal block of the upper Cholesky factor of H^{-1}; fills ``keep1`` (B, d_out, bool)
    and ``Err1`` (B, d_out).

    At the first column of each group of m, every row keeps the n entries of largest saliency
    w_j^2 / U_jj^2 (ties to the smaller index: the rank of entry t counts entries with a
    larger score, or an equal one before t); column j then propagates err = (w_j - q_j) /
    U_jj to the later columns of its group, and the group one rank-m product to the rest of
    the block. The summation order differs from the Numba kernel (rank-m instead of rank-1
    updates), so the results agree up to rounding.
    """
    B = W1.shape[0]
    dt, dev = W1.dtype, W1.device
    zero = torch.zeros((), dtype=dt, device=dev)
    diagU = torch.diagonal(U1)
    earlier = torch.tril(torch.ones((m, m), dtype=torch.bool, device=dev), -1)[:, :, None]
    for g in range(0, B, m):
        score = W1[g:g + m] ** 2 / (diagU[g:g + m, None] ** 2)
        beats = (score[None, :, :] > score[:, None, :]) \
            | ((score[None, :, :] == score[:, None, :]) & earlier)
        kg = beats.sum(dim=1) < n
        keep1[g:g + m] = kg
        for t in range(m):
            i = g + t
            Err1[i] = torch.where(kg[t], zero, W1[i] / U1[i, i])
            W1[i] = torch.where(kg[t], W1[i], zero)
            if t < m - 1:
                W1[i + 1:g + m] -= U1[i, i + 1:g + m, None] * Err1[i][None, :]
        if g + m < B:
            W1[g + m:] -= U1[g:g + m, g + m:].T @ Err1[g:g + m]


# --------------------------------------------------------------------------------------
# linear algebra on the device (sparseopt.linalg)
# --------------------------------------------------------------------------------------


@register_kernel("inverse_hessian_factor", "torch")
def inverse_hessian_factor_torch(H, percdamp, dtype):
    """``sparseopt.linalg.inverse_hessian_factor`` with ``torch.linalg`` on H's device: with
    P the reversal, P H P = L L' gives the upper Cholesky factor U = P L^{-1} P of H^{-1}."""
    H = H.clone()
    d = H.shape[0]
    diag = torch.diagonal(H).clone()
    dead = diag == 0
    diag[dead] = 1.0
    damp = percdamp * float(diag.mean()) if d else 0.0
    H.diagonal().copy_(diag + damp)
    L, info = torch.linalg.cholesky_ex(H.flip(0, 1).to(dtype))
    if int(info) != 0:
        raise ValueError(
            f"H + {damp:.3g} I is not positive definite (Cholesky failed at pivot {int(info)}); "
            f"H is not positive semidefinite, or increase percdamp (now {percdamp})"
        )
    eye = torch.eye(d, dtype=dtype, device=H.device)
    Linv = torch.linalg.solve_triangular(L, eye, upper=False)
    return Linv.flip(0, 1).contiguous(), dead, damp


@register_kernel("cholesky_ok", "torch")
def cholesky_ok_torch(H, shift):
    """True when H + shift I (float64) has a Cholesky factor (``sparseopt.linalg.cholesky_ok``)."""
    A = H.to(torch.float64)
    eye = torch.eye(A.shape[0], dtype=torch.float64, device=A.device)
    return int(torch.linalg.cholesky_ex(A + shift * eye).info) == 0


@register_kernel("synchronize", "torch")
def synchronize_torch(x):
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
