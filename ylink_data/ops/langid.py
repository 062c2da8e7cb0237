"""langid: fastText language identification (lid.176) of every document, with optional filtering.

Batch-wise: Arrow cuts every text to its prefix and puts it on one line column-wise, so a long
page is never copied into Python whole, and fastText gets the batch in one call. The call itself
saves little (fastText's own work, 60-90 us per KB of text, dwarfs a call's overhead); what makes
the op fast on long documents is the bounded prefix, which reads as well as the whole text
(bench/RESULTS.md). The model is loaded in `setup()`, once per worker process, and shared by every
op instance in it (see `ylink_data.text.transform.langid`). The script prior in front of the model
(Chinese, Japanese, Korean by their characters) is counted column-wise for the whole batch.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import NonNegativeInt

from ylink_data.text.transform import langid
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, Fraction, MapOp, Strings
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext

LANGUAGE = "langid:language"
LOW_SCORE = "langid:low_score"


@register
class LangId(MapOp):
    """Writes `lang` (ISO 639-1 where one exists, e.g. `en`, `zh`; otherwise the model's code, e.g.
    `ceb`) and `lang_score` (0-1) for every document. Text written mostly in CJK characters gets the
    language its script settles (Han without kana: `zh`, also for the model's `wuu`/`yue`; kana:
    `ja`; hangul: `ko`), other text the model's (`ylink_data.text.transform.langid` says how and why).
    With `languages`, documents in other languages are dropped (`langid:language`); below
    `min_score`, documents are dropped (`langid:low_score`); the language check comes first.
    `prefix_chars` is how much of each text is read (0: all of it). `languages` takes the codes
    `langid` writes: `yue` or `wuu` is refused (they are written `zh`, so no document would match)."""

    name = "langid"
    reads_text = True

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str]:
        return ["lang", "lang_score"]  # the schema's own (and types), filled in

    def __init__(self, languages: Strings | None = None, min_score: Fraction = 0.0,
                 prefix_chars: NonNegativeInt = langid.PREFIX_CHARS):
        for code in languages or []:
            if code in langid.FOLDED:
                varieties = " and ".join(sorted(langid.FOLDED))
                raise ValueError(f"languages: no document is ever labelled {code!r}: langid writes the Chinese "
                                 f"varieties {varieties} as {langid.FOLDED[code]!r}; use {langid.FOLDED[code]}")
        self.languages = frozenset(languages) if languages is not None else None
        self.min_score = min_score
        self.prefix_chars = prefix_chars

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        langid.load_model()

    def process(self, table: pa.Table) -> BatchResult:
        codes, scores = langid.predict(table.column("text"), self.prefix_chars)
        stored = pa.array(scores, pa.float32())
        scores = stored.to_pylist()  # judge the score as stored, so `lang_score < min_score` <=> dropped
        table = _set(table, "lang", pa.array(codes, pa.string()))
        table = _set(table, "lang_score", stored)
        dropped: list[str | None] = [
            LANGUAGE if self.languages is not None and code not in self.languages
            else LOW_SCORE if score < self.min_score else None
            for code, score in zip(codes, scores)
        ]
        return BatchResult(table, dropped=dropped if any(dropped) else None)


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    index = table.schema.get_field_index(name)
    if index < 0:
        return table.append_column(name, values)
    return table.set_column(index, pa.field(name, values.type), values)
