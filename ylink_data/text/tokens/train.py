"""Training a byte-level BPE tokenizer (GPT-2 / Qwen style) on runs or any input, with the
`tokenizers` library: `ylink tokenizer train`.

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

Reproducible: the BPE trainer has no randomness (its counts are sums and its ties are broken by
the pair's ids), so the same documents give a byte-identical tokenizer.json. The seed only chooses
which documents `max_documents` keeps (a uniform sample, reservoir sampling in one pass); without
`max_documents` every document is used and the seed changes nothing.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import random
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from ylink_data.core.errors import InputError, OutputError
from ylink_data.core.storage import atomic_write, filesystem, is_local
from ylink_data.io.texts import Skipped, iter_texts
from ylink_data.core.redaction import redact_url

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


@dataclass(frozen=True)
class TrainResult:
    output: str
    vocab_size: int
    documents_read: int
    documents_used: int  # fewer than read when max_documents sampled them
    characters_read: int
    sha256: str
    skipped: Skipped


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


def train_tokenizer(inputs: list[str], output: str, vocab_size: int, *, seed: int = 0, min_frequency: int = 2,
                    max_documents: int | None = None, storage_options: dict[str, Any] | None = None,
                    show_progress: bool = True) -> TrainResult:
    """Train on the documents of `inputs` (run folders, files, globs, URLs) and write `output`.
    The output folder is checked before any reading, and the tokenizer written atomically."""
    if not inputs:
        raise InputError("no input: give run folders, files, globs or URLs to train on")
    if vocab_size < MIN_VOCAB:  # before reading anything
        train_on_texts([], vocab_size)
    if max_documents is not None and max_documents < 1:
        raise InputError(f"--max-documents must be 1 or more, not {max_documents}")
    if min_frequency < 1:
        raise InputError(f"--min-frequency must be 1 or more, not {min_frequency}")
    fs, path = filesystem(output, storage_options)
    _check_writable(fs, path, output)
    counts = {"documents": 0, "characters": 0}
    skipped = Skipped()

    def texts() -> Iterator[str]:
        for _, text in iter_texts(inputs, storage_options=storage_options, skipped=skipped):
            if text:
                counts["documents"] += 1
                counts["characters"] += len(text)
                yield text

    stream = texts()
    first = next(stream, None)  # an input without documents fails here, before training
    if first is None:
        why = f" ({skipped.describe('input')})" if skipped.counts else ""
        raise InputError(f"no documents in {', '.join(redact_url(i) for i in inputs)}{why}")
    stream = itertools.chain([first], stream)
    chosen: Iterable[str] = stream if max_documents is None else sample(stream, max_documents, seed)
    tok = train_on_texts(chosen, vocab_size, min_frequency=min_frequency, show_progress=show_progress)
    data = tok.to_str().encode("utf-8")
    with atomic_write(fs, path) as f:
        f.write(data)
    read = counts["documents"]
    return TrainResult(output, tok.get_vocab_size(with_added_tokens=True), read, min(read, max_documents or read),
                       counts["characters"], hashlib.sha256(data).hexdigest(), skipped)


def _check_writable(fs: Any, path: str, output: str) -> None:
    """Fail before hours of reading when the output cannot be written (local folders only: on an
    object store the write itself is the test)."""
    if not is_local(fs):
        return
    folder = os.path.dirname(os.path.abspath(path))
    probe = os.path.join(folder, f".ylink-probe-{uuid.uuid4().hex[:12]}")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise OutputError(f"--output {output}: cannot write into {folder} "
                          f"({exc.strerror or type(exc).__name__}): choose a writable folder") from None
