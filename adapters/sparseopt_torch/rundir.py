"""The run folder: what `sparseopt prune` writes and `eval` / `export` read.

A comparison folder ``OUT/`` holds ``experiment.json`` (the model and the data, shared by
its runs) and one run folder per method, ``OUT/<method>/``, written by
:func:`~sparseopt_torch.prune.prune_model`:

- ``run.json``: the run's settings (method, pattern, options, layers, fingerprints of the
  calibration batches and the dense weights); written with the first finished layer;
- ``layers/<name>.safetensors`` (``W``, and ``W_nogd`` with +GD) and ``layers/<name>.json``
  (the layer's record, written last: it marks the layer finished);
- ``blocks/<block>.json`` with block reconstruction (+BR): the block's record, written after
  its layers (whose ``W`` are then the reconstructed weights and ``W_nogd`` the method's);
  it marks the block finished;
- ``report.json`` / ``report.md`` once every layer is finished;
- ``evaluation.json`` after ``sparseopt eval``: the run's rows and what they were measured on
  (``OUT/evaluation-dense.json`` the dense model's), reused while both stay the same.

Every file is written atomically (a temporary file renamed), so a killed run leaves only
whole files and a rerun with the same settings continues where it stopped; a rerun with
other settings is refused by :func:`check_same`, which names what differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import torch

from sparseopt.validation import check_choice

from .layers import find_layers, get_weight, set_weight

__all__ = ["SETTINGS_FILE", "EXPERIMENT_FILE", "atomic_write", "write_json", "write_text",
           "fingerprint", "fingerprint_weights", "check_same", "open_run", "save_layer",
           "load_layer", "layer_file", "save_block", "load_block", "read_run", "check_experiment", "read_experiment",
           "load_pruned", "EVALUATION", "DENSE_EVALUATION", "saved_evaluation",
           "save_evaluation"]

SETTINGS_FILE = "run.json"
EXPERIMENT_FILE = "experiment.json"
_LAYER_DIR = "layers"
_BLOCK_DIR = "blocks"


def atomic_write(path, write) -> None:
    """``write(tmp)`` to a temporary sibling of ``path``, then rename it to ``path``: a crash
    leaves no half-written file, and an error no temporary one."""
    tmp = path + ".tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _plain(obj):
    """JSON form of what ``json`` cannot write: an options dataclass (e.g. a
    :class:`~sparseopt.layer.prox.ProxSchedule`) as its fields, numpy scalars as floats."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return float(obj)


def write_json(path, obj) -> None:
    """``obj`` as indented JSON (:func:`_plain` for options objects and numpy scalars),
    atomically."""
    def write(p):
        with open(p, "w") as fh:
            json.dump(obj, fh, indent=1, default=_plain)
    atomic_write(path, write)


def write_text(path, text) -> None:
    """``text`` to ``path``, atomically."""
    def write(p):
        with open(p, "w") as fh:
            fh.write(text)
    atomic_write(path, write)


def fingerprint(batches) -> str:
    """SHA-256 of nested tensors (calibration batches, masks): a resumed run can tell
    whether its inputs changed."""
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, torch.Tensor):
            h.update(str((tuple(x.shape), str(x.dtype))).encode())
            h.update(x.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
        elif isinstance(x, dict):
            for k in sorted(x):
                h.update(str(k).encode())
                feed(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                feed(v)
        else:
            h.update(repr(x).encode())

    for b in batches:
        feed(b)
    return h.hexdigest()


def fingerprint_weights(layers, weights=None) -> str:
    """SHA-256 of the dense (d_out, d_in) weights of ``layers`` ({name: module}), read from
    ``weights`` (the checkpoint, :class:`~sparseopt_torch.models.CheckpointWeights`) for
    layers still on the meta device."""
    h = hashlib.sha256()
    for name, mod in layers.items():
        W = get_weight(mod)
        if W.device.type == "meta":
            W = weights.get(f"{name}.weight")
            W = W if isinstance(mod, torch.nn.Linear) else W.T
        h.update(name.encode())
        h.update(W.to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def check_same(saved, now, what) -> None:
    """ValueError naming every key whose value differs between the ``saved`` and the ``now``
    settings (dicts, compared as they would be saved in JSON). ``what`` starts the
    message and says what is refused and what to do, e.g. ``"cannot resume the run in 'X'
    (choose another folder)"``."""
    saved, now = (json.loads(json.dumps(d, default=_plain)) for d in (saved, now))
    diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
    if diff:
        raise ValueError(f"{what}: its settings differ in "
                         + ", ".join(f"{k} (saved {saved.get(k)!r}, now {now.get(k)!r})"
                                     for k in diff))


def _read_json(path):
    with open(path) as fh:
        return json.load(fh)


def layer_file(out, name, ext=".safetensors") -> str:
    """The path of layer ``name``'s weights (or, with ``ext=".json"``, its record)."""
    return os.path.join(out, _LAYER_DIR, name + ext)


def save_layer(out, record, W, W_nogd=None) -> None:
    """Save a finished layer: its weights ``W`` (and ``W_nogd``, before +GD), then its
    ``record`` (a dict with ``"name"``), which marks it finished. Creates nothing else:
    :func:`open_run` must have been called."""
    from safetensors.torch import save_file

    tensors = {"W": W.contiguous()}
    if W_nogd is not None:
        tensors["W_nogd"] = W_nogd.contiguous()
    atomic_write(layer_file(out, record["name"]), lambda p: save_file(tensors, p))
    write_json(layer_file(out, record["name"], ".json"), record)


def load_layer(out, name):
    """(record dict, {"W": ..., "W_nogd": ...}) of a finished layer, or None."""
    from safetensors.torch import load_file

    if not os.path.exists(layer_file(out, name, ".json")):
        return None
    rec = _read_json(layer_file(out, name, ".json"))
    rec["shape"] = tuple(rec["shape"])
    return rec, load_file(layer_file(out, name))


def save_block(out, record) -> None:
    """Write a block's record of block reconstruction (a dict with ``"name"``) to
    ``blocks/<name>.json``; written after the block's layers, it marks the block finished."""
    os.makedirs(os.path.join(out, _BLOCK_DIR), exist_ok=True)
    write_json(os.path.join(out, _BLOCK_DIR, record["name"] + ".json"), record)


def load_block(out, name):
    """The record dict of a finished block (block reconstruction), or None."""
    path = os.path.join(out, _BLOCK_DIR, name + ".json")
    return _read_json(path) if os.path.exists(path) else None


def open_run(out, settings, layers, resume=True) -> dict:
    """Check a previous run's settings in ``out`` (ValueError naming the differences, or
    when ``resume`` is False) and return its finished layers among ``layers``
    (``{name: (record dict, tensors)}``); an empty dict for a new run."""
    path = os.path.join(out, SETTINGS_FILE)
    if not os.path.exists(path):
        return {}
    if not resume:
        raise ValueError(f"out={out!r} already holds a run; pass resume=True to continue it "
                         "or choose another folder")
    check_same(_read_json(path), settings, f"cannot resume the run in {out!r}")
    done = {}
    for name in layers:
        got = load_layer(out, name)
        if got is not None:
            done[name] = got
    return done


def create_run(out, settings) -> None:
    """Write ``run.json`` (with the first finished layer: a failed start leaves nothing)."""
    if not os.path.exists(os.path.join(out, SETTINGS_FILE)):
        os.makedirs(os.path.join(out, _LAYER_DIR), exist_ok=True)
        write_json(os.path.join(out, SETTINGS_FILE), settings)


def read_run(run, finished=True) -> dict:
    """The settings (``run.json``) of the run folder ``run``; with ``finished``, ValueError
    unless every layer is finished."""
    run = os.fspath(run)
    path = os.path.join(run, SETTINGS_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"run={run!r} has no {SETTINGS_FILE}: not a run folder of "
                         "prune_model(..., out=run) (or no layer of it finished yet)")
    try:
        settings = _read_json(path)
        layers = list(settings["layers"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"run={run!r}: unreadable {SETTINGS_FILE} ({exc})") from None
    missing = [n for n in layers if not os.path.isfile(layer_file(run, n, ".json"))]
    if finished and missing:
        raise ValueError(f"run={run!r} is not finished: {len(missing)} of {len(layers)} layers "
                         f"have no result yet (e.g. {missing[:3]}); resume it with "
                         "prune_model(..., out=run) before exporting")
    return settings


#: A run's evaluated rows (``RUN/evaluation.json``) and the dense model's (``OUT/...``).
EVALUATION, DENSE_EVALUATION = "evaluation.json", "evaluation-dense.json"


def _report_sha256(folder):
    path = os.path.join(folder, "report.json")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def saved_evaluation(folder, key, name=EVALUATION):
    """The rows saved in ``folder/name`` ({variant: row}) if they were measured with ``key``
    on the run's present report, else None."""
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    saved = _read_json(path)
    same = (saved.get("key") == json.loads(json.dumps(key))
            and saved.get("report_sha256") == _report_sha256(folder))
    return saved["rows"] if same else None


def save_evaluation(folder, key, rows, name=EVALUATION):
    """Write ``rows`` ({variant: row}) to ``folder/name`` with the ``key`` they were measured
    with and the run's present report (see :func:`saved_evaluation`)."""
    write_json(os.path.join(folder, name),
               {"key": key, "report_sha256": _report_sha256(folder), "rows": rows})


def check_experiment(out, experiment, write=False) -> None:
    """Refuse a comparison folder ``out`` whose ``experiment.json`` holds another model or
    data (ValueError naming them); with ``write``, record ``experiment`` there if it is not
    yet (after a run has finished, so a refused or failed first run leaves nothing)."""
    path = os.path.join(out, EXPERIMENT_FILE)
    if os.path.exists(path):
        check_same(_read_json(path), experiment,
                   f"{out!r} holds runs with other settings (another model or data; choose "
                   "another --out)")
    elif write:
        os.makedirs(out, exist_ok=True)
        write_json(path, experiment)


def read_experiment(out) -> dict:
    """``out/experiment.json`` (ValueError if there is none)."""
    path = os.path.join(out, EXPERIMENT_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{out!r} holds no {EXPERIMENT_FILE}: run `sparseopt prune` first")
    return _read_json(path)


def refinements(settings) -> str:
    """The label suffix of a run's refined weights (its ``"gd"`` variant): ``"+GD"`` for
    masked gradient steps or the exact solve (``refine_steps != 0``), ``"+BR"`` for block
    reconstruction, both, or ``""`` when the run saved only the method's weights."""
    return (("+GD" if settings.get("refine_steps", 0) != 0 else "")
            + ("+BR" if settings.get("block_steps", 0) > 0 else ""))


def load_pruned(model, out, *, variant="gd", modules=None) -> list:
    """Load the pruned weights of a finished run folder into ``model`` (in place).

    ``variant="gd"`` loads the final weights, ``"nogd"`` the weights before the masked
    gradient steps and block reconstruction (saved when ``refine_steps > 0`` or
    ``block_steps > 0``). Returns the loaded layer names. In a
    sequential run the "nogd" weights of a block were computed with inputs from the
    "gd"-pruned earlier blocks.
    """
    check_choice(variant, "variant", ("gd", "nogd"))
    saved = read_run(out, finished=False)
    layers = find_layers(model, saved["layers"] if modules is None else modules)
    names = []
    for name, mod in layers.items():
        got = load_layer(out, name)
        if got is None:
            raise ValueError(f"layer {name!r} is not finished in the run {out!r}")
        _, tensors = got
        key = "W_nogd" if variant == "nogd" and "W_nogd" in tensors else "W"
        set_weight(mod, tensors[key])
        names.append(name)
    return names
