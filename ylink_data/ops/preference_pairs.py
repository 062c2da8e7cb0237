"""preference_pairs: chosen/rejected pairs from the judged responses of each instruction, for DPO
and reward models (TRL's preference layout: `output.preference_format`, io/preference.py).

The input rows are responses, several per instruction (`respond` with `n`), each with a score
(`judge_score` from `judge`). The responses of one instruction (rows sharing `group_column`,
`instruction_id` as respond writes it) are one group: the runner hands the op every row of a group
in one batch (ops/base.py MapOp.group_column), across batch boundaries and phases.

Per group, with `strategy`:
- `best_vs_worst` (default): the best-scored response as chosen against the worst as rejected
  (ties go to the earlier response), one pair per instruction, as UltraFeedback's binarised
  DPO set pairs the best-rated answer with a lower-rated one (Tunstall et al. 2023, Zephyr);
- `all`: every two responses whose scores differ by `min_margin` or more, higher over lower.
A pair is kept only when its margin (chosen score minus rejected score) is at least `min_margin`
and above 0 (equal scores state no preference), and its two texts differ.

Each pair is a row, made of its chosen response's row (fan-out, id `<chosen id>#<k>`), with the
columns `prompt` (the instruction, with its `input` after a blank line as `respond` asked it), `chosen`, `rejected`, `chosen_score`, `rejected_score` and
`margin`; its `text` is the chosen response. The other rows of the group are dropped:
`preference_pairs:not_chosen` (the group gave pairs; the response is in them as rejected, or in
none), `preference_pairs:no_margin` (the group gave no pair: one response, or scores too close)
and `preference_pairs:no_score` (a row without a score, which a judge that quarantines what it
cannot score never leaves). Counters: `groups`, `groups_paired`, `pairs`.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

import pyarrow as pa
from pydantic import NonNegativeFloat

from ylink_data.core.errors import YlinkError
from ylink_data.text.datagen.prompt import instruction_prompt
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, MapOp, fan_out

COLUMNS = {"prompt": pa.string(), "chosen": pa.large_string(), "rejected": pa.large_string(),
           "chosen_score": pa.float64(), "rejected_score": pa.float64(), "margin": pa.float64()}


def group_pairs(scores: list[float], texts: list[str], strategy: str, min_margin: float) -> list[tuple[int, int]]:
    """(chosen, rejected) positions within one group, in order: by chosen, then rejected."""
    def usable(c: int, r: int) -> bool:
        margin = scores[c] - scores[r]
        return margin > 0 and margin >= min_margin and texts[c] != texts[r]

    n = len(scores)
    if strategy == "all":
        return [(c, r) for c in range(n) for r in range(n) if usable(c, r)]
    if n < 2:
        return []
    best = max(range(n), key=lambda i: (scores[i], -i))  # the earliest of the best
    worst = min(range(n), key=lambda i: (scores[i], i))  # the earliest of the worst
    return [(best, worst)] if usable(best, worst) else []


@register
class PreferencePairs(MapOp):
    """Chosen/rejected pairs per instruction; see the module docstring. `min_margin` 1 (ours): on
    the judge's integer 1-10 scale the smallest difference that states a preference; raise it for
    clearer pairs at the cost of fewer (UltraFeedback-style sets often ask for 1-2 points)."""

    name = "preference_pairs"

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return [(key, params[key]) for key in ("score_column", "group_column", "prompt_column", "response_column")]

    @classmethod
    def numeric_columns(cls, params: dict[str, Any]) -> list[str]:
        return ["score_column"]

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return dict(COLUMNS)

    def __init__(self, min_margin: NonNegativeFloat = 1.0, strategy: Literal["best_vs_worst", "all"] = "best_vs_worst",
                 score_column: str = "judge_score", group_column: str = "instruction_id",
                 prompt_column: str = "instruction", response_column: str = "response"):
        self.min_margin, self.strategy = min_margin, strategy
        self.score_column, self.group_column = score_column, group_column
        self.prompt_column, self.response_column = prompt_column, response_column

    def _column(self, table: pa.Table, name: str, parameter: str) -> list:
        if name not in table.column_names:
            raise YlinkError(f"preference_pairs: the rows have no {name!r} column; put `respond` and `judge` "
                             f"before it, or name the column with its `{parameter}` parameter")
        return table.column(name).to_pylist()

    def process(self, table: pa.Table) -> BatchResult:
        scores = self._column(table, self.score_column, "score_column")
        keys = self._column(table, self.group_column, "group_column")
        prompts = self._column(table, self.prompt_column, "prompt_column")
        if self.prompt_column == "instruction" and "input" in table.column_names:  # what respond asked
            prompts = [instruction_prompt(p, given) for p, given in zip(prompts, table.column("input").to_pylist())]
        texts = self._column(table, self.response_column, "response_column")
        groups: dict[object, list[int]] = defaultdict(list)
        reasons: dict[int, str] = {}
        for i, (key, score) in enumerate(zip(keys, scores)):
            if score is None:
                reasons[i] = "no_score"
            else:
                groups[key].append(i)
        pairs_of: dict[int, list[dict]] = defaultdict(list)  # chosen row -> its pair rows
        counts = {"groups": len(groups), "groups_paired": 0, "pairs": 0}
        for rows in groups.values():
            found = group_pairs([scores[i] for i in rows], [texts[i] for i in rows], self.strategy, self.min_margin)
            if not found:
                reasons.update({i: "no_margin" for i in rows})
                continue
            counts["groups_paired"] += 1
            counts["pairs"] += len(found)
            for c, r in found:
                chosen, rejected = rows[c], rows[r]
                pairs_of[chosen].append({
                    "text": texts[chosen], "prompt": prompts[chosen], "chosen": texts[chosen],
                    "rejected": texts[rejected], "chosen_score": scores[chosen], "rejected_score": scores[rejected],
                    "margin": scores[chosen] - scores[rejected]})
            reasons.update({i: "not_chosen" for i in rows if i not in pairs_of})
        children: list[list[dict] | None] = []
        dropped: list[str | None] = []
        for i in range(table.num_rows):
            if i in pairs_of:
                children.append(pairs_of[i])
                dropped += [None] * len(pairs_of[i])
            else:
                children.append(None)
                dropped.append(f"{self.name}:{reasons[i]}")
        out, parents = fan_out(table, children, COLUMNS)
        return BatchResult(out, dropped=dropped, counters={k: v for k, v in counts.items() if v}, parents=parents)
