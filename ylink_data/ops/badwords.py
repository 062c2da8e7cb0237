"""badwords: C4's bad-words rule (Raffel et al. 2020, section 2.2: "we discarded any page that
contained any word on the List of Dirty, Naughty, Obscene or Otherwise Bad Words"), right for Chinese.

English (and any space-separated language): an entry matches as a whole word or phrase of the
lowercased text, as in C4 and datatrove's C4BadWordsFilter. Chinese has no spaces, and substring
matching of LDNOOBW's one-character entries (性, 奶, 乳) would drop most news ("可能性", "牛奶"), the
failure peers show; so entries of one or two Han characters must equal a whole jieba word, and
longer entries (and entries with Latin letters or digits) match as substrings, though never inside a
longer run of Latin letters or digits.

The drop reason names the list that matched: `badwords:zh-gambling`. `check_title` also looks at
`metadata["title"]` when the reader kept one (JSONL/Parquet inputs), because hijacked pages often
carry their gambling brand in the title only.
"""
from __future__ import annotations

import re

from pydantic import PositiveInt

from ylink_data.text.transform import units
from ylink_data.text.transform.wordlists import bundled_names, load_word_list
from ylink_data.ops import register
from ylink_data.ops.base import Document, DocumentFilter, Language, LanguageAwareOp, Seconds, Strings, named_files
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext

DEFAULT_LISTS = {"zh": ["zh-obscene", "zh-gambling"], "en": []}
_HAN = re.compile(r"^[\u3400-\u9fff\U00020000-\U0002ffff]{1,2}$")


def _bounded(entry: str) -> str:
    """A substring pattern that cannot start or end inside a longer run of Latin letters or digits
    (`bt365` must not match `bt3650`)."""
    pattern = re.escape(entry)
    if entry[:1].isascii() and entry[:1].isalnum():
        pattern = r"(?<![a-z0-9])" + pattern
    if entry[-1:].isascii() and entry[-1:].isalnum():
        pattern += r"(?![a-z0-9])"
    return pattern


@register
class BadWords(LanguageAwareOp, DocumentFilter):
    """Drops documents containing at least `min_matches` entries of a word list (reason
    `badwords:<list>`). `lists`: bundled list names (`zh-obscene`, `zh-gambling`; see
    ylink_data/assets/badwords/SOURCE.md) or paths/URLs of one-entry-per-line files; by default the
    bundled lists of `language` (none for English: pass the LDNOOBW `en` file you want)."""

    name = "badwords"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        # A list name without a slash is a bundled list (`load_word_list`): part of the package.
        return [(key, spec) for key, spec in named_files("lists", params.get("lists"))
                if "/" in spec or spec not in bundled_names("badwords")]

    def __init__(self, language: Language = "en", lists: Strings | None = None,
                 min_matches: PositiveInt = 1, check_title: bool = True, time_limit_s: Seconds | None = 60.0):
        self.language, self.min_matches, self.check_title = language, min_matches, check_title
        self.time_limit_s = time_limit_s
        if lists is None:
            lists = DEFAULT_LISTS["zh" if language == "zh" else "en"]
            if language == "auto":
                lists = DEFAULT_LISTS["zh"]
        self.list_names = lists
        self._lists: list[tuple[str, re.Pattern | None, frozenset[str], re.Pattern | None]] = []

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        if self.language == units.CHINESE:  # `auto`: before its first batch that holds Chinese
            units.load_segmenter()
        self._lists = [self._compile(spec) for spec in self.list_names]

    @staticmethod
    def _compile(spec: str):
        entries = sorted({e.lower() for e in load_word_list(spec, "badwords")}, key=len, reverse=True)
        label = spec.rsplit("/", 1)[-1].removesuffix(".txt")
        whole = re.compile(r"(?:\W|^)(" + "|".join(map(re.escape, entries)) + r")(?:\W|$)") if entries else None
        han_words = frozenset(e for e in entries if _HAN.match(e))
        longer = [e for e in entries if not _HAN.match(e)]
        substring = re.compile("|".join(map(_bounded, longer))) if longer else None
        return label, whole, han_words, substring

    def _matches(self, text: str, lang: str) -> str | None:
        lowered = text.lower()
        words = set(units.words(text, lang)) if lang == units.CHINESE else None
        for label, whole, han_words, substring in self._lists:
            if lang == units.CHINESE:
                hits = len(words & han_words) if han_words else 0
                if substring is not None and hits < self.min_matches:
                    hits += sum(1 for _ in zip(range(self.min_matches - hits), substring.finditer(lowered)))
            else:
                hits = sum(1 for _ in zip(range(self.min_matches), whole.finditer(lowered))) if whole else 0
            if hits >= self.min_matches:
                return label
        return None

    def filter(self, doc: Document, lang: str) -> bool | str:
        if not self._lists:
            self.setup()
        texts = [doc.text]
        title = doc.metadata.get("title") if self.check_title else None
        if isinstance(title, str) and title:
            texts.append(title)
        for text in texts:
            label = self._matches(text, lang)
            if label:
                return label
        return True
