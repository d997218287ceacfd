"""The MiniLM comparison through the one folder path: the ``minilm`` preset of ``sparseopt
prune`` (tiny settings), the Hessians shared by every method, ProxSparse's masks, the demo's
runs and figure."""

import json
import os
from dataclasses import asdict

import pytest
import torch

from sparseopt.cli import main
from sparseopt.patterns import NM
from sparseopt_torch import find_layers, get_weight, load_packed
from sparseopt_torch.hf import Experiment, calibration_batches, prune_folder, resolve_model
from sparseopt_torch.prune import PruneSettings

TINY = ["--n-calib", "8", "--refine-steps", "2", "--seq-len", "16", "--batch-size", "8"]


def _experiment(**kw):
    folder, _ = resolve_model("minilm")
    return Experiment(model=folder, **{"unit": "sentences", "n_calib": 8, "n_eval": 24,
                                       "seq_len": 16, "batch_size": 8, **kw})


def test_prune_export_commands_on_the_minilm_preset(tmp_path, minilm, capsys):
    out = str(tmp_path / "cmp")
    assert main(["prune", "--model", "minilm", "--out", out, "--method", "magnitude",
                 "--method", "wanda", *TINY]) == 0
    experiment = json.load(open(os.path.join(out, "experiment.json")))
    assert experiment["model"] == resolve_model("minilm")[0] and os.path.isdir(experiment["model"])
    assert (experiment["unit"], experiment["n_calib"], experiment["seq_len"]) == ("sentences", 8, 16)
    for method in ("magnitude", "wanda"):
        rep = json.load(open(os.path.join(out, method, "report.json")))
        assert len(rep["layers"]) == 36
        assert rep["totals"]["rel_loss_gd"] <= rep["totals"]["rel_loss"] + 1e-9
    # a rerun with other settings in the same folder is refused in one line, exit status 2
    capsys.readouterr()
    with pytest.raises(SystemExit, match="other settings") as exc:
        main(["prune", "--model", "minilm", "--out", out, "--method", "wanda", "--n-calib", "9",
              *TINY[2:]])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("sparseopt prune: ") and "n_calib (saved 8, now 9)" in err
    assert err.count("\n") == 1

    packed = str(tmp_path / "wanda24.safetensors")
    assert main(["export", os.path.join(out, "wanda"), "--packed", packed]) == 0
    assert "53.125%" in capsys.readouterr().out  # float32: 2 * (32 + 2) / 128 of dense
    state = load_packed(packed)
    body_names = list(find_layers(minilm[0].auto_model))
    for name in body_names:
        assert NM(2, 4).satisfied(state[name + ".weight"].numpy())
    ckpt = str(tmp_path / "ckpt")  # the preset's folder is a sentence-transformers folder
    assert main(["export", os.path.join(out, "wanda"), "--dense", ckpt]) == 0
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(ckpt, device="cpu")
    for name, mod in find_layers(st[0].auto_model).items():
        assert torch.equal(get_weight(mod), state[name + ".weight"]), name


def test_calibration_sentences_are_the_demo_split(minilm):
    """The preset's calibration: the first n_calib sentences of one permutation by seed (the
    old comparison's calibration_eval_split), batched by token count."""
    from sparseopt_torch.data import calibration_eval_split, token_batches

    experiment = _experiment(n_calib=12, n_eval=4, batch_size=5)
    calib, _ = calibration_eval_split(12, 4, seed=0)
    expected = token_batches(minilm.tokenizer, calib, batch_size=5, max_length=16,
                             by_length=True)
    batches = calibration_batches(experiment, minilm.tokenizer)
    assert len(batches) == len(expected) == 3
    for a, b in zip(batches, expected, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in b)
    with pytest.raises(ValueError, match="unit must be one of"):
        _experiment(unit="tokens")
    with pytest.raises(ValueError, match="n_eval"):
        _experiment(unit="windows")
    with pytest.raises(ValueError, match="n_calib must be >= 1"):
        _experiment(n_calib=0)


def test_hessians_are_collected_once_and_shared_bit_for_bit(tmp_path, monkeypatch):
    """Independent mode: the first run collects the dense Hessians, the others (and
    ProxSparse's local losses) reuse them; every layer equals a run of its own."""
    from safetensors.torch import load_file

    from sparseopt_torch import hessians as hessians_module
    from sparseopt_torch import prune as prune_module

    experiment = _experiment()
    settings = PruneSettings(refine_steps=2, modules=r"^encoder\.layer\.5\.")
    e2e = {"steps": 2, "lam1": 2.0, "lam2": 0.0, "lr": 1e-4}
    calls = []
    original = hessians_module.collect_hessians
    monkeypatch.setattr(prune_module, "collect_hessians",
                        lambda *a, **k: calls.append(1) or original(*a, **k))
    shared = prune_folder(experiment, str(tmp_path / "a"), ["magnitude", "wanda", "proxsparse"],
                          settings, proxsparse=e2e, progress=False)
    assert len(calls) == 1  # one block, collected once for the three runs
    alone = prune_folder(experiment, str(tmp_path / "b"), ["wanda"], settings, progress=False)
    assert len(calls) == 2
    for a, b in zip(shared["wanda"].records, alone["wanda"].records, strict=True):
        assert (a.name, a.loss, a.loss_gd, a.n_tokens) == (b.name, b.loss, b.loss_gd, b.n_tokens)
        wa = load_file(os.path.join(tmp_path, "a", "wanda", "layers", a.name + ".safetensors"))
        wb = load_file(os.path.join(tmp_path, "b", "wanda", "layers", b.name + ".safetensors"))
        assert all(torch.equal(wa[k], wb[k]) for k in wa)
    learned = shared["proxsparse"]
    assert len(learned.records) == 6 and learned.settings["method"] == "masks"
    assert os.path.exists(os.path.join(tmp_path, "a", "proxsparse", "proxsparse.json"))
    for rec in learned.records:
        W = load_file(os.path.join(tmp_path, "a", "proxsparse", "layers",
                                   rec.name + ".safetensors"))["W_nogd"]
        assert NM(2, 4).satisfied(W.numpy()), rec.name


def test_prox_paper_variant_runs_the_paper_schedule(tmp_path):
    from sparseopt.layer.prox import AUTO_CLIP, SCHEDULES

    settings = PruneSettings(refine_steps=2,
                             modules=r"^encoder\.layer\.0\.attention\.self\.query$")
    res = prune_folder(_experiment(), str(tmp_path / "cmp"), ["prox-paper", "prox"], settings,
                       progress=False)
    (paper,), (fast,) = res["prox-paper"].records, res["prox"].records
    assert paper.method == fast.method == "prox"
    for rec, name in ((paper, "paper"), (fast, "fast")):  # the variant's options arrived
        assert rec.info["schedule"] == name
        schedule = asdict(SCHEDULES[name])
        for key in ("momentum", "beta_start", "beta_tail", "stop_fraction"):
            if schedule[key] is not None:
                assert rec.info[key] == schedule[key], key
        assert rec.info["clip"] in ((0,) if name == "paper" else (0, AUTO_CLIP))
        clipped = rec.info["clip"] > 0 and schedule["beta_clip"] is not None
        assert rec.info["beta"] == schedule["beta_clip" if clipped else "beta"]
        assert rec.info["clip_auto"] == (schedule["clip"] == "auto")
        assert rec.info["stop_reason"] == "W is N:M" or (
            name == "fast" and rec.info["stop_reason"].startswith("nm_fraction >= stop_fraction"))
    assert fast.info["nit"] < paper.info["nit"]
    from sparseopt_torch.experiment import per_layer_rows, plot_per_layer

    rows = per_layer_rows(str(tmp_path / "cmp"))
    assert [r["method"] for r in rows] == ["prox", "prox+GD", "prox-paper", "prox-paper+GD"]
    png = plot_per_layer(rows, str(tmp_path / "fig4.png"))
    assert os.path.getsize(png) > 1000


def test_full_demo_runs_the_paper_schedule_beside_the_default():
    """Issue 12 item 4: the full demo's table has every method, prox with its default
    schedule and Alg. 2 as published (beta = 1.01), and leaves out only prox variants: the
    two slow ones and the App. C regularizers."""
    from sparseopt.layer.prox import SCHEDULES
    from sparseopt_torch.demo_section import demo_runs
    from sparseopt_torch.experiment import VARIANTS, all_methods, all_runs

    runs = demo_runs()
    assert "prox" in runs and "prox-paper" in runs
    assert set(all_methods()) <= set(runs)
    assert VARIANTS["prox-paper"] == ("prox", {"schedule": "paper"})
    assert SCHEDULES["paper"].beta == 1.01
    assert set(all_runs()) - set(runs) == {"prox-sparsegpt", "prox-noclip", "prox-R0",
                                           "prox-R1", "prox-R2"}
