"""`ylink tokenizer train`: a byte-level BPE tokenizer from any input format or run folder. This
module reads the texts (`io.texts`) and writes the files; the learning is
`ylink_data.text.tokens.train`'s.

`output` is a file (`tokenizer.json`, any name ending in `.json`) or a folder (any other name): a
folder gets the Hugging Face layout, `tokenizer.json` with `tokenizer_config.json` and
`special_tokens_map.json` that declare the end-of-document and padding tokens, which
`AutoTokenizer.from_pretrained(folder)` and Megatron-LM (`--tokenizer-type HuggingFaceTokenizer
--tokenizer-model folder`) read, and megatron-core's `tokenizer_metadata.json`
(`MegatronTokenizer.from_pretrained(folder)`). A file named `tokenizer.json` gets the two beside it too (its folder
is then such a folder); under another name it stands alone."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ylink_data.core.errors import InputError, OutputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import atomic_write, filesystem, is_local, join
from ylink_data.io.texts import Skipped, iter_texts
from ylink_data.text.tokens.train import (MIN_VOCAB, hf_config, megatron_metadata, sample, special_tokens_map,
                                          train_on_texts)

TOKENIZER_FILE = "tokenizer.json"


@dataclass(frozen=True)
class TrainResult:
    output: str  # the tokenizer.json written
    vocab_size: int
    requested_vocab_size: int  # --vocab-size: more than vocab_size when the texts had too few pairs to merge
    documents_read: int
    documents_used: int  # fewer than read when max_documents sampled them
    characters_read: int
    sha256: str
    skipped: Skipped
    hf_folder: str | None = None  # the folder AutoTokenizer and Megatron-LM read, when one was written

    @property
    def vocab_shortfall(self) -> str | None:
        """Why the vocabulary is smaller than asked (the BPE trainer stops when no pair of tokens
        occurs `min_frequency` times any more: the texts are too small for the size), or None."""
        if self.vocab_size >= self.requested_vocab_size:
            return None
        return (f"notice: the vocabulary has {self.vocab_size:,} tokens, not the {self.requested_vocab_size:,} asked: "
                f"the corpus is too small for it (after {self.vocab_size:,}, no pair of adjacent tokens occurs "
                f"--min-frequency times in its {self.documents_used:,} documents); train on more text for a "
                "larger vocabulary")


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
    folder = not path.endswith(".json")
    if folder:
        path = join(path, TOKENIZER_FILE)
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
    written = join(output, TOKENIZER_FILE) if folder else output
    hf_folder = None
    if written.rsplit("/", 1)[-1] == TOKENIZER_FILE:  # a folder AutoTokenizer reads: the roles beside the file
        hf_folder = written.rsplit("/", 1)[0] if "/" in written else "."
        for name, content in (("tokenizer_config.json", hf_config()), ("special_tokens_map.json", special_tokens_map()),
                              ("tokenizer_metadata.json", megatron_metadata())):
            with atomic_write(fs, join(path.rsplit("/", 1)[0], name)) as f:
                f.write((json.dumps(content, indent=2) + "\n").encode("utf-8"))
    read = counts["documents"]
    return TrainResult(written, tok.get_vocab_size(with_added_tokens=True), vocab_size, read,
                       min(read, max_documents or read), counts["characters"], hashlib.sha256(data).hexdigest(),
                       skipped, hf_folder)


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
