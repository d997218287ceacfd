"""Masked distillation (issue 45 item 2): ``sparseopt finetune RUN`` on the runs of a tiny random
Llama folder made through the CLI. The masks never change (float32 and float64), the KL to the
dense model on the calibration sequences goes down, an interrupted run resumes bit for bit,
``sparseopt eval`` / ``export`` read the finetuned run, a step that would fill a pruned weight
is caught, bad input is one line and exit status 2."""

import json
import os
import shutil
import sys
import tomllib
from importlib.metadata import EntryPoint

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import sparseopt.cli
from _models import save_tiny_model
from sparseopt import NM
from sparseopt.cli import COMMAND_GROUP, main

#: Four calibration sequences of 16 tokens in two batches, wanda with 2 steps of +GD: the
#: run wanda+GD, which finetune starts from.
PRUNE = ["--method", "wanda", "--n-calib", "4", "--seq-len", "16", "--batch-size", "2",
         "--refine-steps", "2", "--device", "cpu"]
#: A learning rate large enough for a random model to learn something in a few steps.
LR = 1e-3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Interrupted(Exception):
    """A crash in the middle of the training (not a ValueError: the CLI lets it through)."""


@pytest.fixture(autouse=True)
def finetune_command(monkeypatch):
    """The commands of this checkout's pyproject.toml, also before the package is installed
    again (the installed entry points are those of the last ``pip install -e``)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        declared = tomllib.load(fh)["project"]["entry-points"][COMMAND_GROUP]
    assert declared["finetune"] == "sparseopt_torch.cli:add_finetune"
    installed = sparseopt.cli._command_entry_points()
    eps = {name: EntryPoint(name, value, COMMAND_GROUP) for name, value in declared.items()}
    monkeypatch.setattr(sparseopt.cli, "_command_entry_points", lambda: {**installed, **eps})


def _text(path, n=400):
    from sparseopt_torch.data import docstring_sentences

    path.write_text("\n".join(docstring_sentences()[:n]) + "\n")
    return str(path)


def _prune(tmp, dtype):
    folder = save_tiny_model("llama", str(tmp / "llama"), dtype=dtype)
    out = str(tmp / "out")
    assert main(["prune", "--model", folder, "--out", out, "--calibration",
                 _text(tmp / "calib.txt"), *PRUNE]) == 0
    return out


@pytest.fixture(scope="module")
def pruned(tmp_path_factory):
    """A finished float32 comparison folder with the run ``wanda`` (+GD). Tests copy it."""
    return _prune(tmp_path_factory.mktemp("ft32"), torch.float32)


@pytest.fixture(scope="module")
def pruned64(tmp_path_factory):
    return _prune(tmp_path_factory.mktemp("ft64"), torch.float64)


def _copy(out, tmp_path, name="out"):
    dst = str(tmp_path / name)
    shutil.copytree(out, dst)
    return dst


def _weights(run):
    names = json.load(open(os.path.join(run, "run.json")))["layers"]
    return {n: load_file(os.path.join(run, "layers", n + ".safetensors"))["W"] for n in names}


def _module():
    import sparseopt_torch.finetune  # noqa: F401

    return sys.modules["sparseopt_torch.finetune"]


# ------------------------------------------------------------------------- the loss

def test_distillation_loss_is_tau_squared_kl_of_the_softened_distributions():
    from sparseopt_torch.finetune import distillation_loss

    g = torch.Generator().manual_seed(0)
    student = torch.randn(2, 5, 11, generator=g, dtype=torch.float64, requires_grad=True)
    teacher = torch.randn(2, 5, 11, generator=g, dtype=torch.float64)
    keep = torch.ones(2, 5, dtype=torch.long)
    keep[1, 3:] = 0
    for tau in (1.0, 2.5):
        s, t = student.detach().numpy() / tau, teacher.numpy() / tau
        log_s = s - np.log(np.exp(s).sum(-1, keepdims=True))
        log_t = t - np.log(np.exp(t).sum(-1, keepdims=True))
        kl = (np.exp(log_t) * (log_t - log_s)).sum(-1)  # (B, T), by hand
        want = tau ** 2 * kl[keep.numpy() != 0].mean()
        got = distillation_loss(student, teacher, tau, keep)
        assert got.requires_grad
        np.testing.assert_allclose(float(got.detach()), want, rtol=1e-12)
        np.testing.assert_allclose(float(distillation_loss(student, teacher, tau).detach()),
                                   tau ** 2 * kl.mean(), rtol=1e-12)
    assert float(distillation_loss(teacher, teacher)) == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError, match="shape"):
        distillation_loss(student, teacher[:, :4])


def test_loss_at_tau_1_is_what_eval_reports(pruned64):
    """On a float64 model the loss of the start weights on a batch is kl_to_dense on it."""
    from sparseopt_torch.evaluate import kl_to_dense
    from sparseopt_torch.finetune import distillation_loss
    from sparseopt_torch.hf import Experiment, calibration_batches
    from sparseopt_torch.models import load_model
    from sparseopt_torch.rundir import load_pruned, read_experiment

    experiment = Experiment.from_json(read_experiment(pruned64))
    dense, tok, _ = load_model(experiment.model)
    pruned_model, _, _ = load_model(experiment.model)
    load_pruned(pruned_model, os.path.join(pruned64, "wanda"))
    batch = calibration_batches(experiment, tok)[0]
    with torch.no_grad():
        got = distillation_loss(pruned_model(**batch).logits, dense(**batch).logits)
    assert got.dtype == torch.float64
    assert float(got) == pytest.approx(kl_to_dense(pruned_model, dense, batch), rel=1e-9)
    assert float(got) > 0


# ------------------------------------------------------------------------- the run

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_masks_never_change_and_the_calibration_kl_goes_down(pruned, pruned64, tmp_path, dtype):
    from sparseopt_torch.finetune import FinetuneSettings, finetune

    out = _copy(pruned if dtype == "float32" else pruned64, tmp_path)
    source = _weights(os.path.join(out, "wanda"))
    target = finetune(os.path.join(out, "wanda"), FinetuneSettings(lr=LR, steps=8),
                      progress=False)
    assert target == os.path.join(out, "wanda+GD+FT")  # the +GD weights were the start
    tuned = _weights(target)
    assert sorted(tuned) == sorted(source) and len(tuned) == 14  # 7 linears x 2 blocks
    moved = 0
    for name, W in tuned.items():
        assert W.dtype == getattr(torch, dtype), name
        assert not W[source[name] == 0].any(), name  # no pruned weight filled
        assert NM(2, 4).satisfied(W), name
        moved += int((W != source[name]).sum())
    assert moved > 0  # the kept weights trained
    record = json.load(open(os.path.join(target, "finetune.json")))
    assert record["step"] == list(range(8)) and len(record["loss"]) == 8
    assert record["info"]["kl_end"] < 0.8 * record["info"]["kl_start"], record["info"]
    assert np.mean(record["loss"][-2:]) < np.mean(record["loss"][:2]), record["loss"]
    assert record["settings"]["source"] == "wanda+GD"
    # the recorded KL, recomputed independently from the saved weights
    from sparseopt_torch.evaluate import kl_to_dense
    from sparseopt_torch.hf import Experiment, calibration_batches
    from sparseopt_torch.models import load_model
    from sparseopt_torch.rundir import load_pruned, read_experiment

    experiment = Experiment.from_json(read_experiment(out))
    dense, tok, _ = load_model(experiment.model)
    model, _, _ = load_model(experiment.model)
    load_pruned(model, target)
    batches = calibration_batches(experiment, tok)
    assert kl_to_dense(model, dense, batches) == pytest.approx(record["info"]["kl_end"],
                                                               rel=1e-6)
    assert os.path.getsize(os.path.join(target, "loss.png")) > 1000
    with open(os.path.join(target, "loss.png"), "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    leftovers = [f for f in os.listdir(target) if f.startswith(".") or f.endswith(".pt")]
    assert leftovers == []  # the teacher's logits and the checkpoint are gone


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_masks_never_change_on_cuda(pruned, pruned64, tmp_path, dtype):
    """The same training on CUDA: no pruned weight filled, every layer 2:4, the kept weights
    moved, the calibration KL down; the saved weights keep the model's dtype."""
    from sparseopt_torch.finetune import FinetuneSettings, finetune

    out = _copy(pruned if dtype == "float32" else pruned64, tmp_path)
    source = _weights(os.path.join(out, "wanda"))
    target = finetune(os.path.join(out, "wanda"), FinetuneSettings(lr=LR, steps=8),
                      device="cuda", progress=False)
    tuned = _weights(target)
    assert sorted(tuned) == sorted(source)
    moved = 0
    for name, W in tuned.items():
        assert W.dtype == getattr(torch, dtype), name
        assert not W[source[name] == 0].any(), name
        assert NM(2, 4).satisfied(W), name
        moved += int((W != source[name]).sum())
    assert moved > 0
    info = json.load(open(os.path.join(target, "finetune.json")))["info"]
    assert info["kl_end"] < 0.8 * info["kl_start"], info


def test_a_time_budget_trains_until_it_is_spent(pruned, tmp_path):
    from sparseopt_torch.finetune import FinetuneSettings, finetune

    out = _copy(pruned, tmp_path)
    source = _weights(os.path.join(out, "wanda"))
    target = finetune(os.path.join(out, "wanda"), FinetuneSettings(lr=LR, minutes=0.005),
                      progress=False)
    record = json.load(open(os.path.join(target, "finetune.json")))
    assert record["settings"]["minutes"] == 0.005 and record["settings"]["steps"] is None
    # the steps stop once 0.3 s of training have passed, not before
    assert record["info"]["time"] >= 0.3
    assert record["step"] == list(range(record["info"]["steps"]))
    for name, W in _weights(target).items():
        assert not W[source[name] == 0].any(), name


def test_a_step_that_fills_a_pruned_weight_is_caught(pruned, tmp_path, monkeypatch):
    """Mutation: without masking of the gradients and the weights, AdamW fills pruned weights,
    and the check after the step stops the run before anything is saved."""
    import sparseopt_torch.reconstruct as reconstruct
    from sparseopt_torch.finetune import FinetuneSettings, finetune

    out = _copy(pruned, tmp_path)
    monkeypatch.setattr(reconstruct, "_mask_", lambda tensors, masks: None)
    with pytest.raises(RuntimeError, match="finetune: step 0 made a pruned weight of layer"):
        finetune(os.path.join(out, "wanda"), FinetuneSettings(lr=LR, steps=3), progress=False)
    assert not os.path.exists(os.path.join(out, "wanda+GD+FT", "report.json"))


def test_interrupted_run_resumes_bit_identical(pruned, tmp_path, monkeypatch):
    ft = _module()
    real = ft.distillation_loss
    argv = ["--lr", str(LR), "--steps", "7", "--seed", "3"]
    whole = _copy(pruned, tmp_path, "whole")
    assert main(["finetune", os.path.join(whole, "wanda"), *argv]) == 0

    cut = _copy(pruned, tmp_path, "cut")
    calls = []

    def crash_at_4(*args, **kwargs):
        if len(calls) == 4:
            raise Interrupted
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ft, "distillation_loss", crash_at_4)
    # a checkpoint after every step
    monkeypatch.setattr(ft, "CHECKPOINT_SECONDS", 0.0)
    with pytest.raises(Interrupted):
        main(["finetune", os.path.join(cut, "wanda"), *argv])
    state = os.path.join(cut, "wanda+GD+FT", "finetune_state.pt")
    assert torch.load(state, weights_only=True)["k"] == 4
    assert not os.path.exists(os.path.join(cut, "wanda+GD+FT", "report.json"))

    calls.clear()
    monkeypatch.setattr(ft, "distillation_loss", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main(["finetune", os.path.join(cut, "wanda"), *argv]) == 0
    assert len(calls) == 3  # it continued at step 4
    assert not os.path.exists(state)
    a, b = (_weights(os.path.join(o, "wanda+GD+FT")) for o in (whole, cut))
    for name in a:
        assert torch.equal(a[name], b[name]), name
    ra, rb = (json.load(open(os.path.join(o, "wanda+GD+FT", "finetune.json")))
              for o in (whole, cut))
    assert (ra["step"], ra["loss"]) == (rb["step"], rb["loss"])
    assert ra["info"]["kl_end"] == rb["info"]["kl_end"]

    # a rerun of the finished run trains nothing; other settings are refused, by name
    calls.clear()
    assert main(["finetune", os.path.join(cut, "wanda"), *argv]) == 0 and calls == []
    with pytest.raises(SystemExit, match=r"steps \(saved 7, now 8\)"):
        main(["finetune", os.path.join(cut, "wanda"), "--lr", str(LR), "--steps", "8",
              "--seed", "3"])
    # ... and so is a source run whose weights changed since (pruned again)
    from safetensors.torch import save_file

    path = os.path.join(cut, "wanda", "layers", "model.layers.0.mlp.up_proj.safetensors")
    tensors = load_file(path)
    tensors["W"] = tensors["W"] * 0.5
    save_file(tensors, path)
    with pytest.raises(SystemExit, match=r"source_sha256 \(saved"):
        main(["finetune", os.path.join(cut, "wanda"), *argv])


def test_eval_and_export_read_the_finetuned_run(pruned, tmp_path):
    from transformers import AutoModelForCausalLM

    from sparseopt_torch.layers import find_layers, get_weight

    out = _copy(pruned, tmp_path)
    assert main(["finetune", os.path.join(out, "wanda"), "--lr", str(LR), "--steps", "4"]) == 0
    # a second budget beside it, under its own name
    assert main(["finetune", os.path.join(out, "wanda"), "--lr", str(LR), "--steps", "2",
                 "--name", "wanda+GD+FT2"]) == 0
    assert main(["eval", out, "--seq-len", "16", "--max-tokens", "256"]) == 0
    rows = {r["run"]: r for r in json.load(open(os.path.join(out, "comparison.json")))["rows"]}
    assert set(rows) == {"dense", "wanda", "wanda+GD", "wanda+GD+FT", "wanda+GD+FT2"}
    assert rows["wanda+GD+FT"]["kl"] != rows["wanda+GD+FT2"]["kl"]
    assert np.isfinite(rows["wanda+GD+FT"]["perplexity"]) and rows["wanda+GD+FT"]["kl"] > 0
    assert rows["wanda+GD+FT"]["kl"] != rows["wanda+GD"]["kl"]

    run = os.path.join(out, "wanda+GD+FT")
    dense_dir, packed = str(tmp_path / "export"), str(tmp_path / "packed.safetensors")
    assert main(["export", run, "--dense", dense_dir, "--packed", packed]) == 0
    model = AutoModelForCausalLM.from_pretrained(dense_dir)
    tuned = _weights(run)
    for name, mod in find_layers(model, list(tuned)).items():
        W = get_weight(mod).detach()
        assert torch.equal(W, tuned[name]), name
        assert NM(2, 4).satisfied(W), name
    assert os.path.getsize(packed) > 0


# ------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("extra, says", [
    (["--lr", "0"], "--lr must be a positive number, got 0.0"),
    (["--lr", "nan"], "--lr must be a positive number, got nan"),
    (["--steps", "0"], "--steps must be a positive integer, got 0"),
    (["--minutes", "-1"], "--minutes must be a positive number, got -1.0"),
    (["--temperature", "0"], "--temperature must be a positive number, got 0.0"),
    (["--steps", "2", "--minutes", "1"], "give --steps or --minutes, not both"),
    (["--device", "nonsense"], "is not a torch device"),
    (["--name", "../x"], "name must be a folder name (no path), got '../x'"),
    (["--name", "wanda"], "holds a run of `sparseopt prune`: choose another name"),
])
def test_bad_arguments_are_one_line_exit_2(pruned, tmp_path, capsys, extra, says):
    out = _copy(pruned, tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["finetune", os.path.join(out, "wanda"), *extra])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sparseopt finetune: "), err
    assert says in err and "Traceback" not in err
    assert sorted(os.listdir(out)) == sorted(os.listdir(pruned))  # nothing written


def test_a_folder_that_is_no_finished_run_is_one_line_exit_2(pruned, tmp_path, capsys):
    out = _copy(pruned, tmp_path)
    os.remove(os.path.join(out, "wanda", "report.json"))  # as if it had not finished
    for run, says in ((str(tmp_path / "missing"), "does not exist"),
                      (str(tmp_path), "has no run.json"),
                      (os.path.join(out, "wanda"), "is not finished")):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(["finetune", run])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err


def test_a_damaged_checkpoint_is_one_line_exit_2(pruned, tmp_path, capsys):
    out = _copy(pruned, tmp_path)
    os.makedirs(os.path.join(out, "wanda+GD+FT"))
    with open(os.path.join(out, "wanda+GD+FT", "finetune_state.pt"), "wb") as fh:
        fh.write(b"not a checkpoint")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["finetune", os.path.join(out, "wanda"), "--steps", "2"])
    assert exc.value.code == 2
    # the last line (before it: the progress bar of transformers' loading of the model)
    err = capsys.readouterr().err.rstrip("\n").split("\n")[-1]
    assert err.startswith("sparseopt finetune: ") and "Traceback" not in err, err
    assert "is not a training checkpoint" in err and err.endswith("remove it to start again")


def test_settings_refuse_bad_values():
    from sparseopt_torch.finetune import FinetuneSettings

    for kwargs, says in (({"lr": 0.0}, "lr"), ({"steps": 0}, "steps"),
                         ({"minutes": 0.0}, "minutes"), ({"temperature": -1.0}, "temperature"),
                         ({"steps": 1, "minutes": 1.0}, "not both"), ({"seed": 1.5}, "seed")):
        with pytest.raises(ValueError, match=says):
            FinetuneSettings(**kwargs)


def test_the_source_label_of_every_refinement(tmp_path):
    """A run refined by +GD steps, by the exact solve (refine_steps "exact"), by +BR or by
    both is finetuned from its refined weights under the label eval gives them."""
    import json

    from sparseopt_torch.finetune import _source
    from sparseopt_torch.rundir import refinements

    cases = [({"refine_steps": 0}, "", "nogd"), ({"refine_steps": 100}, "+GD", "gd"),
             ({"refine_steps": "exact"}, "+GD", "gd"),
             ({"refine_steps": 0, "block_steps": 5}, "+BR", "gd"),
             ({"refine_steps": "exact", "block_steps": 5}, "+GD+BR", "gd")]
    for settings, suffix, variant in cases:
        assert refinements(settings) == suffix
        run = tmp_path / "prox"
        run.mkdir(exist_ok=True)
        (run / "report.json").write_text(json.dumps({"settings": settings}))
        assert _source(str(run)) == ("prox" + suffix, variant)
