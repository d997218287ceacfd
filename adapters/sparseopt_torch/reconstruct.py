"""Block reconstruction ("+BR"): fit the kept weights of a pruned block to the dense block.

After the layers of a block have their masks M_l (from any method, after the optional layer
+GD of prox24-kubler eq. 5), the kept weights of all its pruned linear layers are fitted
jointly, masks fixed::

    min over {W_l : W_l = W_l o M_l}   E(W) = (1/n) sum_t || f_pruned(x_t; W) - f_dense(x_t) ||^2

where x_t are the n calibration tokens of the block's cached inputs (padding excluded, as
for the Hessians) and f_dense(x_t) the dense block's outputs on the same inputs. Layer +GD
fits each layer to its own dense output; here the errors a layer leaves can be absorbed by
the other layers of the block (the idea of EBFT, BESA and the regional gradients of Wanda++).

The optimizer is Adam on one cached calibration batch per step (a seeded permutation of the
batches per epoch: a rerun is bit-identical). Every step masks the gradients (so Adam's moments
of pruned weights stay zero) and then the weights, and checks that no pruned weight is
non-zero (RuntimeError otherwise): the layers stay exactly on their masks, so an N:M pattern
holds after every step. E is evaluated on all batches before the first and after the last
step; the better of the two weights is kept, so a block's error never ends above its start.

Only the weights of the pruned layers train: biases, norms and other parameters stay the
dense ones (the papers' masks change only the pruned weights, and fewer free parameters keep
the fit from drifting away from the dense block on data outside the calibration set).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .layers import evaluating, training_only

__all__ = ["reconstruct_block", "BlockRecord", "BLOCK_STEPS", "BLOCK_LR"]

#: Steps of ``sparseopt prune --block-steps`` without a number: on SmolLM2-135M (sparsegpt
#: masks, 16 x 256 calibration tokens) 50 steps took a block's error down by 40-55% at
#: ``BLOCK_LR`` and it was still falling; each step costs a forward and backward pass of one
#: block on one batch, so more steps are a matter of the time one has (docs/adapter.md "+BR").
BLOCK_STEPS = 50

#: Adam's default learning rate: on SmolLM2-135M (blocks 0 and 10, 50 steps) 1e-4, 3e-4,
#: 1e-3 and 3e-3 left 76/89%, 64/79%, 45/61% and 37/48% of the starting error; held-out
#: perplexity measured at 1e-3 only (docs/adapter.md "+BR").
BLOCK_LR = 1e-3


@dataclass
class BlockRecord:
    """What block reconstruction did to one block.

    ``error_start`` / ``error_end`` are E (module docstring) before the first step and for
    the kept weights, ``dense_norm`` the mean squared norm of the dense outputs (so
    ``error / dense_norm`` is a relative error), ``curve`` the minibatch loss of every step,
    ``kept`` ``"end"`` (the weights after the last step) or ``"start"`` (they were worse:
    the starting weights were restored), ``time`` seconds of the steps and evaluations."""

    name: str
    layers: list
    steps: int
    lr: float
    n_tokens: int
    dense_norm: float
    error_start: float
    error_end: float
    kept: str
    time: float
    curve: list = field(default_factory=list)


def _mask_(tensors, masks):
    """Zero every entry of ``tensors`` outside its boolean mask, in place."""
    for t, m in zip(tensors, masks):
        t.masked_fill_(~m, 0)


def _check_masks(names, weights, masks, step, what="block reconstruction"):
    """RuntimeError naming the first layer with a non-zero weight outside its mask (``what``:
    the training that took the step, e.g. "finetune")."""
    for name, W, m in zip(names, weights, masks):
        if bool(W.detach()[~m].any()):
            raise RuntimeError(f"{what}: step {step} made a pruned weight of "
                               f"layer {name!r} non-zero (its mask would change)")


def _kept_rows(out, padding):
    """``out`` as rows (tokens, d); the padding rows dropped where ``padding`` (the batch's
    (B, T) attention mask) matches ``out``'s leading shape, as the Hessians drop them."""
    rows = out.reshape(-1, out.shape[-1])
    if padding is not None and tuple(padding.shape) == tuple(out.shape[:-1]):
        rows = rows[padding.reshape(-1).to(out.device) != 0]
    return rows


def _squared_error(out, target, padding):
    """(sum over kept tokens of ||out - target||^2, number of kept tokens)."""
    diff = _kept_rows(out, padding) - _kept_rows(target.to(out.device), padding)
    return (diff * diff).sum(), diff.shape[0]


def _error(run, targets, padding):
    """(E over every batch, mean ||target||^2), both in float64."""
    total, norm, tokens = 0.0, 0.0, 0
    with torch.no_grad():
        for b in range(len(targets)):
            out = run(b)
            sq, n = _squared_error(out, targets[b], padding[b])
            t = _kept_rows(targets[b], padding[b])
            total += float(sq.double())
            norm += float((t.double() * t.double()).sum())
            tokens += n
    if tokens == 0:
        raise ValueError("block reconstruction: no calibration token (every attention_mask "
                         "entry is 0)")
    return total / tokens, norm / tokens, tokens


def reconstruct_block(block, run, targets, weights, *, steps, lr, seed, padding=None,
                      name="", progress=False) -> BlockRecord:
    """Fit the kept entries of ``weights`` so that ``block`` reproduces ``targets``.

    Parameters
    ----------
    block : torch.nn.Module
        The pruned block; its ``weights`` are changed in place, nothing else.
    run : callable
        ``run(b)``: the block's output on cached calibration batch ``b`` (a tensor of shape
        (..., d), differentiable in the weights).
    targets : sequence of tensors
        The dense block's output on batch ``b``, same shape as ``run(b)``.
    weights : dict
        ``{layer name: weight parameter}`` of the pruned layers; their support (``W != 0``)
        is the mask, kept fixed (a kept weight that is exactly zero stays zero: the support
        is a subset of the method's mask, so the N:M pattern still holds).
    steps : int
        Adam steps, one calibration batch each.
    lr : float
        Adam's learning rate.
    seed : int
        Seed of the order of the batches (torch.Generator).
    padding : sequence, optional
        Per batch, its (B, T) attention mask or None: padding tokens are not data.
    name : str
        The block's name, for the record and the progress bar.
    progress : bool
        A progress bar over the steps.

    Returns
    -------
    BlockRecord

    Raises
    ------
    RuntimeError
        A step left a pruned weight non-zero (the masking failed).
    """
    from tqdm.auto import tqdm

    names, params = list(weights), list(weights.values())
    n = len(targets)
    padding = [None] * n if padding is None else list(padding)
    masks = [p.detach() != 0 for p in params]
    t0 = time.perf_counter()
    start = [p.detach().clone() for p in params]
    # eval mode: no dropout, so the fit and its error are deterministic
    with evaluating(block), training_only(block, params):
        err_start, norm, tokens = _error(run, targets, padding)
        optimizer = torch.optim.Adam(params, lr=lr)
        gen = torch.Generator().manual_seed(int(seed))
        order, curve = [], []
        for step in tqdm(range(steps), desc=f"+BR {name}", unit="step", leave=False,
                         disable=not progress):
            if not order:
                order = torch.randperm(n, generator=gen).tolist()
            b = order.pop(0)
            optimizer.zero_grad(set_to_none=False)
            sq, k = _squared_error(run(b), targets[b], padding[b])
            loss = sq / max(k, 1)
            loss.backward()
            with torch.no_grad():
                _mask_([p.grad for p in params], masks)
                optimizer.step()
                _mask_(params, masks)
            _check_masks(names, params, masks, step)
            curve.append(float(loss.detach()))
        err_end = _error(run, targets, padding)[0] if steps else err_start
        kept = "end"
        if not err_end <= err_start:  # worse, or not finite: back to the start
            with torch.no_grad():
                for p, w in zip(params, start):
                    p.copy_(w)
            err_end, kept = err_start, "start"
    return BlockRecord(name=name, layers=names, steps=int(steps), lr=float(lr),
                       n_tokens=int(tokens), dense_norm=norm, error_start=err_start,
                       error_end=err_end, kept=kept, time=time.perf_counter() - t0,
                       curve=curve)
