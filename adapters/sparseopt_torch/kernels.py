"""torch versions of the core's hot loops: batched, device-agnostic, dtype-preserving.

Every function here runs on the device of its input tensors (CUDA when the model lives there,
CPU otherwise; nothing is moved with ``.cuda()``) and returns tensors of the input dtype. Each
mirrors one NumPy/Numba function of the core and is tested against it on CPU
(tests/adapter/test_kernels.py):

* ``prox24``: the exact 2:4 prox of ``lam * r_{2:4}`` over all groups of 4 along the last
  dim (EnumALM; core: ``sparseopt.prox.prox_nm(y, lam, 2, 4, method="alm")``).
* ``prox_prune_torch``: prox24-kubler Alg. 2 for NM(2, 4) (core:
  ``sparseopt.layer.prox.prox_prune``).
* ``masked_gd_torch``: masked gradient descent, eq. 5 (core: ``sparseopt.layer.masked_gd``).
* ``sparsegpt_torch``: the SparseGPT column sweep (core:
  ``sparseopt.layer.sparsegpt.sparsegpt_prune``).

The EnumALM kernel of the core (``sparseopt.prox.alm._solve_chunk24``) works on one group at
a time on local scalars. Here the same arithmetic runs on 1-d tensors holding one coordinate
of every group: a sweep of ALM is a fixed sequence of elementwise operations over all groups
whose candidate has not converged yet (a convergence mask; converged groups are dropped from
the working set), so there is no Python loop over groups. The per-group sweep counts equal the
core's (tested), hence so does the result, up to rounding.

Cost (benchmarks/adapter_kernels.py, CPU, 1 thread, loaded 2-core machine): the torch prox
is 7-10x slower than the Numba kernel on 4M cells and 2.3-18x slower per prox-gradient
iteration (1536x384, 4096x4096); with 2 OpenMP threads on the loaded machine 25-470x slower.
Two reasons: every ALM sweep is ~30 elementwise tensor ops plus a face-Newton attempt
(~150 ops) instead of one fused loop, and a call runs as many Python-level sweeps as its
slowest group needs (up to ~800 at large lambda), a fixed overhead per call. SparseGPT and
masked GD are BLAS-bound and about on par (0.8-2.4x). So on CPU the core is the better
choice at every size; these kernels are for the model's device when it is a GPU.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings

import numpy as np
import torch

from sparseopt.prox.alm import (
    _BRACKET,
    _MAX_NEWTON,
    _NEWTON_START24,
    _OBJ_SLACK,
    _WARM,
    DEFAULT_MAX_ITER,
    default_tol,
)

__all__ = ["prox24", "prox_prune_torch", "masked_gd_torch", "sparsegpt_torch", "gamma_max_torch"]

_FLOATS = (torch.float32, torch.float64)


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------


def _check_tensor(x, name, *, ndim=None):
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOATS:
        raise ValueError(f"{name} must have dtype float32 or float64, got {x.dtype}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-d, got shape {tuple(x.shape)}")
    if x.numel() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or Inf")
    return x


def _check_real(value, name, *, positive=False, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        rule = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be finite and {rule}, got {value!r}")
    return value


def _check_int(value, name, *, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


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
    m4 = npos == 4
    if bool(m4.any()):
        idx = m4.nonzero().squeeze(1)
        res = _newton4(*[wi[idx] for wi in w], *[zi[idx] for zi in z], lg[idx])
        for i in range(4):
            b[i][idx] = res[i]
        step[idx] = res[4]
    m3 = npos == 3
    if bool(m3.any()):
        for k in range(4):  # the face with w_k = 0
            mk = m3 & ~pos[k]
            if not bool(mk.any()):
                continue
            idx = mk.nonzero().squeeze(1)
            keep = [i for i in range(4) if i != k]
            res = _newton3(*[w[i][idx] for i in keep], *[z[i][idx] for i in keep], lg[idx])
            for j, i in enumerate(keep):
                b[i][idx] = res[j]
            step[idx] = res[3]
    m2 = npos <= 2
    if bool(m2.any()):
        idx = m2.nonzero().squeeze(1)
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


def _alm24(z, s, lg, x, tol, max_iter):
    """ALM (proxsparse-liu Alg. 2) with face-Newton steps for the candidate of support size s,
    batched over groups (``alm._alm24``).

    ``z``: four 1-d tensors (normalized, z1 = 1); for s = 3 the fourth coordinate is fixed at
    0 and z4 is not used. ``x``: the start (four tensors). Returns (w, sweeps, maxed): the
    candidate, the sweeps each group used, and whether it hit max_iter.

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
    for it in range(1, max_iter + 1):
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
        if bool(done.any()):
            idx = act[done]
            for i in range(4):
                w_out[i][idx] = w[i][done]
            sweeps[idx] = it
            maxed[idx] = False
            keep = ~done
            act = act[keep]
            w = [wi[keep] for wi in w]
            za = [zi[keep] for zi in za]
            lga = lga[keep]
            delta = delta[keep]
            if act.numel() == 0:
                break
        near = delta <= _NEWTON_START24  # z1 = 1
        if bool(near.any()):
            _newton_phase(w, za, lga, near, newton_stop)
    if act.numel():
        for i in range(4):
            w_out[i][act] = w[i]
    return w_out, sweeps, maxed


def _newton_phase(w, z, lg, near, newton_stop):
    """Up to _MAX_NEWTON safeguarded face-Newton steps on the groups in ``near`` (in place on
    the columns ``w``): a step is taken only if the objective does not increase by more than
    rounding; a group stops at the first refusal or once its step is below ``newton_stop``
    (quadratic convergence: the confirming sweep can follow)."""
    idx = near.nonzero().squeeze(1)
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
        go = ok & ~(st * st <= newton_stop)
        if not bool(go.any()):
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


def _candidate(z, s, lg, best, tol, max_iter):
    """Pruning, start and ALM for the candidate of support size s on all groups.

    Returns (idx, w, val, sweeps, maxed) for the groups whose candidate was computed (the
    others are excluded by the exact necessary conditions of ``alm._solve_chunk24``).
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
        return idx, None, None, None, None
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
    w, sweeps, maxed = _alm24(zs, s, lgs, x, tol, max_iter)
    z4v = zs[3] if s == 4 else torch.zeros_like(zs[3])
    val = _f24(*w, zs[0], zs[1], zs[2], z4v, lgs)
    if s == 3:
        val = val + 0.5 * zs[3] * zs[3]
    return idx, w, val, sweeps, maxed


def _prox24_groups(y, lam, tol, max_iter):
    """EnumALM on the rows of y (G, 4), any float dtype; arithmetic in float64.

    Returns (w (G, 4) float64, sweeps (G,) int64, maxed (G,) bool).
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
    sel = pos.nonzero().squeeze(1)
    zp, lgp = [zi[sel] for zi in z], lg[sel]
    bestp = best[sel]
    for s in (3, 4):
        idx, w, val, sw, mx = _candidate(zp, s, lgp, bestp, tol, max_iter)
        if idx.numel() == 0:
            continue
        gidx = sel[idx]
        sweeps[gidx] += sw
        maxed[gidx] |= mx
        better = val < bestp[idx] - _OBJ_SLACK * bestp[idx]  # rounding ties: sparser wins
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
    return out, sweeps, maxed


def prox24(Y, lam, *, tol=None, max_iter=None, return_info=False):
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
        ``lam`` negative or not finite, ``tol <= 0``, ``max_iter < 1``.

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

    Examples
    --------
    >>> import torch
    >>> prox24(torch.tensor([3.0, -0.1, 2.0, 0.2], dtype=torch.float64), 5.0)
    tensor([3., 0., 2., 0.], dtype=torch.float64)
    """
    _check_tensor(Y, "Y")
    if Y.ndim == 0:
        raise ValueError("Y must have at least one dim")
    if Y.shape[-1] % 4 != 0:
        raise ValueError(f"last dim of Y has length {Y.shape[-1]}, not divisible by 4")
    lam = _check_real(lam, "lam")
    if tol is None:
        tol = default_tol({torch.float32: "float32", torch.float64: "float64"}[Y.dtype])
    else:
        tol = _check_real(tol, "tol", positive=True)
    max_iter = DEFAULT_MAX_ITER if max_iter is None else _check_int(max_iter, "max_iter",
                                                                    minimum=1)
    Y = Y.detach()
    gshape = Y.shape[:-1] + (Y.shape[-1] // 4,)
    if Y.numel() == 0 or lam == 0.0:
        out = Y.clone()  # lam = 0: the prox of the zero function is the identity
        sweeps = torch.zeros(gshape, dtype=torch.int64, device=Y.device)
        maxed = torch.zeros(gshape, dtype=torch.bool, device=Y.device)
    else:
        with torch.no_grad():
            w, sweeps, maxed = _prox24_groups(Y.reshape(-1, 4), lam, tol, max_iter)
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


# --------------------------------------------------------------------------------------
# layer pruning: shared checks and helpers
# --------------------------------------------------------------------------------------


def _check_weight(W, name, *, m=None):
    _check_tensor(W, name, ndim=2)
    if m is not None and W.shape[1] % m != 0:
        raise ValueError(f"pattern 2:4 needs d_in divisible by m={m}, but {name} has "
                         f"d_in = {W.shape[1]}")
    return W.detach()


def _check_hessian(H, W, *, psd, name="H"):
    """Validate H against W (as ``sparseopt.layer.loss.check_hessian`` / ``check_psd``) and
    return its symmetric part (H + H') / 2 in float64 on W's device."""
    if not isinstance(H, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(H).__name__}")
    d_in = W.shape[1]
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"{name} must be a square 2-D tensor, got shape {tuple(H.shape)}")
    if H.shape[0] != d_in:
        raise ValueError(f"{name} has shape {tuple(H.shape)}, expected ({d_in}, {d_in}) to "
                         "match W")
    if not H.dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {H.dtype}")
    if H.device != W.device:
        raise ValueError(f"{name} is on {H.device} but W is on {W.device}; put them on one "
                         "device")
    if H.numel() and not bool(torch.isfinite(H).all()):
        raise ValueError(f"{name} contains NaN or Inf")
    H = H.detach().to(torch.float64)
    Hs = 0.5 * (H + H.T)
    if psd and d_in:
        diag = torch.diagonal(Hs)
        if bool((diag < 0).any()):
            j = int(torch.argmin(diag))
            raise ValueError(f"{name} is not positive semidefinite: diagonal entry "
                             f"{name}[{j},{j}] = {float(diag[j]):.3g} < 0")
        # the tolerance of sparseopt.layer.loss.psd_shift: rounding of a Cholesky ~ d eps ||H||
        scale = max(float(diag.abs().max()), np.finfo(np.float64).tiny)
        s = max(10.0 * d_in * np.finfo(np.float64).eps, 1e-10) * scale
        eye = torch.eye(d_in, dtype=torch.float64, device=Hs.device)
        if int(torch.linalg.cholesky_ex(Hs + s * eye).info) != 0:
            raise ValueError(f"{name} is not positive semidefinite (Cholesky of {name} + "
                             f"{s:.1e} I failed); a layer Hessian is X X' / n")
    return Hs


def gamma_max_torch(H):
    """Largest eigenvalue of the symmetric PSD ``H`` by ``torch.linalg.eigvalsh`` in float64
    (``sparseopt.layer.loss.gamma_max``); a Python float."""
    if H.shape[0] == 0:
        return 0.0
    return float(torch.linalg.eigvalsh(H.to(torch.float64))[-1])


def _mask24(x):
    """2:4 mask of the two largest |x| per group along the last dim, ties to the smaller
    index (``NM(2, 4).mask``: stable sort)."""
    a = x.abs().reshape(-1, 4)
    order = torch.sort(a, dim=1, descending=True, stable=True).indices[:, :2]
    mask = torch.zeros(a.shape, dtype=torch.bool, device=x.device)
    mask.scatter_(1, order, True)
    return mask.reshape(x.shape)


def _nm_fraction24(W):
    """Fraction of groups of 4 with at most 2 nonzeros (a float)."""
    count = (W != 0).reshape(W.shape[0], -1, 4).sum(dim=-1)
    return float((count <= 2).to(torch.float64).mean())


def _frob_inner(A, B):
    """sum(A * B) accumulated in float64 (as the core's einsum with dtype=float64)."""
    return float((A.to(torch.float64) * B.to(torch.float64)).sum())


# --------------------------------------------------------------------------------------
# prox24-kubler Alg. 2
# --------------------------------------------------------------------------------------


def prox_prune_torch(W, H, *, lam0=None, beta=1.01, lam_tilde=None, rescale=True,
                     max_iter=3000, prox_tol=None, verbose=None):
    """2:4 matrix prox pruner in torch: gradient steps on L alternated with the 2:4 prox, with
    a growing lambda, until W is 2:4 sparse (prox24-kubler Alg. 2).

    Same semantics, defaults, history keys and info keys as
    ``sparseopt.layer.prox.prox_prune(W, H, NM(2, 4), ...)``; runs on W's device.

    Parameters
    ----------
    W : torch.Tensor, shape (d_out, d_in), float32 or float64
        Dense weights W*, d_in divisible by 4. Not modified.
    H : torch.Tensor, shape (d_in, d_in)
        Symmetric PSD layer Hessian on W's device (any float dtype; symmetrized and used in
        float64, checked PSD by a Cholesky factorization as the core's ``check_psd``).
    lam0 : float, optional, keyword-only
        lambda_0 of the schedule lambda_k = lambda_0 beta^k; default 0.01 (Sec. 4).
    beta : float, default 1.01, keyword-only
        Growth factor, ``> 1``.
    lam_tilde : float, optional, keyword-only
        Scale-free form (eq. 15): lambda_0 = lam_tilde / mean|W*| of the weights the prox
        sees. Give either ``lam0`` or ``lam_tilde``, not both.
    rescale : bool, default True, keyword-only
        Wanda-style rescaling of Sec. 4 (W* -> W* diag(H)^{1/2}, H -> D^{-1/2} H D^{-1/2}),
        undone at the end.
    max_iter : int, default 3000, keyword-only
        Iteration cap; if W is not 2:4 after it, W is projected onto the pattern and
        ``info["projected"]`` is True.
    prox_tol : float, optional, keyword-only
        ``tol`` of :func:`prox24` (its default when None).
    verbose : bool, optional, keyword-only
        tqdm progress bar; default on for layers with at least 2^20 weights.

    Returns
    -------
    W_pruned : torch.Tensor
        dtype and device of W, 2:4 sparse.
    mask : torch.Tensor of bool
        Two entries per group: the support of W_pruned, filled up with zero entries (ties
        to the smaller index).
    history : dict of float64 ndarrays
        ``lam``, ``loss``, ``nm_fraction``, ``time``, one row per iteration (as the core).
    info : dict
        ``nit``, ``stop_reason``, ``projected``, ``lam0``, ``beta``, ``lam_final``, ``eta``,
        ``rescale``, ``prox_method`` (as the core).

    Notes
    -----
    One iteration (Alg. 2) with eta = 1 / (2 gamma_max(H)) (the inverse Lipschitz constant
    of the gradient 2 (W H - W* H), eq. 4, 18)::

        W <- W - eta 2 (W H - W* H)
        W <- prox24(W, lambda_k)              (eq. 7, Alg. 1)

    with the core's lambda convention (the schedule value is handed to the prox as is, i.e.
    it already contains the step size). Matrix products run in the dtype of W, the loss is
    accumulated in float64, gamma_max by ``torch.linalg.eigvalsh`` in float64 (the core uses
    LAPACK / Lanczos: the same value up to rounding). With ``lam_tilde``, mean|W*| is
    accumulated in float64 here (NumPy's float32 mean may differ in the last bits).
    """
    W = _check_weight(W, "W", m=4)
    Hs = _check_hessian(H, W, psd=True)
    if lam0 is not None and lam_tilde is not None:
        raise ValueError("give either lam0 or lam_tilde (eq. 15), not both")
    lam0 = _check_real(lam0, "lam0", positive=True, allow_none=True)
    lam_tilde = _check_real(lam_tilde, "lam_tilde", positive=True, allow_none=True)
    beta = _check_real(beta, "beta")
    if not beta > 1:
        raise ValueError(f"beta must be a finite number > 1, got {beta!r}")
    max_iter = _check_int(max_iter, "max_iter", minimum=0)
    dt, dev = W.dtype, W.device
    d_out, d_in = W.shape
    if rescale:
        diag = torch.diagonal(Hs)
        s = torch.sqrt(torch.where(diag > 0, diag, torch.ones_like(diag)))
        Wt_star = W * s[None, :].to(dt)
        Ht = Hs / torch.outer(s, s)
    else:
        s = torch.ones(d_in, dtype=torch.float64, device=dev)
        Wt_star, Ht = W.clone(), Hs
    if lam_tilde is not None:
        mean_abs = float(Wt_star.abs().to(torch.float64).mean()) if Wt_star.numel() else 0.0
        if mean_abs == 0:
            raise ValueError("lam_tilde needs mean|W*| > 0 (eq. 15); W* is all zeros")
        lam0 = lam_tilde / mean_abs
    elif lam0 is None:
        lam0 = 0.01
    g = gamma_max_torch(Ht)
    eta = 1.0 / (2.0 * g) if g > 0 else 0.0  # H = 0: L is constant, only the prox acts
    Hd = Ht.to(dt)
    GS = Wt_star @ Hd  # W* H, fixed
    two_eta = 2.0 * eta

    hist = {"lam": [], "loss": [], "nm_fraction": [], "time": []}
    t0 = time.perf_counter()
    Wk = Wt_star.clone()
    lam = float(lam0)
    k = 0
    bar = None
    if verbose is None:
        verbose = W.numel() >= 2**20
    if verbose:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_iter, desc="prox (torch)", unit="it")
    done = _nm_fraction24(Wk) == 1.0 if W.numel() else True
    while not done and k < max_iter:
        R = Wk @ Hd
        R -= GS  # (W - W*) H
        if k > 0:  # loss of the previous iterate, free from the gradient product
            hist["loss"].append(_frob_inner(R, Wk - Wt_star))
        R *= -two_eta
        R += Wk  # gradient step (eq. 4)
        Wk = prox24(R, lam, tol=prox_tol)
        hist["lam"].append(lam)
        frac = _nm_fraction24(Wk)
        hist["nm_fraction"].append(frac)
        hist["time"].append(time.perf_counter() - t0)
        k += 1
        lam *= beta
        done = frac == 1.0
        if bar is not None:
            bar.update(1)
            if hist["loss"]:
                bar.set_postfix(lam=f"{hist['lam'][-1]:.3g}", loss=f"{hist['loss'][-1]:.4g}",
                                nm=f"{frac:.3f}")
    if k > 0:
        D = (Wk - Wt_star).to(torch.float64)
        hist["loss"].append(float(((D @ Ht) * D).sum()))
    if bar is not None:
        bar.close()
    projected = not done
    if projected:
        Wk = torch.where(_mask24(Wk), Wk, torch.zeros((), dtype=dt, device=dev))
    stop = "W is N:M" if done else "max_iter (projected onto the pattern)"
    W_out = (Wk / s[None, :].to(dt)).to(dt)
    mask = _mask24(W_out)
    W_out = torch.where(mask, W_out, torch.zeros((), dtype=dt, device=dev))
    info = {
        "nit": k, "stop_reason": stop, "projected": projected, "lam0": float(lam0),
        "beta": float(beta), "lam_final": hist["lam"][-1] if k else float(lam0),
        "eta": eta, "rescale": bool(rescale), "prox_method": "alm",
    }
    history = {key: np.asarray(v, dtype=np.float64) for key, v in hist.items()}
    return W_out, mask, history, info


# --------------------------------------------------------------------------------------
# masked gradient descent (eq. 5)
# --------------------------------------------------------------------------------------


def masked_gd_torch(W, W_star, H, mask, steps, step=None):
    """Masked gradient descent on the local loss (prox24-kubler eq. 5) in torch.

    Same semantics as ``sparseopt.layer.masked_gd``; runs on W's device.

    Parameters
    ----------
    W : torch.Tensor, shape (d_out, d_in), float32 or float64
        Starting weights; entries outside ``mask`` are zeroed first. Not modified.
    W_star : torch.Tensor, shape (d_out, d_in)
        Dense reference weights.
    H : torch.Tensor, shape (d_in, d_in)
        Layer Hessian (symmetrized, checked PSD).
    mask : torch.Tensor of bool, shape (d_out, d_in)
        Frozen support M.
    steps : int
        Number of updates, ``>= 0``.
    step : float, optional
        Step size eta; default 1 / (2 gamma_max(H)), which makes L decrease monotonically.

    Returns
    -------
    torch.Tensor
        Updated weights, dtype and device of ``W``, zero outside ``mask``.

    Notes
    -----
    W_M <- W_M - eta 2 M o (W_M H - W* H) (eq. 5, gradient eq. 18), in the dtype of W.
    If H = 0 (and no step is given) the loss is constant and W is returned masked.
    """
    W = _check_weight(W, "W")
    if not isinstance(W_star, torch.Tensor):
        raise ValueError(f"W_star must be a torch.Tensor, got {type(W_star).__name__}")
    if W_star.shape != W.shape:
        raise ValueError(f"W_star has shape {tuple(W_star.shape)}, expected "
                         f"{tuple(W.shape)} (shape of W)")
    _check_tensor(W_star, "W_star")
    Hs = _check_hessian(H, W, psd=True)
    if not isinstance(mask, torch.Tensor) or mask.shape != W.shape:
        got = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"mask must be a tensor of shape {tuple(W.shape)}, got {got}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a boolean tensor, got dtype {mask.dtype}")
    steps = _check_int(steps, "steps", minimum=0)
    dt = W.dtype
    zero = torch.zeros((), dtype=dt, device=W.device)
    if step is None:
        g = gamma_max_torch(Hs)
        if g <= 0:
            return torch.where(mask, W, zero)
        step = 1.0 / (2.0 * g)
    else:
        step = _check_real(step, "step", positive=True)
    Hd = Hs.to(dt)
    maskd = mask.to(dt)
    Wk = W * maskd
    Ws = W_star.detach().to(dt)
    GS = Ws @ Hd  # W* H, fixed (eq. 18)
    two_eta = 2.0 * step
    for _ in range(steps):
        R = Wk @ Hd - GS  # (W - W*) H
        Wk = Wk - two_eta * (maskd * R)
    return Wk


# --------------------------------------------------------------------------------------
# SparseGPT
# --------------------------------------------------------------------------------------


def _inverse_hessian_factor(Hs, percdamp, dtype):
    """Upper Cholesky factor U of (H_damped)^{-1} and the dead inputs, in ``dtype``
    (``sparseopt.layer.sparsegpt.inverse_hessian_factor``: with P the reversal, P H P = L L'
    gives U = P L^{-1} P)."""
    H = Hs.clone()
    d = H.shape[0]
    diag = torch.diagonal(H).clone()
    dead = diag == 0
    diag[dead] = 1.0
    damp = percdamp * float(diag.mean()) if d else 0.0
    H.diagonal().copy_(diag + damp)
    Hr = H.flip(0, 1).to(dtype)
    L, info = torch.linalg.cholesky_ex(Hr)
    if int(info) != 0:
        raise ValueError(
            f"H + {damp:.3g} I is not positive definite (Cholesky failed at pivot {int(info)}); "
            f"H is not positive semidefinite, or increase percdamp (now {percdamp})"
        )
    eye = torch.eye(d, dtype=dtype, device=H.device)
    Linv = torch.linalg.solve_triangular(L, eye, upper=False)
    return Linv.flip(0, 1).contiguous(), dead, damp


def sparsegpt_torch(W, H, *, n=2, m=4, percdamp=0.01, blocksize=128):
    """SparseGPT (Frantar & Alistarh 2023) for N:M in torch: the OBS column sweep with lazy
    block updates, as ``sparseopt.layer.sparsegpt.sparsegpt_prune``.

    Parameters
    ----------
    W : torch.Tensor, shape (d_out, d_in), float32 or float64
        Dense weights, d_in divisible by m. Not modified.
    H : torch.Tensor, shape (d_in, d_in)
        Symmetric Hessian (any float dtype, symmetrized in float64); only H + damping needs
        to be positive definite.
    n, m : int, keyword-only
        N:M pattern along the rows, ``1 <= n < m``.
    percdamp : float, default 0.01, keyword-only
        Damping as a fraction of mean(diag(H)) (dead inputs counted as 1).
    blocksize : int, default 128, keyword-only
        Columns per lazy batch update, a positive multiple of m.

    Returns
    -------
    W_pruned : torch.Tensor
        dtype and device of W.
    mask : torch.Tensor of bool
        n entries kept per group of m.

    Notes
    -----
    Dead inputs (H_jj = 0) get H_jj = 1 and W[:, j] = 0; H is damped by
    percdamp * mean(diag H); U is the upper Cholesky factor of H^{-1}. At the first column
    of each group of m, every row keeps the n entries of largest saliency w_j^2 / U_jj^2
    (ties to the smaller index); column j then propagates err = (w_j - q_j) / U_jj to the
    later columns by W[:, k] -= err U_jk (eagerly inside the group, one rank-m product for
    the rest of the block, one GEMM per block for the later blocks). Runs in the dtype of W
    (factorization included), like the core. The summation order inside a block differs
    from the core's Numba kernel (rank-m instead of rank-1 updates), so results agree up
    to rounding.
    """
    W = _check_weight(W, "W")
    n = _check_int(n, "n", minimum=1)
    m = _check_int(m, "m", minimum=2)
    if n >= m:
        raise ValueError(f"n must satisfy 1 <= n < m={m}, got n={n}")
    if W.shape[1] % m != 0:
        raise ValueError(f"pattern {n}:{m} needs d_in divisible by m={m}, but W has "
                         f"d_in = {W.shape[1]}")
    Hs = _check_hessian(H, W, psd=False)
    percdamp = _check_real(percdamp, "percdamp")
    if isinstance(blocksize, bool) or not isinstance(blocksize, numbers.Integral) \
            or blocksize <= 0 or blocksize % m:
        raise ValueError(f"blocksize must be a positive multiple of m={m}, got {blocksize!r}")
    dt, dev = W.dtype, W.device
    d_out, d_in = W.shape
    U, dead, _ = _inverse_hessian_factor(Hs, percdamp, dt)
    Wt = W.T.to(dt).clone().contiguous()  # row j = column j of W
    Wt[dead, :] = 0
    keep = torch.zeros((d_in, d_out), dtype=torch.bool, device=dev)
    earlier = torch.tril(torch.ones((m, m), dtype=torch.bool, device=dev), -1)[:, :, None]
    for i1 in range(0, d_in, blocksize):
        i2 = min(i1 + blocksize, d_in)
        U1 = U[i1:i2, i1:i2]
        W1 = Wt[i1:i2]  # a view: updated in place
        Err1 = torch.zeros((i2 - i1, d_out), dtype=dt, device=dev)
        diagU = torch.diagonal(U1)
        B = i2 - i1
        for g in range(0, B, m):
            score = W1[g:g + m] ** 2 / (diagU[g:g + m, None] ** 2)
            # rank of entry t: entries with a larger score, or an equal one before t
            beats = (score[None, :, :] > score[:, None, :]) \
                | ((score[None, :, :] == score[:, None, :]) & earlier)
            kg = beats.sum(dim=1) < n
            keep[i1 + g:i1 + g + m] = kg
            for t in range(m):
                i = g + t
                Err1[i] = torch.where(kg[t], torch.zeros((), dtype=dt, device=dev),
                                      W1[i] / U1[i, i])
                W1[i] = torch.where(kg[t], W1[i], torch.zeros((), dtype=dt, device=dev))
                if t < m - 1:
                    W1[i + 1:g + m] -= U1[i, i + 1:g + m, None] * Err1[i][None, :]
            if g + m < B:
                W1[g + m:] -= U1[g:g + m, g + m:].T @ Err1[g:g + m]
        if i2 < d_in:
            Wt[i2:] -= U[i1:i2, i2:].T @ Err1  # lazy batch update
    mask = keep.T.contiguous()
    W_out = torch.where(mask, Wt.T, torch.zeros((), dtype=dt, device=dev))
    return W_out, mask
