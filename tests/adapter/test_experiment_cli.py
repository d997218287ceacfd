"""The MiniLM comparison through the CLI: prune, eval, export (tiny settings)."""

import json
import os

import pytest
import torch

from sparseopt.cli import main
from sparseopt.patterns import NM
from sparseopt_torch import find_layers, get_weight, load_packed
from sparseopt_torch.experiment import ExperimentConfig, evaluate_runs, proxsparse_run

TINY = ["--n-calib", "8", "--n-eval", "24", "--refine-steps", "2", "--max-length", "16",
        "--batch-size", "8"]


def test_prune_eval_export_commands(tmp_path, minilm, capsys):
    out = str(tmp_path / "cmp")
    assert main(["prune", "--out", out, "--method", "magnitude", "--method", "wanda", *TINY]) == 0
    assert main(["prune", "--out", out, "--method", "proxsparse", "--proxsparse-steps", "2", *TINY]) == 0
    assert os.path.exists(os.path.join(out, "proxsparse", "proxsparse.json"))
    for method in ("magnitude", "wanda"):
        rep = json.load(open(os.path.join(out, method, "report.json")))
        assert len(rep["layers"]) == 36
        assert rep["totals"]["rel_loss_gd"] <= rep["totals"]["rel_loss"] + 1e-9
    assert main(["eval", out]) == 0
    table = open(os.path.join(out, "comparison.md")).read()
    for label in ("| magnitude |", "| magnitude+GD |", "| wanda |", "| wanda+GD |",
                  "| proxsparse |", "| proxsparse+GD |"):
        assert label in table
    rows = json.load(open(os.path.join(out, "comparison.json")))["rows"]
    assert all(0 < r["mean_cosine"] <= 1 and -1 <= r["spearman"] <= 1 for r in rows)
    assert os.path.getsize(os.path.join(out, "fig4_per_layer.png")) > 1000
    # a rerun with other settings in the same folder is refused
    with pytest.raises(ValueError, match="other settings"):
        main(["prune", "--out", out, "--method", "wanda", "--n-calib", "9", *TINY[2:]])

    packed = str(tmp_path / "wanda24.safetensors")
    assert main(["export", os.path.join(out, "wanda"), "--packed", packed]) == 0
    assert "53.125%" in capsys.readouterr().out  # float32: 2 * (32 + 2) / 128 of dense
    state = load_packed(packed)
    body_names = list(find_layers(minilm[0].auto_model))
    for name in body_names:
        W = state[name + ".weight"]
        assert NM(2, 4).satisfied(W.numpy())
    # the dense model (shared fixture) was left untouched by every command
    assert not NM(2, 4).satisfied(get_weight(find_layers(minilm[0].auto_model)[body_names[0]])
                                  .numpy())


def test_proxsparse_run_learns_24_masks_and_is_evaluated(tmp_path, minilm):
    out = str(tmp_path / "cmp")
    config = ExperimentConfig.make(n_calib=8, n_eval=24, batch_size=8, max_length=16,
                                   refine_steps=2, modules=r"^encoder\.layer\.5\.")
    res, learned = proxsparse_run(out, config, model=minilm, progress=False,
                                  settings={"steps": 3, "lam1": 2.0, "lam2": 0.0, "lr": 1e-4})
    # only the six layers of the last block (the config's modules) are learned and pruned
    assert len(res.records) == 6 and sorted(learned.masks) == sorted(r.name for r in res.records)
    assert all(name.startswith("encoder.layer.5.") for name in learned.masks)
    for name, mask in learned.masks.items():
        assert NM(2, 4).satisfied(mask.numpy().astype(float)), name
    rows = evaluate_runs(out, model=minilm, progress=False)
    assert [r["method"] for r in rows] == ["proxsparse", "proxsparse+GD"]
    assert len(rows[0]["per_layer"]) == 6
    with pytest.raises(ValueError, match="modules must be a regular expression"):
        ExperimentConfig.make(modules=["encoder.layer.5.output.dense"])
    # the shared dense model is restored after training and evaluation
    first = get_weight(next(iter(find_layers(minilm[0].auto_model).values())))
    assert not NM(2, 4).satisfied(first.numpy())


def test_calibration_batches_by_length(minilm):
    """A comparison cuts its calibration batches from the sentences sorted by token count;
    one saved before by_length existed (no such key) keeps the split's order."""
    from sparseopt_torch.data import calibration_eval_split, token_batches
    from sparseopt_torch.experiment import _calibration

    config = ExperimentConfig.make(n_calib=12, n_eval=4, batch_size=5, max_length=16)
    assert config["by_length"] is True
    calib, _ = calibration_eval_split(12, 4, seed=0)
    old = ExperimentConfig({k: v for k, v in config.items() if k != "by_length"})
    for cfg, by_length in ((config, True), (old, False)):
        _, _, batches = _calibration(minilm, cfg)
        expected = token_batches(minilm.tokenizer, calib, batch_size=5, max_length=16,
                                 by_length=by_length)
        assert len(batches) == len(expected) == 3
        for a, b in zip(batches, expected, strict=True):
            assert all(torch.equal(a[k], b[k]) for k in b)
    with pytest.raises(ValueError, match="by_length"):
        ExperimentConfig.make(by_length="yes")


def test_prox_paper_variant_runs_the_paper_schedule(tmp_path, minilm):
    from sparseopt.layer.prox import AUTO_CLIP, SCHEDULES
    from sparseopt_torch.experiment import prune_runs

    config = ExperimentConfig.make(n_calib=8, n_eval=24, batch_size=8, max_length=16,
                                   refine_steps=2,
                                   modules=r"^encoder\.layer\.0\.attention\.self\.query$")
    res = prune_runs(str(tmp_path / "cmp"), ["prox-paper", "prox"], config, model=minilm,
                     progress=False)
    (paper,), (fast,) = res["prox-paper"].records, res["prox"].records
    assert paper.method == fast.method == "prox"
    for rec, name in ((paper, "paper"), (fast, "fast")):  # the variant's options arrived
        assert rec.info["schedule"] == name
        schedule = SCHEDULES[name]
        for key in ("momentum", "beta_start", "beta_tail", "stop_fraction"):
            if schedule[key] is not None:
                assert rec.info[key] == schedule[key], key
        # the growth while the groups decide: beta_clip where the steps were clipped
        assert rec.info["clip"] in ((0,) if name == "paper" else (0, AUTO_CLIP))
        clipped = rec.info["clip"] > 0 and schedule["beta_clip"] is not None
        assert rec.info["beta"] == schedule["beta_clip" if clipped else "beta"]
        assert rec.info["clip_auto"] == (schedule["clip"] == "auto")
        # the fast schedule may stop at 99% of the groups N:M and project the rest
        assert rec.info["stop_reason"] == "W is N:M" or (
            name == "fast" and rec.info["stop_reason"].startswith("nm_fraction >= stop_fraction"))
    assert fast.info["nit"] < paper.info["nit"]


def test_proxsparse_run_reuses_the_hessians_of_prune_runs(tmp_path, minilm, monkeypatch):
    """The demo's wiring: ``prune_runs(keep_hessians=True)`` leaves the dense Hessians on
    every result, and ``proxsparse_run`` given them takes its local losses from them (no
    second collection) and records the losses it records without them, bit for bit."""
    from sparseopt_torch import prune as prune_module
    from sparseopt_torch.experiment import prune_runs

    config = ExperimentConfig.make(n_calib=8, n_eval=24, batch_size=8, max_length=16,
                                   refine_steps=2, modules=r"^encoder\.layer\.5\.")
    settings = {"steps": 2, "lam1": 2.0, "lam2": 0.0, "lr": 1e-4}
    runs = prune_runs(str(tmp_path / "a"), ["magnitude", "wanda"], config, model=minilm,
                      progress=False, keep_hessians=True)
    hs = runs["magnitude"].hessians
    assert hs is not None and runs["wanda"].hessians is hs and len(hs.H) == 6
    assert prune_runs(str(tmp_path / "c"), ["magnitude"], config, model=minilm,
                      progress=False)["magnitude"].hessians is None  # the default keeps none
    plain, _ = proxsparse_run(str(tmp_path / "b"), config, model=minilm, progress=False,
                              settings=settings)
    reused = []
    original = prune_module._reused
    monkeypatch.setattr(prune_module, "_reused",
                        lambda *args: reused.append(args[1]) or original(*args))
    shared, _ = proxsparse_run(str(tmp_path / "a"), config, model=minilm, progress=False,
                               settings=settings, hessians=hs)
    assert sorted(n for names in reused for n in names) == sorted(hs.H)
    for a, b in zip(plain.records, shared.records, strict=True):
        assert (a.name, a.loss, a.loss_gd, a.n_tokens) == (b.name, b.loss, b.loss_gd, b.n_tokens)


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
    assert SCHEDULES["paper"]["beta"] == 1.01
    assert set(all_runs()) - set(runs) == {"prox-sparsegpt", "prox-noclip", "prox-R0",
                                           "prox-R1", "prox-R2"}
