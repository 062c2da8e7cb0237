"""A trained quality classifier: loaded from any fsspec URL, scoring whole batches of documents.

fastText reads models from local files only, so a remote model is first copied into a local cache
folder (`YLINK_QUALITY_CACHE`, default `~/.cache/ylink/quality`) under a name made of a hash of its
URL, size and modification time (or ETag): a changed model gets a new name, an unchanged one is
copied once per machine. Local paths are read in place.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.fs import filesystem, is_local
from .preprocess import model_lines

POSITIVE = "__label__hq"
NEGATIVE = "__label__lq"
_cache_lock = threading.Lock()


def cache_dir() -> Path:
    return Path(os.environ.get("YLINK_QUALITY_CACHE") or Path.home() / ".cache" / "ylink" / "quality")


def local_copy(url: str, storage_options: dict[str, Any] | None = None) -> str:
    """A local file holding the model at `url` (the file itself when it is local)."""
    try:
        fs, path = filesystem(url, storage_options)
        info = fs.info(path)
    except FileNotFoundError:
        raise InputError(f"quality model {url!r} does not exist") from None
    if is_local(fs):
        return path
    stamp = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("LastModified") or ""
    key = hashlib.sha256(f"{url}\0{info.get('size')}\0{stamp}".encode()).hexdigest()[:24]
    target = cache_dir() / f"{key}-{os.path.basename(path) or 'model.bin'}"
    with _cache_lock:
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
            try:
                fs.get_file(path, str(tmp))
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
    return str(target)


class QualityModel:
    """A fastText classifier with the labels `__label__hq` (good) and `__label__lq`; `scores`
    gives the probability of `__label__hq` for each document."""

    def __init__(self, model: Any, source: str = ""):
        self.model = model
        self.source = source
        labels = list(model.get_labels())
        if POSITIVE not in labels or len(labels) != 2:
            raise InputError(f"{source or 'the model'} is not a quality classifier: its labels are {labels}, "
                             f"expected {POSITIVE} and one other")

    @classmethod
    def load(cls, url: str, storage_options: dict[str, Any] | None = None) -> "QualityModel":
        import fasttext

        path = local_copy(url, storage_options)
        try:
            model = fasttext.load_model(path)
        except ValueError as exc:  # fastText's message for a file that is not one of its models
            raise InputError(f"cannot load quality model {url!r}: {exc}") from None
        return cls(model, url)

    def scores_of_lines(self, lines: list[str]) -> np.ndarray:
        """P(`__label__hq`) for preprocessed lines (`preprocess.model_lines`), one fastText call."""
        if not lines:
            return np.zeros(0, np.float32)
        labels, probs = self.model.predict(lines, k=1)
        top = np.fromiter((p[0] for p in probs), np.float32, len(lines))
        is_hq = np.fromiter((lab[0] == POSITIVE for lab in labels), bool, len(lines))
        # Two labels, softmax: P(hq) is the top probability or its complement; hierarchical
        # softmax can overshoot 1 slightly.
        return np.clip(np.where(is_hq, top, 1.0 - top), 0.0, 1.0).astype(np.float32)

    def scores(self, texts: list[str | None], langs: list[str | None] | str | None = None,
               prefix_chars: int | None = None) -> np.ndarray:
        """P(`__label__hq`) for each text, float32. `langs`: a language code per text, one for all,
        or None to guess Chinese or not from each text."""
        return self.scores_of_lines(model_lines(texts, langs, prefix_chars))
