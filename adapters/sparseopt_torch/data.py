"""Calibration and evaluation text: English sentences from installed docstrings.

The issue asks for calibration and held-out evaluation text that needs no download: the
docstrings of packages that are installed anyway (numpy, scipy) are thousands of plain English
sentences about numerical computing. :func:`docstring_sentences` extracts them
deterministically, :func:`calibration_eval_split` draws two disjoint sets fixed by a seed, and
:func:`token_batches` turns sentences into padded token batches for the model (layer Hessians,
prox24-kubler App. D.1, are computed from the activations of such batches).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import io
import pkgutil
import re
import warnings
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout

import numpy as np

__all__ = ["docstring_sentences", "calibration_eval_split", "token_batches"]

#: Module name components that are never read: test suites, build tools, deprecated shims.
_SKIP_COMPONENTS = frozenset({"tests", "test", "testing", "conftest", "setup", "distutils",
                              "core", "matlib"})

#: numpydoc sections whose content is not prose (tables of parameters, references, code).
_TABLE_SECTIONS = frozenset({
    "parameters", "other parameters", "returns", "yields", "receives", "raises", "warns",
    "attributes", "methods", "see also", "references", "examples", "example", "index",
})

_UNDERLINE = re.compile(r"^\s*([-=~^*+#`'\"])\1{2,}\s*$")
_ROLE = re.compile(r":[a-zA-Z_]+(?::[a-zA-Z_]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_CITATION = re.compile(r"\s*\[[0-9#*]+\]_|\s*\[[A-Za-z0-9]+\]_")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")
_BULLET = re.compile(r"^(?:[-*+\u2022]|\(?[0-9]+[.)]|\(?[a-z][.)])\s+")
# A sentence ends at . ! ? followed by space and an upper-case letter (the simple rule).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
# Characters that mark code, math or markup rather than prose.
_NOT_PROSE = re.compile(r"[\\{}|=<>$@#_^~\[\]]|``|\.\.\.|>>>|://|\w\(|\(\)")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "cf.", "vs.", "et al.", "resp.", "approx.", "Eq.",
                  "eq.", "Fig.", "fig.", "Sec.", "No.", "Dr.", "Mr.", "Ref.", "ref.")


def _public_modules(package: str):
    """Import ``package`` and its public submodules, depth first in name order.

    Modules that fail to import, private modules (a component starting with ``_``), test
    suites and build tools are skipped; warnings and printed output of the imports are
    swallowed (importing deprecated submodules warns, which is not the user's concern).
    """
    try:
        root = importlib.import_module(package)
    except Exception:  # an optional package that is absent or broken gives no text
        return []
    modules = [root]
    stack = [root]
    while stack:
        mod = stack.pop()
        path = getattr(mod, "__path__", None)
        if path is None:
            continue
        children = []
        for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
            if info.name.startswith("_") or info.name in _SKIP_COMPONENTS:
                continue
            name = f"{mod.__name__}.{info.name}"
            try:
                children.append(importlib.import_module(name))
            except Exception:  # optional dependencies of a submodule missing, etc.
                continue
        modules.extend(children)
        stack.extend(reversed(children))
    return modules


def _documented_objects(mod, package: str):
    """The module and its public functions / classes / other callables defined in ``package``."""
    yield mod
    names = getattr(mod, "__all__", None)
    if not isinstance(names, (list, tuple)):
        names = [n for n in dir(mod) if not n.startswith("_")]
    for name in names:
        if not isinstance(name, str) or name.startswith("_"):
            continue
        try:
            obj = getattr(mod, name)
        except Exception:  # deprecated or lazily failing attributes
            continue
        if inspect.ismodule(obj) or not callable(obj):
            continue
        owner = getattr(obj, "__module__", None)
        if isinstance(owner, str) and (owner == package or owner.startswith(package + ".")):
            yield obj


def _prose_paragraphs(doc: str):
    """Paragraphs of prose in a numpydoc docstring, each as one line of text.

    Drops section headers and their underlines, the sections that are tables, references or
    examples, indented blocks (code, math, parameter descriptions, autosummary listings),
    directives (``.. math::``), doctest lines (``>>>``, ``...``) and RST tables.
    """
    lines = doc.splitlines()
    section = ""
    paragraph: list[str] = []
    out = []

    def flush():
        if paragraph:
            out.append(" ".join(paragraph))
            paragraph.clear()

    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        stripped = line.strip()
        if _UNDERLINE.match(line):
            flush()
            continue
        if stripped and _UNDERLINE.match(nxt):  # a section header (numpydoc or RST title)
            flush()
            section = stripped.lower().rstrip(":")
            continue
        if section in _TABLE_SECTIONS:
            continue
        if not stripped:
            flush()
            continue
        if line[:1].isspace():  # an indented block: code, math, a listing or a definition
            flush()
            continue
        if stripped.startswith((">>>", "...", ".. ", "::")) or stripped.endswith("::"):
            flush()
            continue
        if _BULLET.match(stripped):
            flush()
            stripped = _BULLET.sub("", stripped)
        paragraph.append(stripped)
    flush()
    return out


def _clean(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    text = _ROLE.sub(r"\1", text)
    text = _CITATION.sub("\x01", text)  # a sentence citing [1]_ reads badly without it
    text = text.replace("**", "").replace("*", "")
    text = re.sub(r"(?<!`)`([^`]+)`(?!`)", r"\1", text)  # `name` -> name (not ``code``)
    return " ".join(text.split())


def _split_sentences(paragraph: str):
    # Protect abbreviations from the sentence rule, then restore them.
    for k, abbr in enumerate(_ABBREVIATIONS):
        paragraph = paragraph.replace(abbr, f"\x00{k}\x00")
    for sentence in _SENTENCE_END.split(paragraph):
        for k, abbr in enumerate(_ABBREVIATIONS):
            sentence = sentence.replace(f"\x00{k}\x00", abbr)
        yield sentence


def _is_prose(sentence: str, min_words: int, max_words: int) -> bool:
    words = sentence.split()
    if not min_words <= len(words) <= max_words:
        return False
    if not (sentence[0].isupper() and sentence[-1] in ".!?"):
        return False
    if "\x01" in sentence or _NOT_PROSE.search(sentence):
        return False
    letters = sum(c.isalpha() for c in sentence)
    if letters < 0.8 * len(sentence.replace(" ", "")):
        return False
    # A word is a run of letters (with ' or -); identifiers and numbers are not words.
    wordlike = sum(bool(re.fullmatch(r"[A-Za-z][a-z'-]*[.,;:!?)]?|\(?[a-z]+[,;:)]?", w))
                   for w in words)
    return wordlike >= 0.8 * len(words)


@functools.lru_cache(maxsize=8)
def _sentences_cached(packages: tuple, min_words: int, max_words: int) -> tuple:
    found = set()
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()), \
            redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        for package in packages:
            seen = set()
            for mod in _public_modules(package):
                for obj in _documented_objects(mod, package):
                    if id(obj) in seen:
                        continue
                    seen.add(id(obj))
                    try:
                        doc = inspect.getdoc(obj)
                    except Exception:
                        continue
                    if not isinstance(doc, str):
                        continue
                    for paragraph in _prose_paragraphs(doc):
                        for sentence in _split_sentences(_clean(paragraph)):
                            if _is_prose(sentence, min_words, max_words):
                                found.add(sentence)
    return tuple(sorted(found))


def docstring_sentences(packages=("numpy", "scipy"), *, min_words=5, max_words=60) -> list:
    """English sentences from the docstrings of installed packages, sorted and unique.

    Parameters
    ----------
    packages : str or sequence of str
        Top-level packages whose public modules are read (default numpy and scipy).
    min_words, max_words : int
        Keep sentences with ``min_words <= words <= max_words``.

    Returns
    -------
    list of str
        Sorted, de-duplicated sentences; the same list for the same installed packages.

    Notes
    -----
    Every public module (no component starting with ``_``, no test suites or build tools) is
    imported with warnings silenced; the docstrings of the module and of its public functions
    and classes defined in the package are read. Section headers and their underlines, the
    numpydoc tables (Parameters, Returns, ...), See Also, References, Examples, indented blocks
    (code, math, listings) and doctest lines are dropped; RST roles (``:func:`x```) become
    plain text. Paragraphs are split into sentences at ``.``, ``!`` or ``?`` followed by a
    space and an upper-case letter (common abbreviations excepted). A sentence is kept if it
    starts with an upper-case letter, ends with ``.``, ``!`` or ``?``, has no code or markup
    characters, and is mostly letters and words. The result is cached per arguments.

    Examples
    --------
    >>> sentences = docstring_sentences("numpy")
    >>> len(sentences) > 1000, sentences == sorted(set(sentences))
    (True, True)
    """
    if isinstance(packages, str):
        packages = (packages,)
    if not isinstance(packages, Sequence) or not packages or \
            not all(isinstance(p, str) and p for p in packages):
        raise ValueError(f"packages must be a non-empty sequence of package names, "
                         f"got {packages!r}")
    for name, value in (("min_words", min_words), ("max_words", max_words)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if max_words < min_words:
        raise ValueError(f"max_words ({max_words}) must be >= min_words ({min_words})")
    return list(_sentences_cached(tuple(packages), int(min_words), int(max_words)))


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def calibration_eval_split(n_calib, n_eval, *, seed=0, packages=("numpy", "scipy")):
    """Two disjoint random sets of docstring sentences: calibration and held-out evaluation.

    Parameters
    ----------
    n_calib, n_eval : int
        Number of calibration and evaluation sentences (non-negative).
    seed : int or None
        Seed of ``numpy.random.default_rng``; the split is a function of the seed, the
        installed packages and ``n_calib`` (the first ``n_calib`` entries of one permutation
        of :func:`docstring_sentences` calibrate, the next ``n_eval`` evaluate).
    packages : str or sequence of str
        Passed to :func:`docstring_sentences`.

    Returns
    -------
    calib, eval : list of str
        Disjoint lists (no sentence in both), in permutation order.

    Raises
    ------
    ValueError
        If ``n_calib + n_eval`` exceeds the number of available sentences.

    Examples
    --------
    >>> calib, held_out = calibration_eval_split(100, 50, seed=0, packages="numpy")
    >>> len(calib), len(held_out), set(calib).isdisjoint(held_out)
    (100, 50, True)
    """
    n_calib = _check_count(n_calib, "n_calib")
    n_eval = _check_count(n_eval, "n_eval")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")
    sentences = docstring_sentences(packages)
    if n_calib + n_eval > len(sentences):
        raise ValueError(f"n_calib + n_eval = {n_calib + n_eval} exceeds the {len(sentences)} "
                         f"sentences available from packages={packages!r}")
    perm = np.random.default_rng(seed).permutation(len(sentences))
    calib = [sentences[i] for i in perm[:n_calib]]
    held_out = [sentences[i] for i in perm[n_calib:n_calib + n_eval]]
    return calib, held_out


#: The tokenizer outputs a BERT-style model reads.
_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def token_batches(tokenizer, sentences, *, batch_size=16, max_length=128) -> list:
    """Padded token batches of ``sentences`` for a transformers model, in the given order.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        E.g. ``SentenceTransformer.tokenizer`` (a ``BertTokenizer`` for MiniLM).
    sentences : sequence of str
        Non-empty; consecutive chunks of ``batch_size`` form the batches.
    batch_size : int
        Sentences per batch (the last batch may be smaller).
    max_length : int
        Longer sentences are truncated to ``max_length`` tokens (special tokens included).

    Returns
    -------
    list of dict
        One dict per batch with ``input_ids``, ``attention_mask`` and, if the tokenizer makes
        them, ``token_type_ids``: int64 CPU tensors of shape (B, T), padded to the longest
        sentence of the batch (``attention_mask`` is 0 on padding). Feed them as
        ``bert(**batch)`` or ``sentence_transformer(batch)``.
    """
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise ValueError(f"sentences must be a sequence of str, got {type(sentences).__name__}")
    if len(sentences) == 0:
        raise ValueError("sentences is empty")
    if not all(isinstance(s, str) for s in sentences):
        raise ValueError("sentences must contain only str")
    for name, value, low in (("batch_size", batch_size, 1), ("max_length", max_length, 2)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if not callable(tokenizer):
        raise ValueError(f"tokenizer must be a callable transformers tokenizer, "
                         f"got {type(tokenizer).__name__}")
    batches = []
    for start in range(0, len(sentences), int(batch_size)):
        chunk = list(sentences[start:start + int(batch_size)])
        encoded = tokenizer(chunk, padding=True, truncation=True, max_length=int(max_length),
                            return_tensors="pt")
        batches.append({key: encoded[key] for key in _MODEL_INPUTS if key in encoded})
    return batches
