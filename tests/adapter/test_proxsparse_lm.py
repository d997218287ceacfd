"""ProxSparse on a causal LM (issue 44 item 4): ``sparseopt prune --method proxsparse`` on a
tiny random Llama folder, ``next_token_loss`` against torch's cross-entropy, resuming an
interrupted run bit for bit, and the options it cannot run with."""

import json
import os
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from _models import save_tiny_model, tiny_config
from sparseopt.cli import main
from sparseopt_torch.layers import find_layers, get_weight

#: A fixed calibration batch (2 sequences of 16 tokens, one batch) and a learning rate large
#: enough for a random model to learn something in 10 steps.
FIXED = ["--n-calib", "2", "--seq-len", "16", "--batch-size", "2", "--proxsparse-steps", "10",
         "--proxsparse-lr", "1e-2", "--proxsparse-lam1", "1", "--refine-steps", "2",
         "--device", "cpu"]
#: Six batches, the default steps (one pass over them), shuffled by the seed.
SIX = ["--n-calib", "12", "--seq-len", "16", "--batch-size", "2", "--proxsparse-lr", "1e-2",
       "--proxsparse-lam1", "2", "--refine-steps", "2"]


class Interrupted(Exception):
    """A crash in the middle of the training (not a ValueError: the CLI lets it through)."""


def _text(path, n=400):
    from sparseopt_torch.data import docstring_sentences

    path.write_text("\n".join(docstring_sentences()[:n]) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """(model folder, calibration file) of a 2-block random Llama."""
    tmp = tmp_path_factory.mktemp("proxsparse_lm")
    return save_tiny_model("llama", str(tmp / "llama")), _text(tmp / "calib.txt")


@pytest.fixture(scope="module")
def fixed_run(llama, tmp_path_factory):
    """A finished CLI run on one fixed batch: its comparison folder (``--out``)."""
    folder, calib = llama
    out = str(tmp_path_factory.mktemp("fixed") / "run")
    assert main(["prune", "--model", folder, "--out", out, "--method", "proxsparse",
                 "--calibration", calib, *FIXED]) == 0
    return out


def _run(out):
    return os.path.join(out, "proxsparse")


def _layers(run):
    """{layer: {"W": ..., "W_nogd": ...}} of a finished run folder."""
    names = json.load(open(os.path.join(run, "run.json")))["layers"]
    return {n: load_file(os.path.join(run, "layers", n + ".safetensors")) for n in names}


# ---------------------------------------------------------------------------- next_token_loss

def test_next_token_loss_is_the_cross_entropy_of_the_shifted_logits():
    from transformers import AutoModelForCausalLM

    from sparseopt_torch.proxsparse import next_token_loss

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("llama"),
                                             attn_implementation="eager").eval()
    ids = torch.randint(200, 30000, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # right padding: positions 6.. are no data
    for batch in ({"input_ids": ids}, {"input_ids": ids, "attention_mask": mask}):
        got = next_token_loss(model, batch)
        logits = model(**batch).logits
        labels = ids[:, 1:].clone()
        if "attention_mask" in batch:
            labels[batch["attention_mask"][:, 1:] == 0] = -100  # ignored by cross_entropy
        want = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               labels.reshape(-1), ignore_index=-100)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
        assert got.requires_grad
    # the padded positions are left out: not the mean over every position
    every = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    padded = next_token_loss(model, {"input_ids": ids, "attention_mask": mask})
    assert abs(float(padded.detach()) - float(every.detach())) > 1e-4
    with pytest.raises(ValueError, match="input_ids"):
        next_token_loss(model, ids)
    with pytest.raises(ValueError, match="T >= 2"):
        next_token_loss(model, {"input_ids": ids[:, :1]})


# ---------------------------------------------------------------------------- the CLI run

def test_cli_run_prunes_every_linear_to_exactly_2_4_on_the_learned_masks(llama, fixed_run):
    from transformers import AutoModelForCausalLM

    folder, _ = llama
    dense = AutoModelForCausalLM.from_pretrained(folder)
    run = _run(fixed_run)
    masks = load_file(os.path.join(run, "masks.safetensors"))
    layers = _layers(run)
    assert sorted(layers) == sorted(masks) and len(layers) == 14  # 7 linears x 2 blocks
    for name, t in layers.items():
        M = masks[name]
        assert M.dtype == torch.bool
        assert (M.reshape(-1, 4).sum(dim=1) == 2).all(), name
        W0 = get_weight(find_layers(dense, [name])[name]).detach()
        # the dense weights on the learned mask (proxsparse-liu Alg. 1, line 7) ...
        assert torch.equal(t["W_nogd"], W0 * M), name
        # ... and after +GD still on it
        assert ((t["W"] != 0).reshape(-1, 4).sum(dim=1) <= 2).all(), name
        assert not (t["W"][~M] != 0).any(), name
    # the masks were learned, not magnitude pruning of W0
    info = json.load(open(os.path.join(run, "proxsparse.json")))["info"]
    assert info["mask_vs_magnitude"] > 0.01 and info["steps"] == 10
    assert not os.path.exists(os.path.join(run, "proxsparse_state.pt"))


def test_end_to_end_loss_decreases_on_a_fixed_batch(fixed_run):
    record = json.load(open(os.path.join(_run(fixed_run), "proxsparse.json")))
    assert record["step"] == [0, 9]  # the first and the last step (record_every 10)
    loss, objective = record["loss"], record["objective"]
    assert loss[-1] < loss[0] - 0.1, loss  # random model: about log(30522) = 10.3 at first
    assert objective[-1] < objective[0], objective
    assert record["frac_24"][-1] > record["frac_24"][0]  # the prox shrinks towards 2:4


def test_rerun_of_a_finished_run_trains_nothing(llama, fixed_run, monkeypatch):
    ps = _module()
    folder, calib = llama
    before = {n: t["W"] for n, t in _layers(_run(fixed_run)).items()}
    monkeypatch.setattr(ps, "next_token_loss", _raise_at(0))
    assert main(["prune", "--model", folder, "--out", fixed_run, "--method", "proxsparse",
                 "--calibration", calib, *FIXED]) == 0
    assert all(torch.equal(before[n], t["W"]) for n, t in _layers(_run(fixed_run)).items())


def _module():
    """The module sparseopt_torch.proxsparse (the package's attribute of that name is the
    function)."""
    import sys

    import sparseopt_torch.proxsparse  # noqa: F401

    return sys.modules["sparseopt_torch.proxsparse"]


#: The real next_token_loss (before any test replaces it).
_REAL_LOSS = _module().next_token_loss


def _raise_at(n, calls=None):
    """A next_token_loss that raises :class:`Interrupted` at its call number ``n`` (0-based)
    and counts its calls in ``calls``."""
    next_token_loss = _REAL_LOSS
    calls = [] if calls is None else calls

    def loss(model, batch):
        if len(calls) == n:
            raise Interrupted(f"call {n}")
        calls.append(1)
        return next_token_loss(model, batch)
    return loss


def test_interrupted_run_resumes_bit_identical_to_an_uninterrupted_one(llama, tmp_path,
                                                                        monkeypatch):
    import sparseopt_torch.hf as hf

    ps = _module()
    folder, calib = llama
    argv = ["prune", "--model", folder, "--method", "proxsparse", "--calibration", calib, *SIX]
    whole = str(tmp_path / "whole")
    assert main([*argv, "--out", whole]) == 0
    assert json.load(open(os.path.join(_run(whole), "proxsparse.json")))["info"]["steps"] == 6

    monkeypatch.setattr(hf, "PROXSPARSE_CHECKPOINT_SECONDS", 0.0)  # after every step
    cut = str(tmp_path / "cut")
    monkeypatch.setattr(ps, "next_token_loss", _raise_at(4))  # steps 0-3 done
    with pytest.raises(Interrupted):
        main([*argv, "--out", cut])
    state = os.path.join(_run(cut), "proxsparse_state.pt")
    assert torch.load(state, weights_only=True)["k"] == 4
    assert not os.path.exists(os.path.join(_run(cut), "masks.safetensors"))

    calls = []
    monkeypatch.setattr(ps, "next_token_loss", _raise_at(-1, calls))
    assert main([*argv, "--out", cut]) == 0
    assert len(calls) == 2  # it continued at step 4, it did not start again
    assert not os.path.exists(state)
    a, b = _layers(_run(whole)), _layers(_run(cut))
    assert sorted(a) == sorted(b)
    for name in a:
        assert torch.equal(a[name]["W"], b[name]["W"]), name
        assert torch.equal(a[name]["W_nogd"], b[name]["W_nogd"]), name
    ra, rb = (json.load(open(os.path.join(_run(r), "proxsparse.json")))
              for r in (whole, cut))
    assert (ra["loss"], ra["objective"]) == (rb["loss"], rb["objective"])

    # a rerun with other settings is refused, naming the setting
    monkeypatch.setattr(ps, "next_token_loss", _REAL_LOSS)
    with pytest.raises(SystemExit, match=r"lam1 \(saved 2.0, now 3.0\)"):
        main([*argv, "--out", cut, "--proxsparse-lam1", "3"])


def test_library_checkpoint_resumes_bit_identical_and_refuses_another_run(tmp_path):
    """proxsparse(checkpoint=...) itself, on a plain model, interrupted in the middle."""
    from sparseopt_torch.proxsparse import ProxSparseSettings, proxsparse

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))

    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g))
               for _ in range(3)]
    settings = ProxSparseSettings(lam1=0.5, lam2=0.1, lr=1e-2, steps=9)
    kw = dict(progress=False)

    def mse(m, b):
        return (m(b[0]) - b[1]).square().mean()

    whole = proxsparse(make(), batches, mse, settings, **kw)
    path = str(tmp_path / "state.pt")
    calls = []

    def crash_at_5(m, b):
        if len(calls) == 5:
            raise Interrupted
        calls.append(1)
        return mse(m, b)

    model = make()
    with pytest.raises(Interrupted):
        proxsparse(model, batches, crash_at_5, settings, checkpoint=path, checkpoint_every=0,
                   **kw)
    assert torch.equal(model[0].weight, make()[0].weight)  # the model left as it came
    resumed = proxsparse(model, batches, mse, settings, checkpoint=path, checkpoint_every=0,
                         **kw)
    for name in whole.masks:
        assert torch.equal(whole.masks[name], resumed.masks[name])
    for key in ("step", "loss", "objective", "r24", "frac_24"):
        assert (whole.history[key] == resumed.history[key]).all(), key
    with pytest.raises(ValueError, match=r"lam1 \(saved 0.5, now 0.7\)"):
        proxsparse(make(), batches, mse, replace(settings, lam1=0.7), checkpoint=path, **kw)
    with pytest.raises(ValueError, match="calibration_sha256"):
        proxsparse(make(), batches[:2], mse, settings, checkpoint=path, **kw)


# ---------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("extra, names", [
    (["--offload"], "--offload"),
    (["--workers", "2"], "--workers / --scheduler"),
    (["--pattern", "1:4"], "pattern 1:4"),
])
def test_what_proxsparse_cannot_run_with_is_one_line_exit_2(llama, tmp_path, capsys, extra,
                                                             names):
    folder, calib = llama
    out = str(tmp_path / "run")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["prune", "--model", folder, "--out", out, "--method", "proxsparse",
              "--calibration", calib, *extra, *FIXED])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sparseopt prune: proxsparse "), err
    assert names in err and "Traceback" not in err
    assert not os.path.exists(out)
