"""fineweb_quality: FineWeb's own heuristic rules (Penedo et al. 2024, section 3.3 and appendix),
with datatrove's FineWebQualityFilter defaults, for English and Chinese.

Measures (lines: the text split on "\\n", blank lines left out, as datatrove 0.10 does), checked in
this order (reason: drop when):
`line_punct_ratio`: share of lines ending with terminal punctuation is at most line_punct_thr (0.12;
not applied to a ratio of 0 with line_punct_exclude_zero, which unset is on for Chinese and off for
English);
`short_line_ratio`: share of lines of at most short_line_length (30) characters is at least
short_line_thr (0.67); `char_dup_ratio`: characters in non-empty lines that repeat an earlier line,
over all characters except newlines, is at least char_duplicates_ratio (0.01); `list_ratio`:
newlines per word token is above new_line_ratio (0.3). Bounds are inclusive where datatrove's are
(the first three), so decisions agree at the boundary too.

Terminal punctuation for English is FineWeb's own `stop_chars` (. ' " ! ?), with which FineWeb was
made; datatrove 0.10 changed its default to its TERMINAL_PUNCTUATION set, which has no quotes, so a
line ending in a closing quote no longer counts there. We keep FineWeb's: on bench/bench_purify.py's
English documents datatrove 0.10 drops 87 more documents for `line_punct_ratio` when this op runs
alone on them (2.4%), and none more when it runs after Gopher and C4 (they drop those first).

Chinese (`zh` units): terminal punctuation adds 。！？ and closing quotes and brackets; a short line is
at most zh_short_line_length characters (10, ours: FineWeb's 30 characters are about 5 English
words, 5-6 words incl. spaces; THUCNews' median jieba word is 1.86 characters, so 5-6 Chinese words
are about 10 characters); `list_ratio` counts jieba words. The ratios are fractions of lines or
characters, so their thresholds carry over.

`annotate: true` drops nothing and writes `fineweb_<measure>` columns.
"""
from __future__ import annotations

import pyarrow as pa
from pydantic import NonNegativeFloat, PositiveInt

from ylink_data.text.transform import units
from ylink_data.ops import register
from ylink_data.ops.base import Fraction, Language, Seconds
from ylink_data.ops.gopher import MeasuredOp, Rule, duplicates, ratio

EN_STOP_CHARS = (".", "'", '"', "!", "?")  # datatrove's stop_chars
ZH_STOP_CHARS = EN_STOP_CHARS + ("。", "！", "？", "”", "’", "」", "』", "）", "》", "．", "…")


@register
class FineWebQuality(MeasuredOp):
    """FineWeb's rules (see the module docstring); defaults are datatrove's."""

    name = "fineweb_quality"
    column_prefix = "fineweb_"
    columns = {"line_punct_ratio": pa.float64(), "short_line_ratio": pa.float64(),
               "char_dup_ratio": pa.float64(), "list_ratio": pa.float64()}
    # Rules whose bound itself fails (datatrove: ratio <= thr, ratio >= thr, ratio >= thr).
    INCLUSIVE = frozenset({"line_punct_ratio", "short_line_ratio", "char_dup_ratio"})

    def __init__(self, language: Language = "auto", annotate: bool = False,
                 line_punct_thr: Fraction | None = 0.12, line_punct_exclude_zero: bool | None = None,
                 short_line_thr: Fraction | None = 0.67, short_line_length: PositiveInt = 30,
                 zh_short_line_length: PositiveInt = 10, char_duplicates_ratio: Fraction | None = 0.01,
                 new_line_ratio: NonNegativeFloat | None = 0.3, time_limit_s: Seconds | None = 60.0):
        self.language, self.annotate, self.time_limit_s = language, annotate, time_limit_s
        # per unit language; unset: on for Chinese (a one-line article ending in a byline has ratio 0),
        # off for English (datatrove's default)
        self.line_punct_exclude_zero = {"en": bool(line_punct_exclude_zero), "zh": line_punct_exclude_zero is not False}
        self.short = {"en": short_line_length, "zh": zh_short_line_length}
        self._rules: list[Rule] = [
            ("line_punct_ratio", "line_punct_ratio", line_punct_thr, None),
            ("short_line_ratio", "short_line_ratio", None, short_line_thr),
            ("char_dup_ratio", "char_dup_ratio", None, char_duplicates_ratio),
            ("list_ratio", "list_ratio", None, new_line_ratio),
        ]

    def rules(self, lang: str) -> list[Rule]:
        return self._rules

    def verdict(self, lang: str, values: dict[str, float]) -> str | None:
        for reason, key, low, high in self._rules:
            value, inclusive = values[key], key in self.INCLUSIVE
            if key == "line_punct_ratio" and value == 0 and self.line_punct_exclude_zero[lang]:
                continue
            if low is not None and (value <= low if inclusive else value < low):
                return f"{self.name}:{reason}"
            if high is not None and (value >= high if inclusive else value > high):
                return f"{self.name}:{reason}"
        return None

    def measure(self, text: str, lang: str) -> dict[str, float]:
        lines = [line for line in text.split("\n") if line.strip()]
        stops = ZH_STOP_CHARS if lang == units.CHINESE else EN_STOP_CHARS
        short = self.short[lang]
        dup_chars = duplicates(lines)[1]
        return {
            "line_punct_ratio": ratio(sum(line.endswith(stops) for line in lines), len(lines)),
            "short_line_ratio": ratio(sum(len(line) <= short for line in lines), len(lines)),
            "char_dup_ratio": ratio(dup_chars, len(text) - text.count("\n")),
            "list_ratio": ratio(text.count("\n"), len(units.words(text, lang))),
        }

