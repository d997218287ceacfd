"""proxsparse-liu Prop. 7 (Alg. 1 converges to a critical point) and Fig. 1 / Table 4 (a too
large lambda_1 commits to a mask early), with the torch adapter's ProxSparse
(``sparseopt_torch.proxsparse.proxsparse``) on a tiny two-layer tanh network (float64, CPU).

Model and loss: ``Linear(d, h) -> tanh -> Linear(h, o)`` with N(0, 1/fan_in) weights; both
Linear layers are pruned (groups of 4 along d_in); X ~ N(0, 1)^{n x d}; targets
Y = net(X) + 0.3 teacher(X) for a second random network, so that L(W) = mean ||net(x) - y||^2
has a nonzero gradient at the pretrained weights W0.

``liu-prop7`` (Prop. 7). Alg. 1 is the proximal gradient method (eq. 5a, 5b) on
psi = f + h, f = L + lambda_2 Reg_W0, h = lambda_1 Reg_2:4. The adapter always steps with
AdamW, whose update is not eta grad f, so neither Prop. 7 nor its proof (Cohen et al.,
prox-gradient with gradient steps) applies to it as it is. The check therefore runs the
adapter's own loop (``proxsparse``: its Reg_W0, its prox backend, its schedule and
bookkeeping) with ``torch.optim.AdamW`` replaced by plain ``torch.optim.SGD`` (no momentum, no
weight decay) for the run: full batch (the exact gradient as the oracle of Alg. 1 line 3),
constant eta, no warm-up and ``prox_lr_scaled=True``, so every step is exactly
W_{k+1} = prox_{eta lambda_1 Reg_2:4}(W_k - eta grad f(W_k)) (d = 32, h = 16, o = 8, n = 256,
lambda_1 = 4, lambda_2 = 0.05, eta = 0.2, 6000 steps, 3 seeds; quick 4000 steps, 1 seed).
Measured, with an independent prox (EnumIPM, ``prox_nm(method="ipm")``, not the adapter's ALM
kernel) and autograd on a copy of the model: the norm of the prox-gradient mapping
G(W) = (W - prox_{eta h}(W - eta grad f(W))) / eta at W_k for k on a log grid (the iterates
are captured by the loss function, which the adapter calls at W_k). G(W) = 0 exactly when W
is a fixed point of the step, i.e. a critical point of psi (limiting subdifferential, the
sense of Prop. 7). PASS: ||G(W_K)|| <= 1e-6 ||G(W_0)|| on every seed, and the recorded
objective psi(W_k) (the adapter's history) never increases by more than 1e-12 |psi(W_0)|
(the descent property the proof rests on).

``liu-fig1-commit`` (Sec. 4.3.2, Fig. 1 (b)-(d)) and ``liu-table4-large`` (Table 4, the side
"too large lambda_1 is worse"). The adapter as it is (AdamW, linear decay, warm-up 0.1, prox
with lambda_1 unscaled as in Alg. 1 and the authors' code), lambda_2 = 0 (Sec. 4.3.2 isolates
the sparsity regularizer), d = 64, h = 32, o = 16, n = 512 in 8 batches of 64, lr 3e-3,
600 steps, 3 seeds, two values: a balanced lambda_1 = 0.3 (reaches 2:4 by the end) and a too
large lambda_1 = 100. Masks (top-2 |w| per group, ``mask_24``) at 21 record points
k = 0, 30, ..., 600 and the final one; mask similarity = fraction of groups whose mask is
equal. PASS, on every seed: the large value has >= 99% of groups 2:4 after 10% of the steps
and the balanced one <= 90% (Fig. 1 (b), (c)), the balanced one ends >= 95% 2:4 (it is not
under-learning); the similarity between the mask after 10% of the steps and the final mask
is higher for the large value by >= 0.02 (Fig. 1 (d); measured about 0.05); the mean
similarity between consecutive record points over the first half of the run is higher for
the large value (the mask moves less while it is being chosen; in the second half both are
about 1 and are only printed). Table 4: the pruned loss L(W0 * mask) on all the data is
higher for the large value than for the balanced one. The small-lambda_1 side of Table 4
(under-learning) is the row ``liu-table4-small`` of ``liu_lambda_tables`` (lambda_1 = 0.001
against 0.3 on this network).

What would make it fail: an adapter prox at another lambda than the one it reports (the
limit is then critical for another psi and ||G|| stays at about 1e-2 relative: tested), a
prox that does not sparsify or an optimizer that ignores the prox (no 2:4 groups after 10%),
a lambda_1 whose size has no effect on when the mask is fixed, an objective that increases.
"""

from __future__ import annotations

import contextlib

import copy
import math
from unittest import mock

import numpy as np

from ._report import claim, figure, header, savefig, verdict, wanted


@contextlib.contextmanager
def one_torch_thread(torch):
    """torch on one thread inside the block (the tiny network's runs are then the same bits on
    any machine, and cheaper than thread hand-offs), its thread count restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)

NAME = "liu_proxsparse"
LAYERS = ("0", "2")


def _make(torch, seed, d, h, o, n):
    """A tanh MLP (float64) with N(0, 1/fan_in) weights, inputs X and targets Y."""
    g = torch.Generator().manual_seed(seed)

    def net():
        m = torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.Tanh(),
                                torch.nn.Linear(h, o)).double()
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64)
                        / math.sqrt(p.shape[-1]))
        return m

    model, teacher = net(), net()
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    with torch.no_grad():
        Y = model(X) + 0.3 * teacher(X)
    return model, X, Y


def _mse(m, batch):
    return (m(batch[0]) - batch[1]).square().sum(dim=1).mean()


def _weights(m):
    return {n: m.get_submodule(n).weight.detach().clone() for n in LAYERS}


def _sgd(params, lr, betas=None, weight_decay=0.0):
    """Stands in for ``torch.optim.AdamW`` (same call): plain gradient steps."""
    import torch

    return torch.optim.SGD(params, lr=lr, momentum=0.0, weight_decay=weight_decay)


def _prop7(torch, proxsparse, reg_w0, prox_nm, seed, steps, lam1=4.0, lam2=0.05, eta=0.2,
           eps=0.1):
    model, X, Y = _make(torch, seed, 32, 16, 8, 256)
    W0 = _weights(model)
    grid = sorted({0, steps} | set(np.unique(np.logspace(0, np.log10(steps), 30).astype(int))
                                   .tolist()))
    snaps, calls = {}, [0]

    def loss_fn(m, batch):
        k = calls[0]
        calls[0] += 1
        if k in grid:
            snaps[k] = _weights(m)
        return _mse(m, batch)

    with mock.patch("torch.optim.AdamW", _sgd):
        from sparseopt_torch.proxsparse import ProxSparseSettings

        settings = ProxSparseSettings(lam1=lam1, lam2=lam2, lr=eta, steps=steps, warmup=0.0,
                                      schedule="constant", prox_lr_scaled=True, eps=eps,
                                      record_every=10, seed=seed)
        res = proxsparse(model, [(X, Y)], loss_fn, settings, keep_weights=True, progress=False)
    snaps[steps] = {n: res.weights[n].detach().clone() for n in LAYERS}

    def gmap(Ws):
        m = copy.deepcopy(model)
        for p in m.parameters():
            p.requires_grad_(False)
        ps = []
        for n in LAYERS:
            w = m.get_submodule(n).weight
            w.copy_(Ws[n])
            w.requires_grad_(True)
            ps.append(w)
        f = _mse(m, (X, Y)) + lam2 * sum(reg_w0(p, W0[n], eps) for n, p in zip(LAYERS, ps))
        grads = torch.autograd.grad(f, ps)
        tot = 0.0
        for p, g in zip(ps, grads):
            w = p.detach().numpy()
            P = prox_nm(w - eta * g.numpy(), eta * lam1, 2, 4, method="ipm")
            tot += float(np.sum(((w - P) / eta) ** 2))
        return math.sqrt(tot)

    ks = sorted(snaps)
    G = np.array([gmap(snaps[k]) for k in ks])
    obj = res.history["objective"]
    rise = float(np.max(np.diff(obj)) / abs(obj[0])) if obj.size > 1 else -np.inf
    return np.array(ks), G, rise, float(res.info["frac_24"])


def _fig1(torch, proxsparse, mask_24, seed, lam1, steps=600, lr=3e-3, records=20):
    model, X, Y = _make(torch, seed, 64, 32, 16, 512)
    batches = [(X[i:i + 64], Y[i:i + 64]) for i in range(0, 512, 64)]
    rec = sorted(set(np.linspace(0, steps, records + 1).astype(int).tolist()))
    masks, calls = {}, [0]

    def cat(ms):
        return torch.cat([ms[n].reshape(-1, 4) for n in LAYERS])

    def loss_fn(m, batch):
        k = calls[0]
        calls[0] += 1
        if k in rec:
            masks[k] = cat({n: mask_24(m.get_submodule(n).weight.detach()) for n in LAYERS})
        return _mse(m, batch)

    from sparseopt_torch.proxsparse import ProxSparseSettings

    settings = ProxSparseSettings(lam1=lam1, lam2=0.0, lr=lr, steps=steps,
                                  record_every=steps // records, seed=seed)
    res = proxsparse(model, batches, loss_fn, settings, progress=False)
    masks[steps] = cat(res.masks)  # after the last prox
    ks = sorted(masks)

    def sim(a, b):
        return float((masks[a] == masks[b]).all(dim=1).double().mean())

    early = int(round(0.1 * steps))
    cons = np.array([sim(a, b) for a, b in zip(ks[:-1], ks[1:])])
    hk = res.history["step"].astype(int)
    frac = res.history["frac_24"]  # of W_{k+1}: the entry of step early - 1 is W_early
    frac_early = float(frac[np.flatnonzero(hk + 1 >= early)[0]])
    pruned = copy.deepcopy(model)
    with torch.no_grad():
        for n in LAYERS:
            pruned.get_submodule(n).weight.mul_(res.masks[n])
        loss_pruned = float(_mse(pruned, (X, Y)))
    return {"sim_early_final": sim(early, steps), "cons": cons, "frac_early": frac_early,
            "frac_final": float(res.info["frac_24"]), "frac": frac, "steps_hist": hk,
            "loss_pruned": loss_pruned}


def run(out_dir, quick=False):
    header(NAME, "proxsparse-liu Prop. 7 (Alg. 1 reaches a critical point) and Fig. 1 / Table 4 "
                 "(too large lambda_1 commits to a mask early)")
    try:
        import torch

        from sparseopt_torch.proxsparse import mask_24, proxsparse, reg_w0
    except ImportError as exc:  # ProxSparse lives in the torch adapter
        return verdict(NAME, False, f"needs torch and the sparseopt_torch adapter: {exc}")
    from sparseopt.prox import prox_nm

    with one_torch_thread(torch):
        # ---------------------------------------------------------------- Prop. 7
        p7_ok, worst_ratio, worst_rise, curves = True, 0.0, -np.inf, []
        if wanted("liu-prop7"):
            seeds7 = [0] if quick else [0, 1, 2]
            # quick: seed 0's ratio is about 1e-7 at step 3300, 1e-14 at 6000 (linear rate)
            steps7 = 4000 if quick else 6000
            for s in seeds7:
                ks, G, rise, frac = _prop7(torch, proxsparse, reg_w0, prox_nm, s, steps7)
                ratio = G[-1] / G[0]
                curves.append((ks, G))
                worst_ratio = max(worst_ratio, ratio)
                worst_rise = max(worst_rise, rise)
                p7_ok &= bool(ratio <= 1e-6 and rise <= 1e-12)
                mid = int(np.searchsorted(ks, steps7 // 2))
                figure(f"Prop. 7 seed {s}", f"||G(W_0)|| {G[0]:.3e}, ||G(W_{ks[mid]})|| "
                       f"{G[mid]:.3e}, ||G(W_{steps7})|| {G[-1]:.3e} "
                       f"(ratio {ratio:.1e}); max objective rise {rise:.1e} rel.; final 2:4 "
                       f"fraction {frac:.3f}")
            claim("liu-prop7", f"max over seeds of ||G(W_K)|| / ||G(W_0)|| {worst_ratio:.1e} "
                               f"(needs <= 1e-6) after "
                               f"{steps7} SGD prox-gradient steps on {len(seeds7)} seed(s); "
                               f"max objective rise {worst_rise:.1e} (needs <= 1e-12)", p7_ok)

        # ------------------------------------------------------- Fig. 1 / Table 4
        lam_bal, lam_big = 0.3, 100.0
        seeds1 = [0, 1, 2]
        runs = {}
        c_ok, t_ok = True, True
        if wanted("liu-fig1-commit", "liu-table4-large"):
            for s in seeds1:
                b = _fig1(torch, proxsparse, mask_24, s, lam_bal)
                g = _fig1(torch, proxsparse, mask_24, s, lam_big)
                runs[s] = (b, g)
                half = len(b["cons"]) // 2
                cb, cg = float(b["cons"][:half].mean()), float(g["cons"][:half].mean())
                ok = (g["frac_early"] >= 0.99 and b["frac_early"] <= 0.90
                      and b["frac_final"] >= 0.95
                      and g["sim_early_final"] >= b["sim_early_final"] + 0.02 and cg > cb)
                c_ok &= bool(ok)
                t_ok &= bool(g["loss_pruned"] > b["loss_pruned"])
                for lam, r, c in ((lam_bal, b, cb), (lam_big, g, cg)):
                    figure(f"Fig. 1 seed {s} lambda_1 = {lam:g}",
                           f"2:4 at 10% {r['frac_early']:.3f}, final {r['frac_final']:.3f}; "
                           f"sim(mask at 10%, final) {r['sim_early_final']:.3f}; consecutive sim "
                           f"first half {c:.3f}, second half {float(r['cons'][half:].mean()):.3f}; "
                           f"pruned loss {r['loss_pruned']:.4f}")
            d_sim = [runs[s][1]["sim_early_final"] - runs[s][0]["sim_early_final"] for s in seeds1]
            claim("liu-fig1-commit",
                  f"lambda_1 = {lam_big:g} vs {lam_bal:g}: 2:4 at 10% of the steps "
                  f"{min(runs[s][1]['frac_early'] for s in seeds1):.3f} vs "
                  f"{max(runs[s][0]['frac_early'] for s in seeds1):.3f} (min / max over seeds); "
                  f"sim(mask at 10%, final) higher by {min(d_sim):.3f} .. {max(d_sim):.3f} "
                  f"(needs >= 0.02)",
                  c_ok)
            lb = [runs[s][0]["loss_pruned"] for s in seeds1]
            lg = [runs[s][1]["loss_pruned"] for s in seeds1]
            claim("liu-table4-large", f"pruned loss lambda_1 = {lam_big:g}: {np.mean(lg):.4f} "
                                      f"vs {lam_bal:g}: {np.mean(lb):.4f} (mean of "
                                      f"{len(seeds1)} seeds; higher on every seed: {t_ok})", t_ok)

    if wanted():  # the plot: unrestricted runs only
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
        for ks, G in curves:
            axes[0].loglog(np.maximum(ks, 1), G / G[0], ".-", ms=3)
        axes[0].axhline(1e-6, color="k", ls="--", lw=1)
        axes[0].set_xlabel("step k (k = 0 drawn at 1)")
        axes[0].set_ylabel("||G(W_k)|| / ||G(W_0)||")
        axes[0].set_title("Prop. 7: prox-gradient mapping (SGD, full batch)", fontsize=9)
        for s in seeds1:
            for r, col, lam in ((runs[s][0], "C0", lam_bal), (runs[s][1], "C3", lam_big)):
                axes[1].plot(r["steps_hist"] + 1, r["frac"], color=col, lw=1,
                             label=f"lambda_1 = {lam:g}" if s == seeds1[0] else None)
                axes[2].plot(np.arange(1, r["cons"].size + 1), r["cons"], ".-", color=col, ms=3,
                             label=f"lambda_1 = {lam:g}" if s == seeds1[0] else None)
        axes[1].set_xlabel("step")
        axes[1].set_ylabel("fraction of 2:4 groups")
        axes[1].set_title("Fig. 1 (b): 2:4 ratio over steps (AdamW)", fontsize=9)
        axes[1].legend(fontsize=8)
        axes[2].set_xlabel("record interval (30 steps each)")
        axes[2].set_ylabel("mask similarity, consecutive records")
        axes[2].set_title("Fig. 1 (d): mask similarity between record points", fontsize=9)
        axes[2].legend(fontsize=8)
        savefig(fig, out_dir, "liu_proxsparse.png")

    ok = p7_ok and c_ok and t_ok
    return verdict(NAME, ok, f"Prop. 7: ||G|| ratio {worst_ratio:.1e} (needs <= 1e-6); Fig. 1: "
                             f"commit {'holds' if c_ok else 'fails'}; Table 4 (large lambda_1 "
                             f"worse) {'holds' if t_ok else 'fails'}")

