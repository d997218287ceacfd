"""refine_steps="exact" with torch: the core's masked_optimum on tensors (the NumPy path for
CPU tensors, the torch path and the torch kernel masked_row_cholesky forced on the CPU),
prune_model and the CLI (issue 45 item 0)."""

import json
import os

import numpy as np
import pytest
import torch
from _models import make_tiny_batches, make_tiny_bert, save_tiny_model

from sparseopt.backend import device_kernels
from sparseopt.cli import main
from sparseopt.layer import layer_loss, masked_optimum
from sparseopt.layer.refine import _masked_row_cholesky_numpy
from sparseopt.patterns import NM
from sparseopt_torch import find_layers, get_weight
from sparseopt_torch.kernels import masked_row_cholesky
from sparseopt_torch.prune import prune_model

SOLVERS = ("pcg", "cholesky")


def _problem(d_out=12, d_in=48, n=300, seed=0, dead=(), unstructured=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((d_in, n)) * np.exp(rng.standard_normal(d_in))[:, None]
    X[list(dead)] = 0.0
    H = X @ X.T / n
    W_star = rng.standard_normal((d_out, d_in))
    if unstructured:  # rows of unequal support: the torch kernel pads them
        mask = rng.random((d_out, d_in)) < rng.uniform(0.2, 0.8, (d_out, 1))
    else:
        mask = (np.argsort(rng.random((d_out, d_in // 4, 4)), axis=-1) < 2).reshape(d_out, -1)
    return W_star, H, mask


def _tensors(*arrays):
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpu_tensors_get_numpys_bits(solver, dtype):
    W_star, H, mask = _problem(dead=(5,))
    W_star = W_star.astype(dtype)
    Wn, info_n = masked_optimum(W_star, W_star, H, mask, solver=solver)
    Wt, info_t = masked_optimum(*_tensors(W_star, W_star, H, mask), solver=solver)
    assert isinstance(Wt, torch.Tensor) and Wt.dtype == getattr(torch, np.dtype(dtype).name)
    np.testing.assert_array_equal(Wt.numpy(), Wn)
    assert info_t["iterations"] == info_n["iterations"]


@pytest.mark.parametrize("unstructured", [False, True])
def test_torch_row_cholesky_kernel_equals_the_numpy_one(unstructured):
    W_star, H, mask = _problem(d_out=20, dead=(3, 40), unstructured=unstructured, seed=1)
    B = (W_star @ H) * mask
    start = np.random.default_rng(2).standard_normal(W_star.shape)
    Xn = _masked_row_cholesky_numpy(start.copy(), B, H, mask)
    Xt = masked_row_cholesky(*_tensors(start.copy(), B, H, mask))
    np.testing.assert_allclose(Xt.numpy(), Xn, rtol=1e-9, atol=1e-9 * np.abs(Xn).max())
    # outside the live support nothing is written: the start is kept bit for bit
    live = mask & (np.diag(H) > 0)[None, :]
    np.testing.assert_array_equal(Xt.numpy()[~live], start[~live])
    # a per-row direct solve (brute force) on each row's live support
    for i in range(W_star.shape[0]):
        S = live[i]
        np.testing.assert_allclose(Xt.numpy()[i, S], np.linalg.solve(H[np.ix_(S, S)], B[i, S]),
                                   rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_torch_path_agrees_with_numpy(solver, dtype):
    W_star, H, mask = _problem(dead=(7,), seed=3)
    W_star = W_star.astype(dtype)
    Wn, info_n = masked_optimum(W_star, W_star, H, mask, solver=solver)
    with device_kernels():
        Wt, info_t = masked_optimum(*_tensors(W_star, W_star, H, mask), solver=solver)
    assert Wt.dtype == getattr(torch, np.dtype(dtype).name) and info_t["converged"]
    assert torch.count_nonzero(Wt[~torch.from_numpy(mask)]) == 0
    Ln, Lt = layer_loss(Wn, W_star, H), layer_loss(Wt.numpy(), W_star, H)
    assert Lt == pytest.approx(Ln, rel=1e-6 if dtype == np.float32 else 1e-9)
    np.testing.assert_allclose(Wt.numpy(), Wn, rtol=1e-4, atol=1e-4 * np.abs(Wn).max())


def test_prune_model_exact_records_the_solve_and_matches_the_core():
    model, batches = make_tiny_bert(), make_tiny_batches()
    res = prune_model(model, batches, method="wanda", refine_steps="exact", progress=False,
                      keep_hessians=True)
    gd = prune_model(make_tiny_bert(), batches, method="wanda", refine_steps=20,
                     progress=False, hessians=res.hessians)
    layers = find_layers(model)
    assert res.settings["refine_steps"] == "exact"
    for rec, rec_gd in zip(res.records, gd.records):
        W = get_weight(layers[rec.name]).detach()
        assert NM(2, 4).satisfied(W.numpy())
        assert rec.refine_steps == "exact" and rec.info["refine_converged"]
        assert rec.info["refine_solver"] in SOLVERS and rec.info["refine_rel_grad"] <= 1e-6
        assert rec.loss_gd <= rec_gd.loss_gd * (1 + 1e-9) and rec.loss_gd <= rec.loss
    assert "| rel loss +GD |" in res.to_markdown()


def test_cli_refine_steps_exact_prunes_exports_and_refuses_bad_values(tmp_path, capsys):
    folder = save_tiny_model("llama", str(tmp_path / "llama"), layers=1)
    out = str(tmp_path / "run")
    args = ["prune", "--model", folder, "--out", out, "--method", "wanda",
            "--n-calib", "4", "--seq-len", "16", "--batch-size", "2"]
    assert main([*args, "--refine-steps", "exact"]) == 0
    report = json.load(open(os.path.join(out, "wanda", "report.json")))
    assert report["settings"]["refine_steps"] == "exact"
    assert all(r["info"]["refine_converged"] for r in report["layers"])
    ckpt = str(tmp_path / "ckpt")
    assert main(["export", os.path.join(out, "wanda"), "--dense", ckpt]) == 0
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    assert cfg["sparsity"]["refine_steps"] == "exact"
    assert "masked least-squares optimum" in open(os.path.join(ckpt, "README.md")).read()
    for bad in ("exakt", "-3"):
        capsys.readouterr()
        with pytest.raises(SystemExit, match="refine_steps") as exc:
            main([*args[:4], str(tmp_path / f"bad{bad}"), *args[5:], "--refine-steps", bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.count("sparseopt ") == 1, err
