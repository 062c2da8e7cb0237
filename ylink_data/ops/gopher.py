"""gopher_quality and gopher_repetition: the heuristic rules of Gopher (Rae et al. 2021, appendix A
and table A1), with datatrove's default thresholds, for English and Chinese.

Each op measures every document (one dict of named values), then checks its rules in a fixed order;
the first rule that fails is the drop reason (`gopher_quality:word_count`). With `annotate: true`
the measures become columns (`gopher_<measure>`) and nothing is dropped, so thresholds can be tuned
on a sample. A rule is one line: (reason, measure, lowest allowed, highest allowed); a bound of None
switches that side off.

`language` chooses the text units: `en` (space-separated words), `zh` (jieba words), or `auto`, the
default (each document's `lang` column, Chinese and Japanese codes getting Chinese units and anything
else English ones; a document without `lang` goes by its script: mostly Han or kana gets Chinese
units; `base.LanguageAwareOp`, decided once per batch). With `en`, Chinese text is measured in
English words and every Chinese page fails (THUCNews: 0% kept).
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache
from itertools import compress, filterfalse
from operator import ne
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from ylink_data.text.transform import units
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, Document, Fraction, Language, LanguageAwareOp, Seconds, Strings
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext

Rule = tuple[str, str, float | None, float | None]  # reason, measure, low, high

# Gopher's English stop words (datatrove's list: the paper's "the, be, to, of, and, that, have, with").
EN_STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]
# The most frequent Chinese function words (particles, copula, prepositions, conjunctions).
ZH_STOP_WORDS = ["的", "了", "是", "在", "和", "有", "不", "这", "也", "就", "都", "与", "而", "及", "对", "为"]

# Thresholds that differ for Chinese documents (see GopherQuality's docstring for why).
ZH_QUALITY = {"min_avg_word_length": 1.2, "max_avg_word_length": 3.0}

# n-gram sizes: Gopher's are 2-10; an n far beyond that finds no repeats in real text and costs n
# list copies per document.
NGramSize = Annotated[int, Field(ge=1, le=100)]


class MeasuredOp(LanguageAwareOp):
    """Measures each document, then drops on the first failed rule, or writes the measures as columns."""

    name = ""
    annotate = False
    language: str = "en"
    columns: dict[str, pa.DataType] = {}
    column_prefix = "gopher_"  # annotate mode writes `<column_prefix><measure>` columns

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        op = cls(**params)  # the constructor loads nothing; GopherRepetition's columns follow its rules
        return {f"{op.column_prefix}{key}": dtype for key, dtype in op.columns.items()} if op.annotate else {}

    def measure(self, text: str, lang: str) -> dict[str, float]:
        raise NotImplementedError

    def rules(self, lang: str) -> list[Rule]:
        raise NotImplementedError

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        # jieba's dictionary (about 0.7 s and 95 MB): `zh` loads it now, `auto` before its first batch
        # that holds Chinese, so that an English-only run with the default does without it
        if self.language == units.CHINESE and self.segmented:
            units.load_segmenter()

    def _doc(self, doc: Document, lang: str) -> tuple[str, dict[str, float]]:
        return lang, self.measure(doc.text, lang)

    def verdict(self, lang: str, values: dict[str, float]) -> str | None:
        """The reason of the first rule `values` fail, or None."""
        for reason, key, low, high in self.rules(lang):
            value = values[key]
            if (low is not None and value < low) or (high is not None and value > high):
                return f"{self.name}:{reason}"
        return None

    def process(self, table: pa.Table) -> BatchResult:
        _, results, errors = self.each_document(table, self._doc)
        errors_or_none = errors if any(errors) else None
        if self.annotate:
            for key, dtype in self.columns.items():
                values = [r[1][key] if isinstance(r, tuple) else None for r in results]
                table = table.append_column(f"{self.column_prefix}{key}", pa.array(values, dtype))
            return BatchResult(table, errors=errors_or_none)
        dropped = [self.verdict(*r) if isinstance(r, tuple) else None for r in results]
        return BatchResult(table, dropped=dropped if any(dropped) else None, errors=errors_or_none)


def ratio(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


@register
class GopherQuality(MeasuredOp):
    """Gopher's quality rules, checked in this order (reason: rule):
    `word_count` (words that are not punctuation, within [min_doc_words, max_doc_words]),
    `mean_word_length` (their mean length in characters), `symbol_ratio` ("#", then "..." and "…",
    per word token), `bullet_lines` (share of lines starting with "•" or "-"), `ellipsis_lines`
    (share of lines ending with "..." or "…"), `alpha_words` (share of word tokens with a letter, at
    least min_alpha_words_ratio; datatrove calls this max_non_alpha_words_ratio) and `stop_words`
    (at least min_stop_words different stop words: the paper's "at least two of the following
    words", as datatrove counts them). Defaults: datatrove's, i.e. the paper's.

    Chinese (`zh` units): words are jieba's, punctuation tokens removed, so `symbol_ratio` and
    `alpha_words` count per real word (English counts punctuation tokens too, as NLTK does). A
    Chinese word is 1-4 characters, so Gopher's 3-10 mean-word-length range, meant to catch
    gibberish in space-separated text, would drop every Chinese page; `zh_thresholds` replaces it
    by a range for the mean jieba-word length in characters (1.2-3.0: on THUCNews val the median is
    1.86 and 1%-99% is 1.63-2.37; long runs of digits or Latin text fall outside). Stop words come from
    `zh_stop_words`. Every other number is the same, because it counts words, lines or characters."""

    name = "gopher_quality"
    columns = {"word_count": pa.int64(), "mean_word_length": pa.float64(), "hash_ratio": pa.float64(),
               "ellipsis_ratio": pa.float64(), "bullet_lines_ratio": pa.float64(),
               "ellipsis_lines_ratio": pa.float64(), "alpha_words_ratio": pa.float64(),
               "stop_words": pa.int64()}

    def __init__(self, language: Language = "auto", annotate: bool = False,
                 min_doc_words: NonNegativeInt | None = 50, max_doc_words: PositiveInt | None = 100_000,
                 min_avg_word_length: NonNegativeFloat | None = 3, max_avg_word_length: PositiveFloat | None = 10,
                 max_symbol_word_ratio: NonNegativeFloat | None = 0.1, max_bullet_lines_ratio: Fraction | None = 0.9,
                 max_ellipsis_lines_ratio: Fraction | None = 0.3, min_alpha_words_ratio: Fraction | None = 0.8,
                 min_stop_words: NonNegativeInt | None = 2, stop_words: Strings | None = None,
                 zh_stop_words: Strings | None = None,
                 zh_thresholds: dict[str, NonNegativeFloat | None] | None = None,
                 time_limit_s: Seconds | None = 60.0):
        self.language, self.annotate, self.time_limit_s = language, annotate, time_limit_s
        en = dict(min_doc_words=min_doc_words, max_doc_words=max_doc_words,
                  min_avg_word_length=min_avg_word_length, max_avg_word_length=max_avg_word_length,
                  max_symbol_word_ratio=max_symbol_word_ratio, max_bullet_lines_ratio=max_bullet_lines_ratio,
                  max_ellipsis_lines_ratio=max_ellipsis_lines_ratio, min_alpha_words_ratio=min_alpha_words_ratio,
                  min_stop_words=min_stop_words)
        zh = {**en, **(ZH_QUALITY if zh_thresholds is None else zh_thresholds)}
        unknown = set(zh) - set(en)
        if unknown:
            raise ValueError(f"zh_thresholds: unknown thresholds {sorted(unknown)}; known: {sorted(en)}")
        self._rules = {"en": self._make_rules(en), "zh": self._make_rules(zh)}
        self._stop = {"en": frozenset(EN_STOP_WORDS if stop_words is None else stop_words),
                      "zh": frozenset(ZH_STOP_WORDS if zh_stop_words is None else zh_stop_words)}

    @staticmethod
    def _make_rules(t: dict[str, Any]) -> list[Rule]:
        return [
            ("word_count", "word_count", t["min_doc_words"], t["max_doc_words"]),
            ("mean_word_length", "mean_word_length", t["min_avg_word_length"], t["max_avg_word_length"]),
            ("symbol_ratio", "hash_ratio", None, t["max_symbol_word_ratio"]),
            ("symbol_ratio", "ellipsis_ratio", None, t["max_symbol_word_ratio"]),
            ("bullet_lines", "bullet_lines_ratio", None, t["max_bullet_lines_ratio"]),
            ("ellipsis_lines", "ellipsis_lines_ratio", None, t["max_ellipsis_lines_ratio"]),
            ("alpha_words", "alpha_words_ratio", t["min_alpha_words_ratio"], None),
            ("stop_words", "stop_words", t["min_stop_words"], None),
        ]

    def rules(self, lang: str) -> list[Rule]:
        return self._rules[lang]

    def measure(self, text: str, lang: str) -> dict[str, float]:
        tokens = units.words(text, lang)
        # Word count and mean length leave out punctuation tokens: for English those made only of
        # datatrove's punctuation characters (as datatrove does), for Chinese jieba's P*/S* tokens.
        symbolic = units.is_symbol if lang == units.CHINESE else units.is_punctuation
        content = list(filterfalse(symbolic, tokens))
        n = len(tokens)
        lines = text.splitlines()
        return {
            "word_count": len(content),
            "mean_word_length": ratio(sum(map(len, content)), len(content)),
            "hash_ratio": ratio(text.count("#"), n),
            "ellipsis_ratio": ratio(text.count("...") + text.count("…"), n),
            "bullet_lines_ratio": ratio(sum(s.lstrip().startswith(("•", "-")) for s in lines), len(lines)),
            "ellipsis_lines_ratio": ratio(sum(s.rstrip().endswith(("...", "…")) for s in lines), len(lines)),
            "alpha_words_ratio": ratio(sum(map(_has_letter, tokens)), n),
            "stop_words": len(self._stop[lang].intersection(tokens)),
        }


@lru_cache(maxsize=1 << 18)  # distinct tokens of a task's pages: 65,536 were too few (the cache thrashed)
def _has_letter(token: str) -> bool:
    return any(c.isalpha() for c in token)


def duplicates(items: list[str]) -> tuple[int, int]:
    """How many items repeat an earlier one, and their characters."""
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


def _top_ngram_chars(tokens: list[str], n: int, sep: str) -> int:
    """Characters covered by the most frequent n-gram, joined by `sep` (its length times its count;
    of equally frequent n-grams, the first)."""
    if len(tokens) < n:
        return 0
    grams = Counter(zip(*(tokens[k:] for k in range(n))))
    gram, count = grams.most_common(1)[0]
    return (sum(map(len, gram)) + len(sep) * (n - 1)) * count


def _duplicate_ngram_chars(tokens: list[str], n: int) -> int:
    """Characters in n-grams that repeat an earlier one, skipping past each repeat (no overlaps):
    datatrove's loop (`find_all_duplicate`), with n-grams as tuples. The loop is only walked at the
    positions whose n-gram occurred before; between them every n-gram is new."""
    grams = list(zip(*(tokens[k:] for k in range(n))))
    size = len(grams)
    first = dict(zip(reversed(grams), range(size - 1, -1, -1)))  # n-gram -> its first position
    if len(first) == size:
        return 0
    later = compress(range(size), map(ne, map(first.__getitem__, grams), range(size)))
    seen: set[tuple[str, ...]] = set()  # n-grams seen again at a position that was not skipped
    skipped: set[int] = set()
    chars = start = 0
    for i in later:
        if i < start:
            continue  # inside the n-gram just counted: skipped, so not seen
        gram = grams[i]
        if gram in seen or first[gram] not in skipped:
            chars += sum(map(len, gram))
            skipped.update(range(i + 1, i + n))
            start = i + n
        else:
            seen.add(gram)
    return chars


@register
class GopherRepetition(MeasuredOp):
    """Gopher's repetition rules, in this order (reason: rule): `dup_para_frac` and
    `dup_para_char_frac` (paragraphs that repeat an earlier one, by count and by characters),
    `dup_line_frac` and `dup_line_char_frac` (the same for lines), `top_<n>_gram` (characters
    covered by the most frequent word n-gram, n = keys of `top_n_grams`), `dup_<n>_gram`
    (characters in repeated word n-grams, n = keys of `dup_n_grams`). Character fractions are of
    the whole text. Defaults: datatrove's, i.e. Gopher's table A1.

    Chinese (`zh` units): n-grams are of jieba words joined without spaces, so every fraction is
    still a fraction of characters and the English thresholds carry over unchanged."""

    name = "gopher_repetition"

    def __init__(self, language: Language = "auto", annotate: bool = False,
                 dup_line_frac: Fraction | None = 0.3, dup_para_frac: Fraction | None = 0.3,
                 dup_line_char_frac: Fraction | None = 0.2, dup_para_char_frac: Fraction | None = 0.2,
                 top_n_grams: dict[NGramSize, Fraction] | None = None,
                 dup_n_grams: dict[NGramSize, Fraction] | None = None,
                 time_limit_s: Seconds | None = 60.0):
        self.language, self.annotate, self.time_limit_s = language, annotate, time_limit_s
        self.top_n_grams = {2: 0.2, 3: 0.18, 4: 0.16} if top_n_grams is None else dict(top_n_grams)
        self.dup_n_grams = ({5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}
                            if dup_n_grams is None else dict(dup_n_grams))
        self._rules: list[Rule] = [
            ("dup_para_frac", "dup_para_frac", None, dup_para_frac),
            ("dup_para_char_frac", "dup_para_char_frac", None, dup_para_char_frac),
            ("dup_line_frac", "dup_line_frac", None, dup_line_frac),
            ("dup_line_char_frac", "dup_line_char_frac", None, dup_line_char_frac),
            *((f"top_{n}_gram", f"top_{n}_gram_frac", None, f) for n, f in sorted(self.top_n_grams.items())),
            *((f"dup_{n}_gram", f"dup_{n}_gram_frac", None, f) for n, f in sorted(self.dup_n_grams.items())),
        ]
        self.columns = {key: pa.float64() for _, key, _, _ in self._rules}

    def rules(self, lang: str) -> list[Rule]:
        return self._rules

    def measure(self, text: str, lang: str) -> dict[str, float]:
        size = len(text)
        paras = units.paragraphs(text)
        para_dups, para_chars = duplicates(paras)
        lines = units.nonempty_lines(text)
        line_dups, line_chars = duplicates(lines)
        values = {"dup_para_frac": ratio(para_dups, len(paras)), "dup_para_char_frac": ratio(para_chars, size),
                  "dup_line_frac": ratio(line_dups, len(lines)), "dup_line_char_frac": ratio(line_chars, size)}
        tokens = units.words(text, lang)
        sep = "" if lang == units.CHINESE else " "
        grams = NGrams(tokens) if len(tokens) >= NGrams.MIN_TOKENS else None
        for n in self.top_n_grams:
            chars = grams.top_chars(n, len(sep)) if grams else _top_ngram_chars(tokens, n, sep)
            values[f"top_{n}_gram_frac"] = ratio(chars, size)
        # A repeated n-gram contains a repeated m-gram for every m < n: once no n-gram repeats, no
        # longer one does.
        repeats = True
        for n in sorted(self.dup_n_grams):
            chars = 0
            if repeats:
                chars = grams.duplicate_chars(n) if grams else _duplicate_ngram_chars(tokens, n)
            repeats = chars > 0
            values[f"dup_{n}_gram_frac"] = ratio(chars, size)
        return values


class NGrams:
    """The n-grams of a long token list as 64-bit hashes (numpy), for the same counts as
    `_top_ngram_chars` and `_duplicate_ngram_chars` at C speed. Two different n-grams share a hash
    with a chance of about (tokens / 2**32)**2, i.e. never in practice."""

    MIN_TOKENS = 400  # below this, building the arrays costs more than the plain loops
    _MUL = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, tokens: list[str]):
        self.size = len(tokens)
        self.hashes = np.fromiter(map(hash, tokens), dtype=np.int64, count=self.size).view(np.uint64)
        self.ends = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, tokens), dtype=np.int64, count=self.size), out=self.ends[1:])
        self._keys = {1: self.hashes}

    def keys(self, n: int) -> np.ndarray:
        if n not in self._keys:
            shorter = self.keys(n - 1)
            with np.errstate(over="ignore"):
                self._keys[n] = shorter[:-1] * self._MUL + self.hashes[n - 1:]
        return self._keys[n]

    def _first(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Per n-gram position: the first position of the same n-gram; and the unique inverse."""
        _, first, inverse = np.unique(self.keys(n), return_index=True, return_inverse=True)
        return first[inverse], inverse

    def top_chars(self, n: int, sep_len: int) -> int:
        if self.size < n:
            return 0
        first_at, inverse = self._first(n)
        counts = np.bincount(inverse)
        best = counts.max()
        at = int(first_at[counts[inverse] == best].min())  # of equally frequent n-grams, the first
        return (int(self.ends[at + n] - self.ends[at]) + sep_len * (n - 1)) * int(best)

    def duplicate_chars(self, n: int) -> int:
        if self.size < n:
            return 0
        first_at, _ = self._first(n)
        later = np.flatnonzero(first_at != np.arange(len(first_at))).tolist()
        if not later:
            return 0
        first_at = first_at.tolist()
        ends = self.ends
        seen: set[int] = set()  # first positions of n-grams seen again at a position not skipped
        skipped: set[int] = set()
        chars = start = 0
        for i in later:
            if i < start:
                continue
            first = first_at[i]
            if first in seen or first not in skipped:
                chars += int(ends[i + n] - ends[i])
                skipped.update(range(i + 1, i + n))
                start = i + n
            else:
                seen.add(first)
        return chars
