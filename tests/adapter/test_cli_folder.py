"""A user's own model folder through the CLI: prune (both modes), eval, export, reload,
resume after SIGKILL, bad input (issue 10)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from _models import ARCHITECTURES, save_tiny_model
from sparseopt.cli import main
from sparseopt.patterns import NM
from sparseopt_torch.layers import find_layers, get_weight


def _text(path, n=400, seed=0):
    """A plain-text calibration file, one document per line (docstring sentences)."""
    from sparseopt_torch.data import docstring_sentences

    docs = docstring_sentences()[seed:seed + n]
    path.write_text("\n".join(docs) + "\n")
    return str(path)


def _auto(folder):
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    from sparseopt_torch.models import is_causal_lm

    cls = AutoModelForCausalLM if is_causal_lm(AutoConfig.from_pretrained(folder)) else AutoModel
    return cls.from_pretrained(folder).eval()


TINY = ["--n-calib", "4", "--seq-len", "16", "--batch-size", "2"]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_architecture_prunes_exports_and_reloads_as_24(tmp_path, arch):
    folder = save_tiny_model(arch, str(tmp_path / arch))
    calib = _text(tmp_path / "calib.txt")
    out = str(tmp_path / "run")
    assert main(["prune", "--model", folder, "--out", out, "--method", "wanda",
                 "--calibration", calib, "--refine-steps", "2", *TINY]) == 0
    ckpt = str(tmp_path / "ckpt")
    assert main(["export", os.path.join(out, "wanda"), "--dense", ckpt]) == 0
    model = _auto(ckpt)
    settings = json.load(open(os.path.join(out, "wanda", "run.json")))
    layers = find_layers(model, settings["layers"])
    assert len(layers) >= 4
    for name, mod in layers.items():
        assert NM(2, 4).satisfied(get_weight(mod).float().numpy()), name
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    assert cfg["sparsity"]["pattern"] == "2:4" and cfg["sparsity"]["method"] == "wanda"


def test_eval_holds_one_model_at_a_time(tmp_path, monkeypatch):
    """sparseopt eval frees the dense model before it loads a pruned copy, and each pruned
    copy before the next (the KL uses the dense logits stored in files, which are removed):
    a model that is still alive when load_model is called again fails the test."""
    import gc
    import weakref

    import sparseopt_torch.hf as hf

    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=2)
    calib = _text(tmp_path / "calib.txt")
    out = str(tmp_path / "run")
    assert main(["prune", "--model", folder, "--out", out, "--method", "magnitude",
                 "--method", "wanda", "--calibration", calib, "--refine-steps", "2",
                 *TINY]) == 0
    loaded, alive_at_load = [], []
    real_load = hf.load_model

    def load_model(*args, **kwargs):
        gc.collect()
        alive_at_load.append(sum(ref() is not None for ref in loaded))
        result = real_load(*args, **kwargs)
        loaded.append(weakref.ref(result[0]))
        return result

    monkeypatch.setattr(hf, "load_model", load_model)
    rows = hf.evaluate_folder(out, progress=False)
    assert [r["run"] for r in rows] == ["dense", "magnitude", "magnitude+GD", "wanda",
                                       "wanda+GD"]
    assert alive_at_load == [0, 0, 0, 0, 0]
    assert all(r["kl"] > 0 for r in rows[1:])
    assert not [d for d in os.listdir(out) if d.startswith(".dense-logits")]


def test_eval_reuses_the_rows_of_runs_already_measured(tmp_path, monkeypatch):
    """A second sparseopt eval of the same folder on the same text loads no pruned copy and
    returns the same rows; a run added to the folder is the only one measured, a run whose
    report changed is measured again, and another text measures every run (256 tokens of
    text: the rows' values do not matter here)."""
    import sparseopt_torch.hf as hf

    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=2)
    calib = _text(tmp_path / "calib.txt")
    out = str(tmp_path / "run")
    prune = ["prune", "--model", folder, "--out", out, "--calibration", calib, *TINY]
    assert main([*prune, "--method", "magnitude", "--refine-steps", "2"]) == 0
    first = hf.evaluate_folder(out, progress=False, max_tokens=256)
    loaded = []
    real_load = hf.load_pruned

    def load_pruned(model, run, **kwargs):
        loaded.append((os.path.basename(run), kwargs["variant"]))
        return real_load(model, run, **kwargs)

    monkeypatch.setattr(hf, "load_pruned", load_pruned)
    assert hf.evaluate_folder(out, progress=False, max_tokens=256) == first and loaded == []
    assert main([*prune, "--method", "wanda"]) == 0
    rows = hf.evaluate_folder(out, progress=False, max_tokens=256)
    assert rows[:3] == first and loaded == [("wanda", "nogd")]
    report = os.path.join(out, "magnitude", "report.json")
    with open(report, "a") as fh:
        fh.write("\n")  # the run's report changed: its saved rows no longer count
    loaded.clear()
    again = hf.evaluate_folder(out, progress=False, max_tokens=256)
    assert loaded == [("magnitude", "nogd"), ("magnitude", "gd")] and again == rows
    loaded.clear()
    other = hf.evaluate_folder(out, progress=False, text=calib, max_tokens=256)
    assert len(loaded) == 3 and other[0]["perplexity"] != rows[0]["perplexity"]


@pytest.mark.parametrize("sequential", [False, True])
def test_llama_folder_both_modes_and_eval(tmp_path, sequential, capsys):
    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=2)
    calib = _text(tmp_path / "calib.txt")
    out = str(tmp_path / "run")
    mode = ["--sequential"] if sequential else []
    assert main(["prune", "--model", folder, "--out", out, "--method", "magnitude",
                 "--method", "sparsegpt", "--calibration", calib, *mode, *TINY]) == 0
    assert main(["eval", out]) == 0
    rows = json.load(open(os.path.join(out, "comparison.json")))["rows"]
    assert [r["run"] for r in rows] == ["dense", "magnitude", "sparsegpt"]
    assert rows[0]["kl"] == 0.0 and all(r["kl"] > 0 for r in rows[1:])
    assert all(r["perplexity"] > 1 for r in rows)
    ckpt = str(tmp_path / "ckpt")
    assert main(["export", os.path.join(out, "sparsegpt"), "--dense", ckpt]) == 0
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ckpt)
    for name in json.load(open(os.path.join(out, "sparsegpt", "run.json")))["layers"]:
        W = get_weight(find_layers(model, [name])[name])
        assert NM(2, 4).satisfied(W.numpy()), name
    # a rerun with other data in the same folder is refused, naming what differs
    with pytest.raises(SystemExit, match=r"n_calib \(saved 4, now 5\)"):
        main(["prune", "--model", folder, "--out", out, "--method", "magnitude",
              "--calibration", calib, "--n-calib", "5", *TINY[2:], *mode])


def _refused(capsys, argv, match):
    """``main(argv)`` ends with one line ``sparseopt <command>: ...`` on stderr matching
    ``match`` and exit status 2, not a traceback."""
    capsys.readouterr()
    with pytest.raises(SystemExit, match=match) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err  # (progress bars of the loading before it may precede)
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith(f"sparseopt {argv[0]}: ") and "Traceback" not in err, err
    assert err.count("sparseopt ") == 1, err


def test_bad_input_is_refused_clearly(tmp_path, capsys):
    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=1)
    out = str(tmp_path / "run")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    short = tmp_path / "short.txt"
    short.write_text("a few words only\nand a few more\n")
    base = ["prune", "--model", folder, "--out", out, "--method", "wanda"]
    _refused(capsys, [*base, "--calibration", str(empty), *TINY], "holds no text")
    _refused(capsys, [*base, "--calibration", str(short), *TINY], "fewer than seq_len")
    _refused(capsys, ["prune", "--model", str(tmp_path), "--out", out, "--method", "wanda",
                      *TINY], "no config.json")
    _refused(capsys, ["prune", "--model", str(tmp_path / "nowhere"), "--out", out,
                      "--method", "wanda", *TINY], "is not a folder")
    _refused(capsys, [*base, "--pattern", "2-4", *TINY], "N:M")
    _refused(capsys, ["prune", "--model", folder, "--out", out, *TINY], "give --method")
    _refused(capsys, [*base, "--pattern", "2:3", *TINY], "not divisible by m = 3")
    _refused(capsys, [*base, "--blocks", "nope", *TINY], "blocks='nope'")
    _refused(capsys, [*base, "--n-calib", "0"], "--n-calib must be a positive integer")
    _refused(capsys, [*base, "--device", "gpu7", *TINY], "'gpu7' is not a torch device")
    _refused(capsys, ["prune", "--model", folder, "--out", out, "--method", "proxsparse",
                      "--offload", *TINY], "proxsparse trains the whole model in memory")
    if not torch.cuda.is_available():
        _refused(capsys, [*base, "--device", "cuda", *TINY], "no CUDA GPU")
    # nothing half-written by the refused runs
    assert not os.path.exists(os.path.join(out, "wanda"))
    _refused(capsys, ["export", str(tmp_path), "--dense", str(tmp_path / "x")],
             "has no run.json")
    _refused(capsys, ["export", str(tmp_path)], "give --dense DIR and/or --packed FILE")


def _cli(*args):
    return [sys.executable, "-m", "sparseopt.cli", *args]


def test_a_run_killed_mid_layer_resumes_bit_identical(tmp_path):
    """SIGKILL while a layer is being pruned (prox with many iterations, so each layer takes
    a while): the rerun keeps the finished layers, redoes the rest, and every saved weight
    equals an uninterrupted run's bit for bit."""
    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=1)
    calib = _text(tmp_path / "calib.txt")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = ["--model", folder, "--method", "prox", "--calibration", calib, *TINY]
    full, cut = str(tmp_path / "full"), str(tmp_path / "cut")
    subprocess.run(_cli("prune", "--out", full, *args), check=True, env=env,
                   capture_output=True)
    proc = subprocess.Popen(_cli("prune", "--out", cut, *args), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    layers = os.path.join(cut, "prox", "layers")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if os.path.isdir(layers) and any(f.endswith(".json") for f in os.listdir(layers)):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_done = sum(f.endswith(".json") for f in os.listdir(layers))
    total = len(json.load(open(os.path.join(full, "prox", "run.json")))["layers"])
    assert 1 <= n_done < total, (n_done, total)
    subprocess.run(_cli("prune", "--out", cut, *args), check=True, env=env,
                   capture_output=True)
    from safetensors.torch import load_file

    names = sorted(f for f in os.listdir(os.path.join(full, "prox", "layers"))
                   if f.endswith(".safetensors"))
    assert names == sorted(f for f in os.listdir(layers) if f.endswith(".safetensors"))
    for f in names:
        a = load_file(os.path.join(full, "prox", "layers", f))
        b = load_file(os.path.join(layers, f))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f


def test_offload_shares_the_hessians_bit_for_bit(tmp_path, monkeypatch):
    """Two methods with the weights on disk: the Hessians are collected once (by the first
    run) and every saved weight equals the in-memory run's bit for bit, also one whose
    Hessians do not fit in memory (each method collects its own)."""
    from safetensors.torch import load_file

    from sparseopt_torch import hessians as hessians_module
    from sparseopt_torch import hf
    from sparseopt_torch import prune as prune_module

    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=2)
    calib = _text(tmp_path / "calib.txt")
    args = ["--model", folder, "--method", "wanda", "--method", "sparsegpt", "--calibration",
            calib, "--refine-steps", "2", *TINY]
    calls = []
    original = hessians_module.collect_hessians
    monkeypatch.setattr(prune_module, "collect_hessians",
                        lambda *a, **k: calls.append(1) or original(*a, **k))
    assert main(["prune", "--out", str(tmp_path / "disk"), "--offload", *args]) == 0
    assert len(calls) == 2  # one per block, for both methods
    monkeypatch.setattr(hf, "_hessians_fit", lambda *a: False)
    assert main(["prune", "--out", str(tmp_path / "mem"), *args]) == 0
    assert len(calls) == 2 + 4  # two blocks for each method
    for method in ("wanda", "sparsegpt"):
        names = json.load(open(tmp_path / "mem" / method / "run.json"))["layers"]
        for name in names:
            a = load_file(tmp_path / "disk" / method / "layers" / f"{name}.safetensors")
            b = load_file(tmp_path / "mem" / method / "layers" / f"{name}.safetensors")
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
