"""Layer Hessians H = X X' / n from real activations, collected by forward hooks.

For a linear layer with inputs X (d_in x n, one column per token) the local squared loss of
prox24-kubler eq. 1 is ``||W X - W* X||_F^2 / n = Tr((W - W*) H (W - W*)')`` with
``H = X X' / n`` (eq. 2). :func:`collect_hessians` runs the model on calibration batches and
accumulates ``X X'`` for every selected ``nn.Linear`` / ``Conv1D`` without keeping activations.

Notes
-----
Streaming. A forward pre-hook on each layer takes the layer's input ``x`` (shape
``(..., d_in)``), flattens it to rows ``X`` (``n_b x d_in``, one row per token) and adds
``X' X`` to a running sum in ``dtype`` on ``device``; token counts are summed too and
``H = sum / n`` is formed once at the end (prox24-kubler eq. 2). Memory: the sums (one
``d_in x d_in`` matrix per distinct input) and, for the duration of a single forward pass, the
per-batch product of each shared input; activations are not stored beyond the batch (inputs
are compared by identity through weak references; on CUDA devices a batch's inputs are kept
until its end, see "Memory").

Padding. When a batch is a mapping with ``"attention_mask"`` of shape (B, T) and a layer's
input has shape (B, T, d_in), only the rows with ``attention_mask != 0`` are used: padding
tokens are not data. Other inputs (e.g. already unpadded ``(n, d_in)``) use every row.

Sharing. Layers that read the same tensor object in a forward pass (BERT's query, key and
value read one ``hidden_states``) get one ``X' X`` per batch and the returned dict maps all of
them to the same tensor. Sharing is decided per batch from the objects actually seen: two
layers share at the end only if they read the same object (the same sequence of objects, if
called several times) in every batch. A group that stops sharing is split exactly (the
per-batch products of shared inputs are committed only at the end of the batch).

Precision. The default ``dtype=torch.float64`` accumulates in double precision: each batch's
rows are converted to float64 before the product, so ``H`` equals ``X X' / n`` of the
activations to float64 rounding (the tests check 1e-12 against a direct computation).
``dtype=torch.float32`` (e.g. on a GPU) computes and accumulates in single precision:
relative errors of order 1e-6 on the entries for MiniLM-sized data (the tests allow 1e-5),
larger on off-diagonal entries that nearly cancel, and growing with the number of tokens
(every batch is added to a float32 sum). ``product_dtype=torch.float32`` with the default
float64 ``dtype`` keeps float32's speed without that growth: each batch's X'X is computed in
float32 and added to a float32 block sum, and the block is added to the float64 sum once it
holds :data:`_FLUSH_ROWS` rows (tokens) and at the end (q/k/v-style shared inputs add every
batch on the CPU; on CUDA devices they have block sums too, and the blocks of one input width
are added together once one of them holds that many rows). The error is then that of a
float32 sum over at most a few thousand rows, however many batches there are: on 25 600
rows of mean 1 the tests measure 8.3e-7 (float32) and 1.4e-7 (this) relative to max|H|.
Memory: a float32 block per input besides its float64 sum. On MiniLM (128 demo sentences)
both are within 2.3e-7 of the float64 H. Pruned on it, SparseGPT+100 GD ends within 0.01% of
the float64-H loss, but prox+100 GD moves by -0.01% to +1.3% per layer (median 0): the prox
path is that sensitive to a rounding-level change of H, so float64 stays the default.

Kernel. torch has no ``syrk``, so ``X' X`` is computed on the lower block triangle: d_in is
cut into k (about 8) column blocks and block row i gets ``X_i' X_{:, <= i}`` by one
``addmm``, (k + 1) / (2 k) of the full product's flops (56% at d_in = 1536); the upper
triangle is filled once at the end. A single full ``addmm`` and SciPy's BLAS
``dsyrk``/``ssyrk`` (one triangle exactly) were measured too and were slower inside MiniLM's
forward pass on the 2-core test machine (for syrk, OpenBLAS's threads and torch's OpenMP
threads compete for the cores); they were removed. On a CUDA device
(:data:`_FULL_PRODUCT_DEVICES`) MiniLM's forward pass is launch-bound (3-5 ms for its 124
kernels per batch on an H100) and its products are too small for their flops to matter:
the block triangle's 8 launches per input made the hooks 3.2x a forward pass, one full
``addmm`` per input 2.0x (92 extra kernels per batch: a padding ``index_select``, a cast and
a product for each of the 24 distinct inputs). So there the hooks only keep a reference to
each distinct input, and the end of the batch computes all its products at once, grouped
by width and rows: one ``torch.stack`` of the group's inputs, one ``index_select`` of the
kept rows (padding dropped), one cast and one ``baddbmm`` into the sums of that width, which
are one (slots, d, d) tensor (``bmm`` and ``index_add_`` where the group's slots are not
consecutive rows of it, or a layer read several inputs). Sharing is decided as on the CPU,
before the products are added; the parts of a split group start from copies of its row.
A batch read as the previous one was (the same layers, inputs shared alike, the same
widths and dtypes; the lengths may differ) reuses that batch's plan: which inputs are
stacked together and which rows of the sums they go to. The hooks themselves only note the
input (a dict lookup and an append); its width, shape and padding are read at the end of
the batch. With the finiteness test below, a batch costs 14 extra aten operators on tiny
BERTs of any depth (the tests count them) and 12 extra kernels on MiniLM on an H100.

Finiteness. NaN/inf anywhere in a layer's input reaches the diagonal of its X'X (a sum of
squares), and a non-finite entry of a running sum stays non-finite. On the CPU all the sums'
diagonals are tested after every batch. On CUDA devices a test waits for the device's
queue, which stops the GPU from overlapping a batch's products with the next batch's Python
(on an H100 a test after every batch cost 0.19 and 0.33 ms per MiniLM batch in two runs,
6-10% of a forward pass, and nothing measurable in a third). There each batch keeps the sums of every slot's diagonal on the device (one reduction
per input width), and they are tested every :data:`_CHECK_EVERY` (16) batches and at the
end: the error still names the first bad batch and its layers, up to 15 batches later. For
the padding, the mask's host copy starts at the batch's start and is read at its end, so
no host wait remains in a batch.

Memory. On CUDA devices a batch's inputs are kept until its end, which keeps activations
alive that a ``no_grad`` forward pass would free. Once the kept inputs exceed
:data:`_STASH_BYTES` (512 MiB) their products are computed at once, batched in the same way:
layers with their own H add them to their sums and go on as if the batch had just begun;
layers that still share keep one X'X per input until the end of the batch decides the
sharing (as on the CPU). Computing a group takes temporary copies of its rows (stacked,
unpadded, cast): up to about 4x the kept bytes for float32 activations and float64 products.
At the end every H is copied out of the stacked sums of its width (so that each is freed on
its own), one width at a time: transiently twice that width's sums. A layer input changed in
place after its layer read it would be read changed at the end of the batch: its version
counter is checked, and such a model is refused (ValueError; ``device="cpu"`` computes the
products in the hooks).

Cost. The product costs ``n_b d_in^2`` multiply-adds per distinct input (about half with the
block triangle), against ``n_b d_in d_out`` for the layer itself. In MiniLM (d = 384, FFN
1536) one block's six linear layers cost ``n_b (4 + 2 * 4) 384^2 = 12 n_b 384^2``; its four
distinct inputs (q/k/v shared, attention output, FFN input, FFN hidden of width 1536) cost
``(3 + 16) n_b 384^2 / 2 = 9.5 n_b 384^2`` even at exactly half (about 11 n_b 384^2 with the
block triangle), in float64: the FFN hidden alone (``d_in = 1536``) costs 4x (2x with a
triangle) the product of its own layer. The hooks therefore cost about one more forward
pass; ``benchmarks/adapter_hooks.py`` measures the ratio (issue 12 asks <= 1.2x, not reached
on CPU). Measured there (32 batches of 16 docstring sentences, 11031 tokens, 2 CPU cores
shared with other jobs, best of 3, interleaved): plain forward 3.06 s; hooks float64 block
triangle (default) 1.71x, float32 block triangle 1.43x; in the same run the removed
alternatives took 2.18x (float64) and 1.65x (float32) with one full addmm, 6.1x and 5.5x
with SciPy syrk. On 2026-11-26 (idle AVX-512 machine): default 1.84x, float32 1.48x,
float32 products with float64 sums 1.54x (docs/benchmarks.md). On an H100 the flops do not
matter (see "Kernel"): the deferred products took the hooks from 2.0x to 1.44-1.48x, and
without the host waits, with the plans and the thinner hooks (2026-11-27, third GPU
session) to 1.35x in ``benchmarks/adapter_hooks.py`` (1.36x against 1.50x for the code
before them, in one run on one machine; earlier steps of the same work measured 1.25-1.39x
on other machines). Still not 1.2x: per MiniLM batch (about 3.2 ms of forward pass) the
hooks add about 1 ms of Python and launches, and 36 no-op forward pre-hooks alone cost
0.20 and 0.32 ms per batch on two H100 hosts (the slow path of ``nn.Module.__call__``),
nothing measurable on a third.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from .layers import evaluating, find_layers, get_weight, parse_device

__all__ = ["Hessians", "collect_hessians"]

#: Accumulation dtypes: float16/bfloat16 sums of squares overflow or lose all precision.
_ACCUMULATION_DTYPES = (torch.float32, torch.float64)


@dataclass
class Hessians:
    """Layer Hessians ``H = X X' / n`` collected by :func:`collect_hessians`.

    Attributes
    ----------
    H : dict[str, torch.Tensor]
        ``{layer name: (d_in, d_in) tensor}``, symmetric positive semidefinite. Layers that
        read the same input (e.g. query, key, value) map to the *same* tensor object.
    n_tokens : dict[str, int]
        Number of tokens (rows of X, padding excluded) each layer's H averages over.
    groups : list[tuple[str, ...]]
        A partition of the layer names: the layers of one tuple share one H (singletons for
        layers with their own), in the order the layers were registered.
    source : dict
        Empty from :func:`collect_hessians`. Hessians kept by
        ``prune_model(..., keep_hessians=True)`` record here what they were collected from
        (the fingerprints of the calibration batches and of the dense weights, and the
        dtypes); ``prune_model(..., hessians=...)`` reuses them only if its own run has the
        same.
    """

    H: dict = field(default_factory=dict)
    n_tokens: dict = field(default_factory=dict)
    groups: list = field(default_factory=list)
    source: dict = field(default_factory=dict)

    def numpy(self, name: str) -> np.ndarray:
        """A float64 NumPy copy of the Hessian of layer ``name`` (for :func:`sparseopt.prune`)."""
        if name not in self.H:
            raise ValueError(f"name {name!r} is not a layer of these Hessians "
                             f"(known: {', '.join(self.H)})")
        return self.H[name].detach().to("cpu", torch.float64).numpy().copy()


#: Smallest column block of the "blocked" product; d_in is cut into about 8 blocks.
_MIN_BLOCK = 128
#: Devices whose products are deferred to the end of the batch and computed there as full
#: products batched by input width (module Notes, "Kernel"): on a GPU every kernel launch
#: costs more than MiniLM's small products.
_FULL_PRODUCT_DEVICES = ("cuda",)
#: On those devices, the bytes of layer inputs kept for the end of the batch above which
#: their products are computed at once, mid-batch (module Notes, "Memory").
_STASH_BYTES = 512 * 2**20
#: On those devices, the NaN/inf test of the sums runs every this many batches and at the end
#: (module Notes, "Finiteness"): a test waits for the device's queue.
_CHECK_EVERY = 16

#: With ``product_dtype`` narrower than ``dtype``, a layer's products are summed in
#: ``product_dtype`` over blocks of batches of at least this many rows (tokens), and each
#: block is then added to the sum in ``dtype``: adding a d x d matrix after every small batch
#: cost as much as the product itself on MiniLM (about 340 tokens per batch).
_FLUSH_ROWS = 4096


class _Slot:
    """The running sum of X'X shared by a set of layers (a part of the sharing partition)."""

    def __init__(self, names, d, total=None, count=0):
        self.names = list(names)
        self.d = d
        self.total = total  # None: nothing accumulated yet (zero)
        self.count = count
        # Only for shared slots, reset after every batch: distinct inputs seen in this batch
        # as (weak reference, X'X of the batch or None if no rows, rows), and per member the
        # indices of the inputs it read.
        self.seen = []
        self.calls = {name: [] for name in self.names}
        self.buffer = None  # reused for the first input of a batch
        self.pending = 0  # rows in ``buffer`` not yet added to ``total`` (own, mixed dtypes)
        self.row = 0  # deferred path: its index in the stacked sums of width d


def _parts(slot):
    """The members of ``slot`` grouped by the sequence of inputs (indices into
    ``slot.seen``) each read in this batch: only layers of one group still share."""
    parts = {}
    for name in slot.names:
        parts.setdefault(tuple(slot.calls[name]), []).append(name)
    return parts


class _Collector:
    """The hook state: slots, the current batch's mask, and the accumulation kernel."""

    def __init__(self, layers, dtype, device, product_dtype):
        self.dtype = dtype  # of the running sums (and of H)
        self.product_dtype = product_dtype  # of each batch's X'X
        self.device = device
        by_width = {}
        for name, module in layers.items():
            by_width.setdefault(get_weight(module).shape[1], []).append(name)
        # Start from one candidate group per input width; batches only ever split groups.
        self.slots = [_Slot(names, d) for d, names in by_width.items()]
        self.slot_of = {name: slot for slot in self.slots for name in slot.names}
        self.order = {name: i for i, name in enumerate(layers)}
        self.mask = None
        self.rows_of = {}

    # -- per batch -------------------------------------------------------------------------
    def start_batch(self, batch):
        mask = batch.get("attention_mask") if isinstance(batch, Mapping) else None
        self.mask = mask if isinstance(mask, torch.Tensor) and mask.ndim == 2 else None
        self.rows_of = {}  # device -> indices of the kept tokens (None: keep all)

    def _kept_rows(self, device):
        if device not in self.rows_of:
            keep = self.mask.reshape(-1).to(device) != 0
            self.rows_of[device] = None if bool(keep.all()) else keep.nonzero().squeeze(1)
        return self.rows_of[device]

    def _padding_rows(self, name, x):
        """Check the width of layer ``name``'s input ``x``; the indices of its rows to keep
        (padding dropped), or None to keep all."""
        d = self.slot_of[name].d
        if x.shape[-1] != d:
            raise ValueError(f"layer {name!r} received an input with last dimension "
                             f"{x.shape[-1]}, expected d_in = {d}")
        if self.mask is not None and x.ndim == 3 and tuple(x.shape[:2]) == tuple(self.mask.shape):
            return self._kept_rows(x.device)
        return None

    def _rows(self, name, x):
        """The layer input as rows (n_b, d_in) in the product dtype and device, padding
        dropped."""
        keep = self._padding_rows(name, x)
        X = x.detach().reshape(-1, x.shape[-1])
        if keep is not None:
            X = X.index_select(0, keep)
        return X.to(device=self.device, dtype=self.product_dtype).contiguous()

    def _gram(self, X, out, accumulate):
        """``out += X'X`` (accumulate) or ``out = X'X`` on the lower block triangle (the
        module's Notes, "Kernel"); only the lower triangle of ``out`` is meaningful."""
        d = X.shape[1]
        block = max(_MIN_BLOCK, -(-d // 8))
        for lo in range(0, d, block):
            hi = min(lo + block, d)
            # rows lo:hi, columns 0:hi: the block row of the lower block triangle
            target = out[lo:hi, :hi]
            if accumulate:
                target.addmm_(X[:, lo:hi].T, X[:, :hi])
            else:
                torch.mm(X[:, lo:hi].T, X[:, :hi], out=target)
        return out

    def _zeros(self, d, dtype=None):
        return torch.zeros(d, d, dtype=dtype or self.dtype, device=self.device)

    @staticmethod
    def _flush(slot):
        """Add the rows pending in ``slot.buffer`` to ``slot.total``."""
        if slot.pending:
            slot.total += slot.buffer
            slot.pending = 0

    def _as_sum(self, G, copy):
        """A batch's X'X as a running sum: in the sums' dtype, a copy when ``copy``."""
        return G.to(self.dtype, copy=copy)

    def hook(self, name, args, kwargs):
        x = args[0] if args else next(iter(kwargs.values()))
        slot = self.slot_of[name]
        if len(slot.names) == 1:  # own H: accumulate at once
            X = self._rows(name, x)
            if X.shape[0]:
                if slot.total is None:
                    slot.total = self._zeros(slot.d)
                if self.product_dtype == self.dtype:
                    self._gram(X, slot.total, accumulate=True)
                else:  # a block of batches summed in product_dtype, then added to total
                    if slot.buffer is None:  # zeros: _gram never writes its upper blocks
                        slot.buffer = self._zeros(slot.d, self.product_dtype)
                    self._gram(X, slot.buffer, accumulate=slot.pending > 0)
                    slot.pending += X.shape[0]
                    if slot.pending >= _FLUSH_ROWS:
                        self._flush(slot)
                slot.count += X.shape[0]
            return
        for i, (ref, _, _) in enumerate(slot.seen):
            if ref() is x:  # same object as a slot-mate's input: X'X already computed
                slot.calls[name].append(i)
                return
        X = self._rows(name, x)
        G = None
        if X.shape[0]:
            if slot.seen or slot.buffer is None:
                out = self._zeros(slot.d, self.product_dtype)
                if slot.buffer is None:
                    slot.buffer = out
            else:
                out = slot.buffer
            G = self._gram(X, out, accumulate=False)
        slot.seen.append((weakref.ref(x), G, X.shape[0]))
        slot.calls[name].append(len(slot.seen) - 1)

    def end_batch(self, index):
        new_slots = []
        for slot in self.slots:
            if len(slot.names) == 1:
                new_slots.append(slot)
                continue
            parts = _parts(slot)
            users = {}
            for seq in parts:
                for i in seq:
                    users.setdefault(i, set()).add(seq)
            for seq, names in parts.items():
                total, count = slot.total, slot.count
                if len(parts) > 1 and total is not None:
                    total = total.clone()
                for i in seq:
                    _, G, n = slot.seen[i]
                    if G is None:
                        continue
                    count += n
                    if total is None and len(seq) == 1 and len(users[i]) == 1 \
                            and G is not slot.buffer:
                        total = self._as_sum(G, copy=False)  # adopt a fresh product
                    elif total is None:
                        total = self._as_sum(G, copy=True)
                    else:
                        total += G  # in place: promoted to the sums' dtype
                part = slot if len(parts) == 1 else _Slot(names, slot.d, total, count)
                part.total, part.count = total, count
                part.seen, part.calls = [], {name: [] for name in names}
                if part is not slot:
                    part.buffer = slot.buffer if part.total is not slot.buffer else None
                    slot.buffer = None
                new_slots.append(part)
        self.slots = sorted(new_slots, key=lambda s: self.order[s.names[0]])
        self.slot_of = {name: slot for slot in self.slots for name in slot.names}
        # NaN/inf anywhere in X reaches the diagonal of X'X (a sum of squares): one test of
        # all the sums' diagonals per batch (a few kernels: per slot it was 8 of them, 60% of
        # the hooks' kernels per MiniLM batch, and on a GPU the hooks' cost is launches);
        # only when it fails are the slots tested one by one, to name the layers.
        live = [s for s in self.slots if s.total is not None]
        if live:
            diagonals = [s.total.diagonal() for s in live]
            diagonals += [s.buffer.diagonal() for s in live if s.pending]
            if not bool(torch.isfinite(torch.cat(diagonals)).all()):
                bad = [name for s in live if not _finite_sums(s) for name in s.names]
                raise self._non_finite(bad, index)

    def _finish(self):
        """Every slot's ``total`` becomes its H: symmetric, divided by the tokens."""
        for slot in self.slots:
            self._flush(slot)
            S = slot.total  # owned by the collector: finished in place
            _fill_upper(S, max(_MIN_BLOCK, -(-slot.d // 8)))  # only the lower was computed
            S /= slot.count

    def _non_finite(self, bad, index):
        return ValueError(f"non-finite activations (NaN/inf) in the input of layer(s) "
                          f"{', '.join(bad)} in batch {index} (or X'X overflowed in "
                          f"{self.product_dtype})")

    def result(self):
        empty = [name for s in self.slots if s.count == 0 for name in s.names]
        if empty:
            raise ValueError(f"no tokens reached layer(s) {', '.join(empty)}: the forward "
                             "pass never called them, or every attention_mask entry was 0")
        self._finish()
        out = Hessians()
        for slot in self.slots:
            for name in slot.names:
                out.H[name] = slot.total
                out.n_tokens[name] = slot.count
            out.groups.append(tuple(slot.names))
        out.H = {name: out.H[name] for name in self.order}
        out.n_tokens = {name: out.n_tokens[name] for name in self.order}
        return out


class _Input:
    """A distinct layer input of the batch on the deferred path, kept until its product is
    computed."""

    __slots__ = ("name", "x", "version", "ref", "d", "lead", "masked", "kind", "n", "product")

    def __init__(self, name, x):
        self.name = name  # the first layer that read it (for errors)
        self.x = x  # None once its product is computed
        # the version counter, shared with x's views, tells whether x was modified in place
        self.version = None if x.is_inference() else x._version
        # its identity once x is dropped mid-batch (the id could then be reused):
        # _compute_stashed
        self.ref = None
        # width, leading shape, padding, and (with dtype, device) what it is stacked by:
        # set by _describe
        self.d = self.lead = self.masked = self.kind = None
        self.n = None  # rows (tokens) it adds (the padding dropped): _describe
        self.product = None  # its X'X when computed before the end of the batch

@dataclass
class _Group:
    """Distinct inputs of one (width, rows, padding, dtype, device): one stack and one
    batched product; ``start`` is the first of their slots' consecutive rows in the stacked
    sums, or None with ``index`` the rows for ``index_add_``."""

    d: int
    inputs: list
    masked: bool
    start: int | None
    index: torch.Tensor | None


class _DeferredCollector(_Collector):
    """The hook state on devices in :data:`_FULL_PRODUCT_DEVICES` (module Notes, "Kernel"):
    the hooks only note each layer's input; the products are computed at the end of the
    batch, batched by input width, into one stacked sum per width. A batch that reads its
    inputs as the previous one did (the same layers, inputs shared alike, the same widths and
    dtypes) reuses its plan: which products go to which sums."""

    def __init__(self, layers, dtype, device, product_dtype):
        super().__init__(layers, dtype, device, product_dtype)
        # per input width d: the sums of its slots as one (slots, d, d) tensor (``slot.row``
        # indexes it) and, with a narrower product_dtype, their block sums in that dtype
        # (module Notes, "Precision"), so that one kernel adds a batch's products to all
        self.sums, self.blocks = {}, {}
        for slot in self.slots:  # one slot per width so far
            self.sums[slot.d] = torch.zeros(1, slot.d, slot.d, dtype=dtype, device=device)
            if product_dtype != dtype:
                self.blocks[slot.d] = torch.zeros(1, slot.d, slot.d, dtype=product_dtype,
                                                  device=device)
        self.row_names = {slot.d: [slot.names] for slot in self.slots}
        self.plan = None  # (signature, pairs, groups) of the last batch computed at its end
        self.checks = []  # per batch not yet tested: (index, per width its rows' diagonals)

    # -- per batch -------------------------------------------------------------------------
    def start_batch(self, batch):
        super().start_batch(batch)
        self.mask_shape = None if self.mask is None else tuple(self.mask.shape)
        self.inputs, self.ids, self.calls = [], {}, []  # calls: (layer, index into inputs)
        self.stashed = 0  # bytes of the inputs kept, not yet in a product
        self.computed = False  # whether products were computed mid-batch
        self.kept = None  # (indices of the kept tokens on the host or None: all, their number)
        self.mask_copy = None
        if self.mask is not None and self.mask.device.type == "cuda":
            # the mask's host copy starts now, so that the end of the batch need not wait
            # for the device (its padding indices and token count are needed on the host)
            host = torch.empty(self.mask.shape, dtype=self.mask.dtype, pin_memory=True)
            host.copy_(self.mask, non_blocking=True)
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.mask.device))
            self.mask_copy = (host, event)

    def hook(self, name, args, kwargs):
        # as little as possible here: a MiniLM batch calls it 36 times (module Notes, "Cost")
        x = args[0] if args else next(iter(kwargs.values()))
        i = self.ids.get(id(x))
        if i is None or self.inputs[i].ref is not None and self.inputs[i].ref() is not x:
            i = self.ids[id(x)] = len(self.inputs)  # a new input in this batch
            self.inputs.append(_Input(name, x))
            self.calls.append((name, i))
            self.stashed += x.numel() * x.element_size()
            if self.stashed > _STASH_BYTES:
                self._compute_stashed()
        else:
            self.calls.append((name, i))  # read before: its product counts again

    def _describe(self):
        """Width, leading shape, padding and rows of the inputs not yet described."""
        for inp in self.inputs:
            if inp.d is None:
                inp.d, inp.lead = inp.x.shape[-1], tuple(inp.x.shape[:-1])
                inp.masked = inp.lead == self.mask_shape  # (B, T) rows: padding dropped
                inp.kind = (inp.d, inp.lead, inp.masked, inp.x.dtype, inp.x.device)
                inp.n = self._kept_tokens()[1] if inp.masked else math.prod(inp.lead)

    def _check_widths(self):
        for name, i in self.calls:
            if self.inputs[i].d != self.slot_of[name].d:
                raise ValueError(f"layer {name!r} received an input with last dimension "
                                 f"{self.inputs[i].d}, expected d_in = "
                                 f"{self.slot_of[name].d}")

    def _kept_tokens(self):
        """The batch's kept tokens: (their indices as a host tensor, or None for all; their
        number)."""
        if self.kept is None:
            if self.mask_copy is not None:
                mask, event = self.mask_copy
                event.synchronize()
            else:
                mask = self.mask.cpu()
            keep = mask.reshape(-1) != 0
            n = int(keep.sum())
            self.kept = (None if n == keep.numel() else keep.nonzero().squeeze(1), n)
        return self.kept

    def _kept_rows(self, device):
        if device not in self.rows_of:
            index = self._kept_tokens()[0]
            # the host tensor is not pinned: the copy does not wait for the device's queue
            self.rows_of[device] = None if index is None else index.to(device,
                                                                       non_blocking=True)
        return self.rows_of[device]

    def _stack(self, group):
        """The rows of the inputs of ``group`` as one (inputs, n, d) tensor in product_dtype
        on the sums' device, padding dropped."""
        for i in group.inputs:
            inp = self.inputs[i]
            if inp.version is not None and inp.x._version != inp.version:
                raise ValueError(
                    f"the input of layer {inp.name!r} was modified in place after the layer "
                    f"read it: on {self.device.type} the products are computed at the end of "
                    "the batch (module Notes, \"Kernel\"), so layer inputs must not change "
                    "during the forward pass; use device=\"cpu\"")
        X = torch.stack([self.inputs[i].x for i in group.inputs])
        X = X.reshape(len(group.inputs), -1, group.d)
        if group.masked:  # one index_select for the whole group
            keep = self._kept_rows(X.device)
            if keep is not None:
                X = X.index_select(1, keep)
        return X.to(device=self.device, dtype=self.product_dtype)

    def _by_kind(self, pairs):
        """The ``(slot, input index)`` pairs whose products are still to compute, grouped by
        (width, rows, padding, dtype, device) of the inputs: [(d, masked, pairs)]."""
        by_kind = {}
        for slot, i in pairs:
            inp = self.inputs[i]
            if inp.x is not None:
                by_kind.setdefault(inp.kind, []).append((slot, i))
        return [(d, masked, members) for (d, _, masked, *_), members in by_kind.items()]

    def _groups(self, pairs):
        """The products of the ``(slot, input index)`` pairs still to compute, as groups in
        the order of the slots' rows."""
        groups = []
        for d, masked, members in self._by_kind(sorted(pairs, key=lambda p: p[0].row)):
            rows = [slot.row for slot, _ in members]
            consecutive = rows == list(range(rows[0], rows[0] + len(rows)))
            groups.append(_Group(d, [i for _, i in members], masked,
                                 rows[0] if consecutive else None,
                                 None if consecutive else torch.tensor(rows, device=self.device)))
        return groups

    def _apply(self, pairs, groups):
        """Add the products of the inputs of the ``(slot, input index)`` pairs to the slots'
        sums (to their block sums with a narrower product_dtype), ``groups`` those not yet
        computed (from :meth:`_groups`); count the rows."""
        target = self.blocks or self.sums
        for slot, i in pairs:
            inp = self.inputs[i]
            slot.count += inp.n
            if self.blocks:
                slot.pending += inp.n
            if inp.product is not None:  # computed mid-batch
                target[slot.d][slot.row] += inp.product
        for group in groups:
            X = self._stack(group)
            S = target[group.d]
            if group.start is not None:  # one product per slot, consecutive rows
                S[group.start:group.start + len(group.inputs)].baddbmm_(X.transpose(1, 2), X)
            else:  # several products for a slot, or other slots between
                S.index_add_(0, group.index, torch.bmm(X.transpose(1, 2), X))

    def _compute_stashed(self):
        """Compute the products of the inputs kept so far in this batch (module Notes,
        "Memory"): own slots add theirs and go on as if the batch had just begun; inputs
        read by shared slots keep their products until the end of the batch decides the
        sharing."""
        self.computed = True
        self._describe()
        self._check_widths()
        shared = {i for name, i in self.calls if len(self.slot_of[name].names) > 1}
        fresh = [i for i in sorted(shared) if self.inputs[i].x is not None]
        for d, masked, members in self._by_kind([(None, i) for i in fresh]):
            group = _Group(d, [i for _, i in members], masked, None, None)
            X = self._stack(group)
            for i, G in zip(group.inputs, torch.bmm(X.transpose(1, 2), X)):
                inp = self.inputs[i]
                inp.ref = weakref.ref(inp.x)  # its identity, now that x may be freed
                inp.product, inp.x = G, None
        own = [(self.slot_of[name], i) for name, i in self.calls
               if len(self.slot_of[name].names) == 1]
        self._apply(own, self._groups(own))
        for _, i in own:
            inp = self.inputs[i]
            if inp.x is not None:  # read by own slots only: a later read is a new input
                self.ids.pop(id(inp.x), None)
                inp.x = None
        self.calls = [(name, i) for name, i in self.calls if len(self.slot_of[name].names) > 1]
        self.stashed = 0

    def _signature(self):
        """What decides a batch's plan: the calls and, per distinct input, its width, dtype,
        device, padding and which leading shape of the batch it has."""
        leads = {}
        kinds = tuple((d, masked, dtype, device, leads.setdefault(lead, len(leads)))
                      for d, lead, masked, dtype, device in (inp.kind for inp in self.inputs))
        return tuple(self.calls), kinds

    def end_batch(self, index):
        self._describe()
        signature = None if self.computed else self._signature()
        if self.plan is not None and self.plan[0] == signature:
            self._apply(*self.plan[1:])
        else:  # (a plan's widths were checked when it was made)
            self._check_widths()
            pairs = self._split()
            groups = self._groups(pairs)
            self._apply(pairs, groups)
            self.plan = None if signature is None else (signature, pairs, groups)
        self.inputs, self.ids, self.calls = [], {}, []
        for d, B in self.blocks.items():  # a block is added once a slot's holds _FLUSH_ROWS
            slots = [slot for slot in self.slots if slot.d == d]
            if max(slot.pending for slot in slots) >= _FLUSH_ROWS:
                self.sums[d] += B
                B.zero_()
                for slot in slots:
                    slot.pending = 0
        # NaN/inf anywhere in X reaches the diagonal of X'X (a sum of squares, >= 0), and a
        # non-finite entry of a running sum stays non-finite: each batch keeps the sums of
        # its rows' diagonals on the device, tested every _CHECK_EVERY batches and at the end
        # (a test waits for the device), which names the first bad batch
        diagonals = {d: S.diagonal(dim1=1, dim2=2).sum(1) for d, S in self.sums.items()}
        for d, B in self.blocks.items():
            diagonals[d] = diagonals[d] + B.diagonal(dim1=1, dim2=2).sum(1)
        self.checks.append((index, diagonals, self.row_names))
        if len(self.checks) >= _CHECK_EVERY:
            self._check()

    def _split(self):
        """Split the slots whose layers did not read the same inputs in this batch (module
        Notes, "Sharing"); the ``(slot, input index)`` pairs of the batch's products."""
        reads = {name: [] for name in self.order}
        for name, i in self.calls:
            reads[name].append(i)
        pairs, new_slots = [], []
        for slot in self.slots:
            parts = {}
            for name in slot.names:
                parts.setdefault(tuple(reads[name]), []).append(name)
            for seq, names in parts.items():
                part = slot if len(parts) == 1 else _Slot(names, slot.d, count=slot.count)
                # a part of a split slot starts from a copy of the slot's sums (_place)
                part.row, part.pending = slot.row, slot.pending
                pairs += [(part, i) for i in seq]
                new_slots.append(part)
        if len(new_slots) > len(self.slots):
            self.slots = sorted(new_slots, key=lambda s: self.order[s.names[0]])
            self.slot_of = {name: slot for slot in self.slots for name in slot.names}
            self._place()
        return pairs

    def _place(self):
        """Give the slots of each width consecutive rows of its stacked sums; the parts of a
        split slot start from copies of its row."""
        for d in self.sums:
            slots = [slot for slot in self.slots if slot.d == d]
            rows = [slot.row for slot in slots]
            if rows != list(range(len(slots))):
                index = torch.tensor(rows, device=self.device)
                self.sums[d] = self.sums[d].index_select(0, index)
                if self.blocks:
                    self.blocks[d] = self.blocks[d].index_select(0, index)
                for j, slot in enumerate(slots):
                    slot.row = j
        self.row_names = {d: [slot.names for slot in self.slots if slot.d == d]
                          for d in self.sums}

    def _check(self):
        """Test the diagonals kept since the last test; raise naming the first bad batch and
        its layers (none if only the test's sums overflowed)."""
        checks, self.checks = self.checks, []
        if not checks or bool(torch.isfinite(torch.cat(
                [v for _, diagonals, _ in checks for v in diagonals.values()])).all()):
            return
        bad = {name for slot in self.slots if not self._finite(slot) for name in slot.names}
        for index, diagonals, row_names in checks:
            named = [name for d, v in diagonals.items()
                     for row in (~torch.isfinite(v)).nonzero().flatten().tolist()
                     for name in row_names[d][row] if name in bad]
            if named:
                raise self._non_finite(sorted(named, key=self.order.get), index)

    def _finite(self, slot):
        stacks = [self.sums[slot.d]] + ([self.blocks[slot.d]] if self.blocks else [])
        return all(bool(torch.isfinite(S[slot.row].diagonal()).all()) for S in stacks)

    def result(self):
        self._check()
        return super().result()

    def _finish(self):
        # a few operators per width, not per slot (module Notes, "Cost"); every H its own
        # tensor, freed on its own (prune_model frees them as its layers finish): the stacked
        # sums are finished and copied out one width at a time
        for d in list(self.sums):
            S = self.sums.pop(d)
            if self.blocks:
                S += self.blocks.pop(d)
            slots = [slot for slot in self.slots if slot.d == d]  # in the order of the rows
            # exactly symmetric (bmm's X'X need not be): the lower triangle reflected
            upper = S.tril(-1).transpose(1, 2)
            S.tril_()
            S += upper
            del upper
            S /= torch.tensor([float(slot.count) for slot in slots], dtype=S.dtype,
                              device=S.device).view(-1, 1, 1)
            for slot in slots:
                slot.total = S[slot.row].clone() if len(slots) > 1 else S[0]
                slot.pending = 0
            del S


def _finite_sums(slot) -> bool:
    """Whether the diagonals of ``slot``'s running sums (and of its pending block) are
    finite."""
    ok = bool(torch.isfinite(slot.total.diagonal()).all())
    return ok and (not slot.pending or bool(torch.isfinite(slot.buffer.diagonal()).all()))


def _fill_upper(S, block):
    """Copy the lower triangle of the square ``S`` onto its upper triangle, in place and one
    block row at a time: ``S += S.T.triu(1)`` would allocate a second d x d matrix (382 MB
    for a 6912-wide float64 Hessian)."""
    d = S.shape[0]
    for lo in range(0, d, block):
        hi = min(lo + block, d)
        D = S[lo:hi, lo:hi]
        D.copy_(D.tril() + D.tril(-1).T)
        if hi < d:
            S[lo:hi, hi:].copy_(S[hi:, lo:hi].T)


def _default_forward(model, batch):
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def collect_hessians(model, batches, modules=None, *, forward=None, dtype=torch.float64,
                     product_dtype=None, device="cpu", progress=None) -> Hessians:
    """Accumulate the layer Hessians ``H = X X' / n`` over calibration batches.

    Parameters
    ----------
    model : nn.Module
        Run in eval mode and without gradients; its train/eval flags are restored afterwards.
    batches : iterable
        Calibration batches; each is passed to ``forward``. A mapping with
        ``"attention_mask"`` (B, T) drops the padding tokens of (B, T, d_in) layer inputs.
    modules : None, str, sequence of str, or mapping, optional
        The layers, as in :func:`sparseopt_torch.find_layers` (default: every ``nn.Linear``
        / ``Conv1D`` except heads such as ``pooler``).
    forward : callable, optional
        ``forward(model, batch)``; default ``model(**batch)`` for a mapping,
        ``model(*batch)`` for a tuple/list, else ``model(batch)``. Batches are not moved to
        the model's device.
    dtype : torch.float64 or torch.float32
        Dtype of the running sums and of ``H`` (default float64; float32 is allowed, e.g. on
        a GPU, see Notes).
    product_dtype : torch.float32, torch.float64 or None
        Dtype in which each batch's ``X'X`` is computed; default ``dtype``. ``torch.float32``
        with ``dtype=torch.float64`` computes every batch's product in single precision and
        sums the batches in double (the module's Notes, "Precision"). It may not be wider
        than ``dtype``.
    device : str or torch.device
        Where the sums live and the products run (default ``"cpu"``).
    progress : bool or None
        tqdm bar over the batches; None shows it when there are more than 20 batches.

    Returns
    -------
    Hessians
        ``H`` (layers sharing an input share one tensor), ``n_tokens``, ``groups``.

    Raises
    ------
    ValueError
        Bad arguments, no layer matched ``modules``, ``batches`` empty, a layer that received
        no token, NaN/inf activations (naming the layer and the batch), on a CUDA device a
        layer input modified in place during the forward pass (module Notes, "Memory"). The
        hooks are removed in every case.

    Notes
    -----
    ``H = X X' / n`` of prox24-kubler eq. 2, with X the layer's inputs (d_in x n) over all
    batches and n the number of (unpadded) tokens. See the module docstring for the
    streaming, sharing and precision details.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    >>> batches = [torch.randn(32, 8) for _ in range(3)]
    >>> hess = collect_hessians(model, batches)
    >>> hess.H["0"].shape, hess.H["2"].shape, hess.n_tokens["0"]
    (torch.Size([8, 8]), torch.Size([16, 16]), 96)
    """
    if forward is None:
        forward = _default_forward
    elif not callable(forward):
        raise ValueError(f"forward must be callable, got {type(forward).__name__}")
    if dtype not in _ACCUMULATION_DTYPES:
        raise ValueError(f"dtype must be torch.float64 or torch.float32, got {dtype!r}")
    if product_dtype is None:
        product_dtype = dtype
    elif product_dtype not in _ACCUMULATION_DTYPES:
        raise ValueError(f"product_dtype must be torch.float32, torch.float64 or None, got "
                         f"{product_dtype!r}")
    elif product_dtype.itemsize > dtype.itemsize:
        raise ValueError(f"product_dtype {product_dtype} is wider than dtype {dtype}: the "
                         "sums would round every product away")
    device = parse_device(device)
    if progress is not None and not isinstance(progress, bool):
        raise ValueError(f"progress must be True, False or None, got {progress!r}")
    if not isinstance(batches, Iterable) or isinstance(batches, (torch.Tensor, Mapping)):
        raise ValueError("batches must be an iterable of batches (e.g. a list), got "
                         f"{type(batches).__name__}")
    layers = find_layers(model, modules)
    try:
        n_batches = len(batches)
    except TypeError:
        n_batches = None
    if n_batches == 0:
        raise ValueError("batches is empty: no calibration data")
    if progress is None:
        progress = n_batches is not None and n_batches > 20

    deferred = device.type in _FULL_PRODUCT_DEVICES
    collector = (_DeferredCollector if deferred else _Collector)(layers, dtype, device,
                                                                 product_dtype)
    handles = []
    try:
        for name, module in layers.items():
            handles.append(module.register_forward_pre_hook(
                lambda _mod, args, kwargs, _name=name: collector.hook(_name, args, kwargs),
                with_kwargs=True))
        seen = 0
        from tqdm.auto import tqdm

        with evaluating(model), torch.no_grad():
            for index, batch in enumerate(tqdm(batches, total=n_batches, disable=not progress,
                                               desc="collect_hessians", unit="batch")):
                collector.start_batch(batch)
                forward(model, batch)
                collector.end_batch(index)
                seen += 1
        if seen == 0:
            raise ValueError("batches is empty: no calibration data")
        return collector.result()
    finally:
        for handle in handles:
            handle.remove()
