"""Text units that quality rules count: words, lines, paragraphs and n-grams, per language.

Words in space-separated languages (`en` and the default for any other code) come from a regular
expression close to NLTK's `word_tokenize` (what datatrove's Gopher filters use for English): runs
of letters/digits, kept whole across inner hyphens and apostrophes, and every punctuation mark as a
token of its own ("..." is one token). Chinese has no spaces between words, so `zh` words come from
jieba's segmenter, with whitespace and punctuation tokens removed.
"""
from __future__ import annotations

import logging
import re
import unicodedata
from functools import lru_cache

_WORD = re.compile(r"\w+(?:[-'’.]\w+)*|\.\.\.|--|[^\w\s]")
_LINE_BREAKS = re.compile(r"\n+")
_PARAGRAPH_BREAKS = re.compile(r"\n{2,}")

CHINESE = "zh"


def unit_language(lang: str | None) -> str:
    """The text-unit family for a language code: `zh` (and `zh-*`) for jieba words, `en` for the rest."""
    return CHINESE if lang and (lang == CHINESE or lang.startswith("zh-") or lang.startswith("zh_")) else "en"


@lru_cache(maxsize=None)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def load_segmenter() -> None:
    """Load jieba's dictionary now (about a second), not on the first Chinese document."""
    _jieba()


@lru_cache(maxsize=4096)
def is_symbol(token: str) -> bool:
    """True when every character is punctuation or a symbol (Unicode categories P* and S*)."""
    return all(unicodedata.category(c)[0] in "PS" for c in token)


def words(text: str, lang: str = "en") -> list[str]:
    """Word tokens. `en`: punctuation tokens included (as NLTK gives them); `zh`: jieba words
    without whitespace or punctuation tokens."""
    if unit_language(lang) == CHINESE:
        return [w for w in _jieba().lcut(text) if w.strip() and not is_symbol(w.strip())]
    return _WORD.findall(text)


def lines(text: str) -> list[str]:
    """Lines, as `str.splitlines` gives them (empty lines included)."""
    return text.splitlines()


def nonempty_lines(text: str) -> list[str]:
    """Lines split on runs of newlines (no empty lines inside the text)."""
    return _LINE_BREAKS.split(text)


def paragraphs(text: str) -> list[str]:
    """Paragraphs: pieces of the stripped text between blank lines."""
    return _PARAGRAPH_BREAKS.split(text.strip())


def ngrams(tokens: list[str], n: int, sep: str = " ") -> list[str]:
    """Every run of `n` consecutive tokens, joined by `sep`."""
    return [sep.join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
