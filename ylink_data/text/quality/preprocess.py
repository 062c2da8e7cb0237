"""What a quality classifier reads of a document: one line of lowercased, space-separated tokens.

fastText splits its input on whitespace only, so the line is made of tokens separated by single
spaces: English text is lowercased with its punctuation marks split off as tokens of their own
("end." and "end" are one word, "." another), newlines and runs of whitespace become one space.
Chinese has no spaces between words: its text is segmented by rjieba (jieba-rs, jieba's dictionary
in Rust, HMM off: the same words as `jieba.lcut(text, HMM=False)` at 12-14x its speed; jieba
itself if rjieba is missing) and the words joined by spaces.

Only a prefix of each document is read (`PREFIX_CHARS`): fastText's time grows with the number of
tokens, and so does the preprocessing. A Chinese character carries about as much as two or three
English letters, so Chinese reads fewer. Both numbers, and words rather than characters for Chinese,
were chosen with `bench/bench_quality.py --sweep` (held-out and cross-source ROC AUC and docs/s per
core by preprocessing, prefix length, dimension and quantization; bench/RESULTS.md, "Quality
classifiers"): Chinese characters (with fastText's bigrams: character bigrams) scored as well on
held-out data but worse on a crawl the model never saw.

A model may also read the document's shape (`structure=True`, chosen per data set by `ylink quality
train`'s search, text/quality/autotune.py): a few tokens of its own, measured on the whole text, before
the words: its length (`_len<k>`, half-octave steps of characters), number of non-empty lines
(`_lines<k>`, octaves), mean line length (`_avg<k>`, octaves), the share of lines that end in a
sentence's closing mark (`_punct<0-4>`, quarters) and whether the last one does (`_endp` / `_endx`),
and, over the prefix the model reads, the shares of digits (`_dig<0-5>`) and of capital letters
(`_up<0-5>`, before lowercasing), in 5% steps. These are what Gopher's, C4's and FineWeb's rules
look at, and what lowercased words of a prefix cannot show; their value per data set is measured in
bench/RESULTS.md ("Quality trainer: per data set"), and they cost about 10 us a 1 KB document. Real
text never yields such a token: `_` is split off English words as punctuation, and jieba cuts it
from Chinese ones.
A model trained with them has them in its vocabulary, which is how `QualityModel` knows to add them.
"""
from __future__ import annotations

import math
import re

from ylink_data.text.transform.units import loaded_jieba, unit_language

try:
    from rjieba import cut as _rjieba_cut

    def _words(text: str) -> list[str]:
        return _rjieba_cut(text, False)
except ImportError:  # a hard dependency, but jieba gives the same words
    def _words(text: str) -> list[str]:
        return loaded_jieba().lcut(text, HMM=False)

# Characters of a document read, per text-unit family (chosen by measurement, see the docstring).
PREFIX_CHARS = {"en": 500, "zh": 150}
# Punctuation split off English words: ASCII marks and the common typographic ones. A regular
# expression with a function replacement measured fastest here (51k 1 KB docs/s, against 34k for
# a chain of str.replace, 34k for a template replacement and 15k for str.translate to " c "; one
# `findall` of the tokens, measured later, was 27% slower than it).
_PUNCT = re.compile(r"[!-/:-@\[-`{-~“”‘’«»…–—]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


# Marks that close a sentence (or a quote that closes one), in the scripts the rules know.
_CLOSING = frozenset('.!?。！？…"”»\'」』:;')
_DIGITS = re.compile(r"[0-9]")  # a regex: str.translate takes a slow path on non-ASCII text (9 us on 150 Han)
_CAPITALS = re.compile(r"[A-ZÀ-ÖØ-ÞΑ-ΩА-Я]")  # Latin, Greek and Cyrillic capitals
# Tokens every structure line holds one of: their presence in a model's vocabulary marks the model.
STRUCTURE_MARKS = ("_endp", "_endx")


def structure_tokens(text: str, head_chars: int = 500) -> str:
    """The document-shape tokens of `text` (module docstring): its lines measured on the whole text,
    digits and capitals on the first `head_chars` characters (the part the model reads)."""
    lines = [line for line in (raw.rstrip() for raw in text.split("\n")) if line.strip()]
    n_lines = max(1, len(lines))
    closed = sum(1 for line in lines if line[-1] in _CLOSING)
    size = len(text)
    head = text[:head_chars] if head_chars > 0 else text
    n_head = max(1, len(head))
    digits = len(_DIGITS.findall(head))
    capitals = len(_CAPITALS.findall(head))
    return (f"_len{round(2 * math.log2(size + 1))} _lines{int(math.log2(n_lines))} "
            f"_avg{int(math.log2(size / n_lines + 1))} _punct{round(4 * closed / n_lines)} "
            f"_dig{min(5, round(20 * digits / n_head))} _up{min(5, round(20 * capitals / n_head))} "
            f"{STRUCTURE_MARKS[0] if lines and lines[-1][-1] in _CLOSING else STRUCTURE_MARKS[1]}")


def looks_chinese(text: str, sample: int = 200) -> bool:
    """True when at least a fifth of the first `sample` non-space characters are CJK ideographs:
    a cheap stand-in for a language code when a document has none."""
    head = text[:sample * 2]
    if head.isascii():
        return False
    chars = "".join(head.split())[:sample]
    return bool(chars) and len(_HAN.findall(chars)) * 5 >= len(chars)


def text_family(text: str, lang: str | None) -> str:
    """`zh` or `en`: the language code when there is one (`auto`/None: guessed from the text)."""
    if lang is None or lang == "auto" or lang == "":
        return "zh" if looks_chinese(text) else "en"
    return unit_language(lang)


def _english(text: str, n: int) -> str:
    if n > 0:
        text = text[:n]
    return " ".join(_PUNCT.sub(_spaced, text.lower()).split())


def _chinese(text: str, n: int) -> str:
    if n > 0:
        text = text[:n]
    return " ".join(" ".join(_words(text.lower())).split())


_LINE = {"en": _english, "zh": _chinese}


def model_line(text: str | None, lang: str | None = None, prefix_chars: int | None = None,
               structure: bool = False) -> str:
    """The fastText input line for one document (see the module docstring); `lang` is a language
    code (`zh`, `zh-Hans`, `en`...) or None/`auto` to guess it; `prefix_chars` overrides the
    per-language prefix (0 or less: the whole text); `structure` puts the shape tokens first."""
    if not text:
        return ""
    family = text_family(text, lang)
    n = PREFIX_CHARS[family] if prefix_chars is None else prefix_chars
    line = _LINE[family](text, n)
    return f"{structure_tokens(text, n)} {line}" if structure else line


def _spaced(m: re.Match) -> str:
    return f" {m.group()} "


def model_lines(texts: list[str | None], langs: list[str | None] | str | None = None,
                prefix_chars: int | None = None, structure: bool = False) -> list[str]:
    """`model_line` for each text; `langs` is one code per text, one code for all, or None."""
    if structure:
        codes = langs if isinstance(langs, list) else [langs] * len(texts)
        if len(codes) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(codes)} language codes")
        return [model_line(t, lang, prefix_chars, True) for t, lang in zip(texts, codes)]
    if isinstance(langs, str) and langs not in ("", "auto"):
        family = unit_language(langs)  # one language for the batch: resolved once
        line = _LINE[family]
        n = PREFIX_CHARS[family] if prefix_chars is None else prefix_chars
        lines = [line(t, n) if t else "" for t in texts]
    elif langs is None or isinstance(langs, str):
        lines = [model_line(t, langs, prefix_chars) for t in texts]
    elif len(langs) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(langs)} language codes")
    else:
        lines = [model_line(t, lang, prefix_chars) for t, lang in zip(texts, langs)]
    return lines
