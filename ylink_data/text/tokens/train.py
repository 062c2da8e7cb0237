"""Training a byte-level BPE tokenizer (GPT-2 / Qwen style) with the `tokenizers`
library (`ylink tokenizer train`, which reads runs or any input: `ylink_data.train.tokenizer`).

The pre-tokenizer cuts text into the pieces merges may not cross, then maps each piece's UTF-8
bytes to the 256 printable stand-ins of GPT-2 (ByteLevel, without its own regex). The pieces, after
Qwen2's regex with two changes so that Chinese is handled well:
- a run of Han characters is one piece of its own (`\\p{Han}+`), never glued to Latin letters
  or to the punctuation before it (Qwen2 lets one punctuation character lead a run of letters,
  so "，中国" could become one token): no token mixes Han characters with punctuation;
- every digit is a piece of its own, so numbers are always spelt digit by digit;
- punctuation and symbols (emoji included) are runs of their own, with at most one leading space;
  letters and combining marks (Devanagari, Thai vowel signs) stay together.
No normalizer: a byte-level BPE is lossless (decode(encode(text)) == text), and text
normalisation is the pipeline's `normalize` op's job, where it is recorded.

Special tokens: `<|endoftext|>` (id 0, the end-of-document token the `tokenize` op appends) and
`<|pad|>` (id 1). Padding is not switched on in the file (a batch encode would pad every text).
tokenizer.json has no place for a token's role, so `hf_config()` is the `tokenizer_config.json`
written beside it: it declares `<|endoftext|>` as `eos_token` (Megatron's end-of-document, `.eod`
and `.eos_id` of megatron-core's `HuggingFaceTokenizer`) and `<|pad|>` as `pad_token`;
`megatron_metadata()` is megatron-core's own `tokenizer_metadata.json`.

Reproducible: the BPE trainer has no randomness (its counts are sums and its ties are broken by
the pair's ids), so the same documents give a byte-identical tokenizer.json. The seed only chooses
which documents `max_documents` keeps (a uniform sample, reservoir sampling in one pass); without
`max_documents` every document is used and the seed changes nothing.
"""
from __future__ import annotations

import random
from typing import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from ylink_data.core.errors import InputError

SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>")
MIN_VOCAB = len(SPECIAL_TOKENS) + 256  # the special tokens and every byte
PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"        # English contractions, as GPT-2 and Qwen2
    r"| ?\p{Han}+"                          # a run of Han characters
    r"| ?[\p{L}\p{M}&&[^\p{Han}]]+"         # a run of other letters (with their combining marks)
    r"|\p{N}"                               # one digit
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"      # punctuation and symbols
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"            # line breaks, then other white space
)


def hf_config() -> dict:
    """`tokenizer_config.json` for a folder holding this module's tokenizer.json: what
    `transformers.AutoTokenizer.from_pretrained(folder)` and so megatron-core's `HuggingFaceTokenizer`
    (`--tokenizer-type HuggingFaceTokenizer --tokenizer-model folder`) need beyond the file: which
    class reads it and the special tokens' roles."""
    eos, pad = SPECIAL_TOKENS
    return {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "pad_token": pad, "bos_token": None,
            "unk_token": None, "add_bos_token": False, "add_eos_token": False, "clean_up_tokenization_spaces": False,
            "model_max_length": 1 << 60}


def megatron_metadata() -> dict:
    """`tokenizer_metadata.json`: what megatron-core's `MegatronTokenizer.from_pretrained(folder)`
    reads to pick its wrapper (Hugging Face's library, the GPT model type)."""
    return {"library": "huggingface", "class_name": None, "class_path": None, "model_type": "gpt",
            "chat_template": None}


def special_tokens_map() -> dict:
    """`special_tokens_map.json`, the same roles for older readers of the folder."""
    eos, pad = SPECIAL_TOKENS
    return {"eos_token": eos, "pad_token": pad}


def new_tokenizer() -> Tokenizer:
    """An untrained byte-level BPE with the pre-tokenizer described in the module docstring."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def train_on_texts(texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2,
                   show_progress: bool = True) -> Tokenizer:
    """A tokenizer trained on `texts`, consumed once as they come (the trainer keeps word counts,
    not the texts)."""
    if vocab_size < MIN_VOCAB:
        raise InputError(f"--vocab-size {vocab_size} is too small: a byte-level BPE needs at least {MIN_VOCAB} "
                         f"(256 bytes and {len(SPECIAL_TOKENS)} special tokens)")
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS), show_progress=show_progress,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def sample(texts: Iterable[str], k: int, seed: int) -> list[str]:
    """A uniform sample of `k` texts (all of them when there are fewer), in one pass holding `k`
    texts: reservoir sampling (Vitter's algorithm R) with a generator seeded by `seed`."""
    rng = random.Random(seed)
    kept: list[str] = []
    for n, text in enumerate(texts):
        if n < k:
            kept.append(text)
        else:
            j = rng.randrange(n + 1)
            if j < k:
                kept[j] = text
    return kept
