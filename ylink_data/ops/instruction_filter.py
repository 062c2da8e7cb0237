"""instruction_filter: the rules of instruction data that need no model, on columns.

  too_short / too_long  the instruction (`column`) has fewer than `min_words` or more than `max_words`
                        words; Chinese instructions (Han characters) count characters instead, against
                        `min_chars` / `max_chars`. Defaults: Self-Instruct's 4..150 words
                        (text/datagen/heuristics.py), ours for Chinese (6..300 characters, as there).
  no_response           `response_column` is present but empty
  refusal               the response (`response_column`, else the instruction) holds a refusal or
                        disclaimer phrase of `phrases` (configs/datagen/refusals.txt, with its sources)

Drops are `instruction_filter:<rule>`. Exact and near-duplicate instructions: `exact_dedup` and
`minhash_dedup` with `column: instruction`; language: `langid` (instruct_generate and respond set
`text` to the instruction, or instruction and response).
"""
from __future__ import annotations

from typing import Any

import re
from pathlib import Path

import pyarrow as pa
from pydantic import NonNegativeInt, PositiveInt

from ylink_data.text.datagen.heuristics import MAX_CHARS_ZH, MAX_WORDS, MIN_CHARS_ZH, MIN_WORDS, is_chinese
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, MapOp, named_files
from ylink_data.core.paths import CONFIGS

PHRASES = CONFIGS / "datagen" / "refusals.txt"


def load_phrases(path: Path | str) -> list[str]:
    """One phrase a line, lowercased; blank lines and `#` comment lines skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"phrases: cannot read {path}: {exc.strerror or exc}") from None
    phrases = [line.strip().lower() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not phrases:
        raise ValueError(f"phrases: {path} holds no phrase (one a line)")
    return phrases


@register
class InstructionFilter(MapOp):
    """Drops instructions out of length bounds and responses that refuse; see the module docstring."""

    name = "instruction_filter"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return named_files("phrases", params.get("phrases")) if params.get("refusal", True) else []

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return [("column", params["column"])]  # the response column is optional

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str]:
        return []

    def __init__(self, column: str = "instruction", response_column: str = "response",
                 min_words: NonNegativeInt = MIN_WORDS, max_words: PositiveInt = MAX_WORDS,
                 min_chars: NonNegativeInt = MIN_CHARS_ZH, max_chars: PositiveInt = MAX_CHARS_ZH,
                 refusal: bool = True, phrases: str | None = None):
        self.column, self.response_column = column, response_column
        self.min_words, self.max_words, self.min_chars, self.max_chars = min_words, max_words, min_chars, max_chars
        self.refusal = refusal
        words = load_phrases(phrases or PHRASES) if refusal else []
        self._refusal = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))) if words else None

    def verdict(self, instruction: str, response: str | None, has_response: bool) -> str | None:
        if is_chinese(instruction):
            n = len(re.sub(r"\s+", "", instruction))
            low, high = self.min_chars, self.max_chars
        else:
            n = len(instruction.split())
            low, high = self.min_words, self.max_words
        if n < low:
            return "too_short"
        if n > high:
            return "too_long"
        if has_response and not (response or "").strip():
            return "no_response"
        if self._refusal is not None:
            # Apostrophes: models write both ' and ’.
            checked = (response if has_response else instruction).lower().replace("\u2019", "'")
            if self._refusal.search(checked):
                return "refusal"
        return None

    def process(self, table: pa.Table) -> BatchResult:
        names = table.column_names
        if self.column not in names:
            raise ValueError(f"instruction_filter: no column {self.column!r} (columns: {', '.join(names)}); "
                             f"set `column:` (instruct_generate and respond write `instruction`)")
        instructions = [x or "" for x in table.column(self.column).to_pylist()]
        has_response = self.response_column in names
        responses = table.column(self.response_column).to_pylist() if has_response else [None] * len(instructions)
        dropped = []
        for instruction, response in zip(instructions, responses):
            rule = self.verdict(instruction.strip(), response, has_response)
            dropped.append(f"{self.name}:{rule}" if rule else None)
        return BatchResult(table, dropped=dropped)
