"""c4_quality: the line and page rules of C4 (Raffel et al. 2020, section 2.2), as datatrove's
C4QualityFilter applies them (its defaults; the bad-words list is a separate filter there and here).

Each line (split on newlines, stripped) goes through these checks in order; the first that fails
removes the line and counts it in the stage's counters (`c4_lines_removed_<rule>`):
`too_long_word` (a word over max_word_length characters), then Wikipedia-style citations ("[1]",
"[edit]", "[citation needed]") are cut out, `no_terminal_punct` (the line must end with terminal
punctuation and not with an ellipsis), `too_few_words` (fewer than min_words_per_line words),
`javascript` (mentions "javascript") and `policy` (cookie / terms-of-use phrases). Two things in a
line that passed the earlier checks drop the whole document: "lorem ipsum" (`lorem_ipsum`) and a
curly bracket "{" (`curly_bracket`). Finally a document with fewer than min_num_sentences sentences
in its kept lines is dropped (`too_few_sentences`); a kept document's text is its kept lines joined
by newlines. Drop reasons are checked in the order lorem_ipsum, curly_bracket, too_few_sentences.

English sentences are counted as datatrove 0.10 counts them: spaCy's sentencizer over spaCy's English
tokens (emulated in `units`): a sentence ends at a "." "!" "?" token, so abbreviations kept whole
("Mr.", "U.S.", "e.g.") and "..." end none. (`split_sentences` still cuts English lines with a
punctuation regex.)

`split_sentences: true` applies the line rules to each sentence of each line instead (datatrove's
split_paragraph=False, but line breaks are kept): for text whose paragraphs are flattened into one
line, such as THUCNews, where a trailing byline without punctuation would otherwise remove the whole
article. Unset, it is on for Chinese documents (as in the zh preset) and off for English ones (C4's
lines, datatrove's default).

Chinese (`zh` units, no spaces between words): terminal punctuation adds 。！？ and closing quotes
and brackets (”’」』）》); an ellipsis (…… or ...) still does not end a line, as in English, where C4
drops it because it marks a truncated teaser. `too_few_words` counts characters that are neither
whitespace nor punctuation, at least zh_min_chars_per_line (6: C4's 3 words times the median
jieba-word length of THUCNews news, 1.86 characters, rounded up). Sentences are split on 。！？!?.
`too_long_word` looks at runs of non-Han characters (a Han run has no word boundaries to split on,
so every Chinese paragraph would be one "word").

`annotate: true` changes no text and drops nothing; it writes `c4_<measure>` columns.
"""
from __future__ import annotations

import re
from collections import Counter

import pyarrow as pa
from pydantic import NonNegativeInt, PositiveInt

from ylink_data.text.transform import units
from ylink_data.text.transform.lines import POLICY_PHRASES, content_chars, ends_sentence
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, Document, Language, Seconds
from ylink_data.ops.gopher import MeasuredOp, Rule

CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
# A sentence ends at . ! ? (repeated), optionally followed by closing quotes/brackets, then a space.
_EN_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]+[\"'”’)\]]*(?=\s+\S)")  # from a run's start only: linear
_ZH_SENTENCE = re.compile(r".+?(?:[。！？!?]+[”’」』）)\"']*|$)")
# Runs that are not Han ideographs, CJK punctuation, fullwidth forms or whitespace: zh "words".
_ZH_NON_HAN = re.compile(r"[^\s\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]+")


def sentences(line: str, lang: str) -> list[str]:
    """The sentences of a line, each with its closing punctuation."""
    if lang == units.CHINESE:
        pieces = _ZH_SENTENCE.findall(line)
    else:
        cuts = [m.end() for m in _EN_SENTENCE_END.finditer(line)]
        pieces = [line[a:b] for a, b in zip([0, *cuts], [*cuts, len(line)])]
    return [p.strip() for p in pieces if p.strip()]


def sentence_count(line: str, lang: str) -> int:
    """Sentences in a line: English as datatrove counts them (spaCy's sentencizer over its tokens,
    so "Mr." or "U.S." ends no sentence), Chinese by `sentences`."""
    if lang == units.CHINESE:
        return len(sentences(line, lang))
    return units.english_sentence_count(line)


@register
class C4Quality(MeasuredOp):
    """C4's rules (see the module docstring); defaults are datatrove's C4QualityFilter's."""

    name = "c4_quality"
    segmented = False  # C4 counts characters in Chinese, not words: no segmenter
    columns = {"sentences": pa.int64(), "lines_kept": pa.int64(), "lines_removed": pa.int64(),
               "lorem_ipsum": pa.int64(), "curly_bracket": pa.int64()}
    LINE_RULES = ("too_long_word", "no_terminal_punct", "too_few_words", "javascript", "policy")

    def __init__(self, language: Language = "auto", annotate: bool = False,
                 remove_citations: bool = True, filter_no_terminal_punct: bool = True,
                 min_num_sentences: NonNegativeInt | None = 5, min_words_per_line: NonNegativeInt | None = 3,
                 zh_min_chars_per_line: NonNegativeInt | None = 6, max_word_length: PositiveInt | None = 1000,
                 filter_lorem_ipsum: bool = True, filter_javascript: bool = True,
                 filter_curly_bracket: bool = True, filter_policy: bool = True,
                 split_sentences: bool | None = None, time_limit_s: Seconds | None = 60.0):
        self.language, self.annotate, self.time_limit_s = language, annotate, time_limit_s
        self.remove_citations, self.filter_no_terminal_punct = remove_citations, filter_no_terminal_punct
        self.min_words = {"en": min_words_per_line, "zh": zh_min_chars_per_line}
        self.max_word_length = max_word_length
        self.filter_lorem_ipsum, self.filter_javascript = filter_lorem_ipsum, filter_javascript
        self.filter_curly_bracket, self.filter_policy = filter_curly_bracket, filter_policy
        # per unit language; unset: on for Chinese (its news flattened into one line), off for English
        self.split_sentences = {"en": bool(split_sentences), "zh": split_sentences is not False}
        self._rules: list[Rule] = [
            *([("lorem_ipsum", "lorem_ipsum", None, 0)] if filter_lorem_ipsum else []),
            *([("curly_bracket", "curly_bracket", None, 0)] if filter_curly_bracket else []),
            *([("too_few_sentences", "sentences", min_num_sentences, None)] if min_num_sentences else []),
        ]

    def rules(self, lang: str) -> list[Rule]:
        return self._rules

    def _line_rule(self, line: str, lang: str) -> tuple[str | None, str]:
        """The rule that removes `line` (None keeps it), and the line with citations cut out."""
        zh = lang == units.CHINESE
        if self.max_word_length and len(line) > self.max_word_length:  # else no word can be too long
            words = _ZH_NON_HAN.findall(line) if zh else line.split()
            if any(len(w) > self.max_word_length for w in words):
                return "too_long_word", line
        count = content_chars(line) if zh else len(line.split())  # datatrove counts before citations go
        if self.remove_citations:
            line = CITATION.sub("", line)
        if self.filter_no_terminal_punct and not ends_sentence(line, zh):
            return "no_terminal_punct", line
        if self.min_words[lang] and count < self.min_words[lang]:
            return "too_few_words", line
        return None, line

    def clean(self, text: str, lang: str) -> tuple[dict[str, float], str, Counter]:
        """The measures, the text of the kept lines, and removed lines per rule."""
        removed: Counter[str] = Counter()
        kept: list[str] = []
        values = {"sentences": 0, "lines_kept": 0, "lines_removed": 0, "lorem_ipsum": 0, "curly_bracket": 0}
        sep = "" if lang == units.CHINESE else " "
        split = self.split_sentences[lang]
        for raw in text.splitlines():
            parts = sentences(raw, lang) if split else [raw.strip()]
            kept_parts = [p for p in (self._check(p, lang, values, removed) for p in parts) if p is not None]
            if kept_parts:
                kept.append(sep.join(kept_parts))
                values["sentences"] += len(kept_parts) if split else sentence_count(kept[-1], lang)
        values["lines_kept"], values["lines_removed"] = len(kept), sum(removed.values())
        return values, "\n".join(kept).strip(), removed

    def _check(self, line: str, lang: str, values: dict, removed: Counter) -> str | None:
        """`line` (a sentence with split_sentences) as kept, or None when a rule removes it."""
        rule, line = self._line_rule(line, lang)
        if rule is None:
            lower = line.lower()
            if self.filter_lorem_ipsum and "lorem ipsum" in lower:
                values["lorem_ipsum"] = 1
            if self.filter_javascript and "javascript" in lower:
                rule = "javascript"  # before the bracket check, as in datatrove
            else:
                if self.filter_curly_bracket and "{" in line:
                    values["curly_bracket"] = 1
                if self.filter_policy and any(p in lower for p in POLICY_PHRASES):
                    rule = "policy"
        if rule:
            removed[rule] += 1
            return None
        return line

    def measure(self, text: str, lang: str) -> dict[str, float]:
        return self.clean(text, lang)[0]

    def _cleaned(self, doc: Document, lang: str) -> tuple[str, dict[str, float], str, Counter]:
        return (lang, *self.clean(doc.text, lang))

    def process(self, table: pa.Table) -> BatchResult:
        docs, results, errors = self.each_document(table, self._cleaned)
        errors_or_none = errors if any(errors) else None
        ok = [r if isinstance(r, tuple) else None for r in results]
        if self.annotate:
            for key, dtype in self.columns.items():
                table = table.append_column(f"c4_{key}", pa.array([r and r[1][key] for r in ok], dtype))
            return BatchResult(table, errors=errors_or_none)
        dropped = [r and self.verdict(r[0], r[1]) for r in ok]
        counters: Counter[str] = Counter()
        texts = table.column("text").to_pylist()
        for i, r in enumerate(ok):
            if r is None or dropped[i]:
                continue
            texts[i] = r[2]
            for rule, n in r[3].items():
                counters[f"c4_lines_removed_{rule}"] += n
            if r[3]:
                counters["c4_documents_changed"] += 1
        index = table.schema.get_field_index("text")
        table = table.set_column(index, "text", pa.array(texts, table.schema.field("text").type))
        return BatchResult(table, dropped=dropped if any(dropped) else None, errors=errors_or_none,
                           counters=dict(counters))
