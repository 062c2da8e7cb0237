"""`ylink tokenizer train`: a byte-level BPE tokenizer from any input format or run folder. This
module reads the texts (`io.texts`) and writes the file; the learning is
`ylink_data.text.tokens.train`'s."""
from __future__ import annotations

import hashlib
import itertools
import os
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ylink_data.core.errors import InputError, OutputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import atomic_write, filesystem, is_local
from ylink_data.io.texts import Skipped, iter_texts
from ylink_data.text.tokens.train import MIN_VOCAB, sample, train_on_texts


@dataclass(frozen=True)
class TrainResult:
    output: str
    vocab_size: int
    documents_read: int
    documents_used: int  # fewer than read when max_documents sampled them
    characters_read: int
    sha256: str
    skipped: Skipped


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
