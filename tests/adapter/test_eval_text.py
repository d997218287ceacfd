"""Evaluation on the user's text (issue 44 item 3): `sparseopt eval RUN --text FILE`, `sparseopt
eval --model DIR --text FILE`, text encodings, and bad input as one line with exit status 2."""

import json
import os

import pytest

from _models import save_tiny_model
from sparseopt.cli import main

TINY = ["--n-calib", "4", "--seq-len", "16", "--batch-size", "2"]
SENTENCES = ["The café opened at nine and closed late in the evening.",
             "Rain fell on the town for three days without a break.",
             "A naïve reader may take the story at its word.",
             "The river rose above the old stone bridge by noon."]


def _latin1_text(path, n=60):
    path.write_bytes("\n".join(SENTENCES[i % 4] + f" Line {i}." for i in range(n))
                     .encode("latin-1"))
    return str(path)


def _refused(capsys, argv, match):
    capsys.readouterr()
    with pytest.raises(SystemExit, match=match) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip("\n").split("\n")[-1].startswith(f"sparseopt {argv[0]}: ")
    assert "Traceback" not in err


def test_read_documents_names_the_byte_offset_and_reads_with_an_encoding(tmp_path):
    from sparseopt_torch.data import read_documents

    path = tmp_path / "news.txt"
    path.write_bytes("plain line\ncaf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"news.txt is not utf-8 text \(.* at byte 14\); "
                                         r".*--encoding"):
        read_documents(str(path))
    assert read_documents(str(path), encoding="latin-1") == ["plain line", "caf\u00e9 au lait"]
    jsonl = tmp_path / "news.jsonl"
    jsonl.write_bytes('{"text": "caf\u00e9"}\r\n'.encode("latin-1"))
    assert read_documents(str(jsonl), encoding="latin-1") == ["caf\u00e9"]
    with pytest.raises(ValueError, match="encoding must be a text encoding"):
        read_documents(str(path), encoding="no-such-codec")


@pytest.fixture(scope="module")
def pruned(tmp_path_factory):
    """A tiny Llama pruned with magnitude (+2 GD steps) on a latin-1 calibration file."""
    tmp = tmp_path_factory.mktemp("evaltext")
    folder = save_tiny_model("llama", str(tmp / "llama"), layers=2)
    calib = _latin1_text(tmp / "calib.txt")
    out = str(tmp / "run")
    assert main(["prune", "--model", folder, "--out", out, "--method", "magnitude",
                 "--calibration", calib, "--encoding", "latin-1", "--refine-steps", "2",
                 *TINY]) == 0
    return folder, out, tmp


def test_prune_records_the_encoding(pruned):
    _, out, _ = pruned
    assert json.load(open(os.path.join(out, "experiment.json")))["encoding"] == "latin-1"


def test_eval_on_the_users_text_by_disjoint_windows(pruned):
    import torch

    from sparseopt_torch.data import read_documents, token_stream
    from sparseopt_torch.evaluate import perplexity
    from sparseopt_torch.models import load_model

    folder, out, tmp = pruned
    text = _latin1_text(tmp / "eval.txt", n=40)
    assert main(["eval", out, "--text", text, "--encoding", "latin-1", "--seq-len", "12"]) == 0
    saved = json.load(open(os.path.join(out, "comparison.json")))
    dense, tokenizer, _ = load_model(folder)
    ids = token_stream(tokenizer, read_documents(text, encoding="latin-1"))
    windows = ids.numel() // 12
    assert saved["evaluation"] == {"text": text, "tokens": windows * 12, "windows": windows,
                                   "seq_len": 12}
    rows = {r["run"]: r for r in saved["rows"]}
    assert set(rows) == {"dense", "magnitude", "magnitude+GD"}
    # the dense row is the perplexity of the complete disjoint windows, computed here anew
    expected = perplexity(dense, ids[:windows * 12], seq_len=12)
    assert rows["dense"]["perplexity"] == pytest.approx(expected, rel=1e-12)
    assert rows["dense"]["kl"] == 0.0 and rows["magnitude"]["kl"] > 0
    assert f"{windows} windows of 12" in open(os.path.join(out, "comparison.md")).read()
    del torch


def test_eval_any_model_folders_on_a_text(pruned, capsys):
    folder, out, tmp = pruned
    ckpt = str(tmp / "ckpt")
    assert main(["export", os.path.join(out, "magnitude"), "--dense", ckpt]) == 0
    text = _latin1_text(tmp / "eval2.txt", n=40)
    capsys.readouterr()
    assert main(["eval", "--model", folder, "--model", ckpt, "--text", text,
                 "--encoding", "latin-1", "--seq-len", "12"]) == 0
    table = capsys.readouterr().out
    lines = [l for l in table.splitlines() if l.startswith("| /")]
    assert len(lines) == 2
    assert lines[0].endswith("| 0.0000 |") and not lines[1].endswith("| 0.0000 |")


def test_eval_bad_input_is_one_line(pruned, capsys, tmp_path):
    folder, out, tmp = pruned
    latin = _latin1_text(tmp_path / "latin.txt")
    _refused(capsys, ["eval"], "give a run folder")
    _refused(capsys, ["eval", "--model", folder], "--model needs --text")
    _refused(capsys, ["eval", out, "--text", str(tmp_path / "missing.txt")], "does not exist")
    _refused(capsys, ["eval", out, "--text", latin], r"not utf-8 text \(.* at byte \d+\)")
    _refused(capsys, ["eval", str(tmp_path)], "experiment")
    _refused(capsys, ["eval", out, "--text", latin, "--encoding", "latin-1",
                      "--seq-len", "100000"], "too few")
    _refused(capsys, ["prune", "--model", folder, "--out", str(tmp_path / "r"), "--method",
                      "magnitude", "--calibration", latin, *TINY],
             r"not utf-8 text \(.* at byte \d+\); .*--encoding")
