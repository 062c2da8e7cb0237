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

from ylink_data.core.errors import InputError
from ylink_data.core.digest import has_checksum, write_checksum
from ylink_data.core.storage import filesystem, is_local
from ylink_data.text.quality.preprocess import STRUCTURE_MARKS, model_lines

POSITIVE = "__label__hq"
NEGATIVE = "__label__lq"
LABEL = "__label__"  # fastText's label prefix; a graded model's labels are `__label__<score>`
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
        # A copy is used only with the checksum written when it was fetched: one damaged on disk
        # since, or cut short by a crash between the two, is fetched again.
        if not has_checksum(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
            try:
                fs.get_file(path, str(tmp))
                os.replace(tmp, target)
                write_checksum(target)
            finally:
                tmp.unlink(missing_ok=True)
    return str(target)


def grade_of(label: str) -> float | None:
    """The score a graded model's label stands for (`__label__3` -> 3.0), None for other labels."""
    try:
        return float(label[len(LABEL):]) if label.startswith(LABEL) else None
    except ValueError:
        return None


class QualityModel:
    """A fastText quality classifier, of one of two kinds:
    - binary, with the labels `__label__hq` (good) and `__label__lq`: `scores` gives the
      probability of `__label__hq`, on 0-1;
    - graded, with labels that are scores (`__label__0` ... `__label__5`, as `ylink quality train
      --from RUN` makes from a judge's annotations): `scores` gives the expected score, the sum of
      each score times its probability, on the scale of the labels (`scale`).
    A model trained on the documents' shape tokens (`preprocess.structure_tokens`) has them in its
    vocabulary (`structure`), and is fed them."""

    def __init__(self, model: Any, source: str = ""):
        self.model = model
        self.source = source
        labels = list(model.get_labels())
        grades = [grade_of(label) for label in labels]
        if len(labels) >= 2 and all(g is not None for g in grades):
            self.grades: np.ndarray | None = np.array(grades, np.float64)
            self.scale = (float(self.grades.min()), float(self.grades.max()))
        elif POSITIVE in labels and len(labels) == 2:
            self.grades, self.scale = None, (0.0, 1.0)
        else:
            raise InputError(f"{source or 'the model'} is not a quality classifier: its labels are {labels}, "
                             f"expected {POSITIVE} and one other, or scores (__label__0, __label__1, ...)")
        self._grade_of = {label: g for label, g in zip(labels, grades)}
        self.structure = any(model.get_word_id(mark) >= 0 for mark in STRUCTURE_MARKS)

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
        """P(`__label__hq`), or the expected score of a graded model, for preprocessed lines
        (`preprocess.model_lines`), one fastText call."""
        if not lines:
            return np.zeros(0, np.float32)
        if self.grades is not None:
            labels, probs = self.model.predict(lines, k=-1)
            grade = self._grade_of
            expected = np.fromiter((sum(grade[lab] * p for lab, p in zip(ls, ps)) / max(sum(ps), 1e-12)
                                    for ls, ps in zip(labels, probs)), np.float64, len(lines))
            return np.clip(expected, *self.scale).astype(np.float32)
        labels, probs = self.model.predict(lines, k=1)
        top = np.fromiter((p[0] for p in probs), np.float32, len(lines))
        is_hq = np.fromiter((lab[0] == POSITIVE for lab in labels), bool, len(lines))
        # Two labels, softmax: P(hq) is the top probability or its complement; hierarchical
        # softmax can overshoot 1 slightly.
        return np.clip(np.where(is_hq, top, 1.0 - top), 0.0, 1.0).astype(np.float32)

    def scores(self, texts: list[str | None], langs: list[str | None] | str | None = None,
               prefix_chars: int | None = None) -> np.ndarray:
        """Each text's score (class docstring), float32. `langs`: a language code per text, one for
        all, or None to guess Chinese or not from each text."""
        return self.scores_of_lines(model_lines(texts, langs, prefix_chars, self.structure))
