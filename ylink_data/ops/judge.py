"""judge: an LLM-as-judge verdict on each response, or on each document, with a rubric, through the
pipeline's model (`llm:`, or the op's own `llm:` to judge with another model or server than the one
that answered).

`mode: pointwise` (default) gives each row a score on the rubric's scale, as the columns
`judge_score` (float) and `judge_reason`. `rubric:` says what is judged and how:
- `response` (the default): each row's `response` to its `instruction` scored 1-10 with
  `configs/prompts/judge-pointwise-<lang>.txt` (helpfulness, accuracy, ...; MT-Bench's grading).
- `edu`: each plain document (`text_column`, `text` by default) scored 0-5 for its educational
  value with `configs/prompts/judge-edu-<lang>.txt`, FineWeb-Edu's additive rubric (Penedo et al.
  2024: one point per criterion met, from "some basic information relevant to an educational topic"
  to "outstanding, like a textbook for grade school"). Such annotations are what a fast quality
  classifier is distilled from (FineWeb-Edu trained its classifier on 450k of them and kept the
  documents it scores 3 and above), so that the LLM reads a sample and the classifier the corpus.
The prompt's language is the row's: `-zh` for Chinese (its `lang` column, else the script of the
instruction's or the document's text, as qa_generate decides), `-en` for every other language.
`prompt:` names your own file instead, for every language: one with `{instruction}` and
`{response}` judges responses, one with `{text}` documents (with `rubric` unset, the file's
placeholders decide; a file that contradicts `rubric` is a config error). `scale: [low, high]`
is the scale of your rubric (default: the rubric's, 1-10 or 0-5). The answer is read strictly
(ops/judge_parse.py lists the accepted forms): JSON `{"score", "reason"}` (in a ```json fence
too) or, failing that, `Score: N` lines (`评分：N`; a `Total score: N` line over per-criterion ones),
the reason being the rest of the text; a score is a plain number or a fraction of the scale's top
("7", "7.5", "7/10"). An answer with no score, one outside the scale (the judge did not follow the
rubric: its number means nothing on it), one that is no plain number ("8e-1", "0x5", "5½"), an
ambiguous one (two different scores, "7 to 8", "3/10" on a 0-5 scale, a JSON key named twice) or
one that cannot be stored (a lone surrogate in its reason, a 5,000-digit
number) quarantines the row with the raw answer, reason `unusable_response` (io/llm/answer.py, as for
every op that calls a model; an answer cut off at `max_tokens` as `truncated`), and so does a request
that failed after `llm.max_retries`: a row the
judge could not score is never kept or dropped as if it had been. `min_score` (on the scale) drops rows
scored below it as `judge:low_score`.

`mode: pairwise`: the responses of one instruction (rows sharing `group_column`, which respond
writes; the runner hands the op every row of a group in one batch, ops/base.py MapOp) are
compared two by two with `judge-pairwise-<lang>.txt` (`{instruction}`, `{response_a}`,
`{response_b}`). Judges favour the answer shown first or second (position bias, Zheng et al. 2023,
MT-Bench, section 3.3), so every pair is asked in both orders and a verdict counts only when the
two agree: A over B, then B over A with the places swapped. A pair whose two answers disagree, or
that both call a tie, gives no verdict (counters `pairwise_inconsistent`, `pairwise_ties`). A
response's `judge_score` is then its number of consistent wins against the others of its group
(0 to n-1, a Copeland count), which `preference_pairs` reads as it reads pointwise scores: with two
responses, the consistent winner scores 1 and the loser 0, and an inconsistent pair leaves both at
0, so no pair. `judge_reason` lists the verdicts. An unusable answer to any comparison quarantines
the group's rows with the raw answer. Pairwise compares responses only: no `rubric: edu`, no
`scale`.

Counters: `scored`, `unparseable`, `out_of_range`, `truncated`, `unusable` (pointwise); `comparisons`, `pairwise_consistent`,
`pairwise_inconsistent`, `pairwise_ties` (pairwise); and the model's usage (`llm_*`, io/llm/usage.py).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa
from pydantic import Field, NonNegativeFloat

from ylink_data.core.errors import YlinkError
from ylink_data.io.llm.answer import Truncated, Unparseable, Unusable, read
from ylink_data.io.llm.config import LLMOverride
from ylink_data.ops.llm_op import LLMOp
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, named_files
from ylink_data.ops.judge_parse import OutOfRange, parse_score, parse_winner
from ylink_data.ops.qa_generate import PROMPTS, load_prompt, prompt_languages

# rubric: (what it scores, its scale, its prompts configs/prompts/<stem>-<lang>.txt)
RUBRICS = {"response": ("response", (1.0, 10.0), "judge-pointwise"), "edu": ("document", (0.0, 5.0), "judge-edu")}
SCORE_COLUMN, REASON_COLUMN = "judge_score", "judge_reason"
COLUMNS = {SCORE_COLUMN: pa.float64(), REASON_COLUMN: pa.string()}
PLACEHOLDERS = {  # what a prompt scores: {placeholder: what goes there}
    "response": {"instruction": "the instruction", "response": "the response"},
    "document": {"text": "the document"},
    "pairwise": {"instruction": "the instruction", "response_a": "the first response", "response_b": "the second"},
}


def _count(answer: Unusable) -> str:
    """The counter of an unusable answer: `truncated` (cut off at max_tokens), `out_of_range`,
    `unparseable` (it says no score or verdict we can read), or `unusable` (it says one that cannot
    be stored, or broke the parser)."""
    if isinstance(answer.cause, Truncated):
        return "truncated"
    if isinstance(answer.cause, OutOfRange):
        return "out_of_range"
    return "unparseable" if isinstance(answer.cause, Unparseable) else "unusable"


def _prompt_kind(path: str) -> str | None:
    """What a prompt file scores, by its placeholders: "response", "document" or None (neither)."""
    try:
        template = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"prompt: cannot read {path}: {exc.strerror or exc}") from None
    if "{instruction}" in template or "{response}" in template:
        return "response"
    return "document" if "{text}" in template else None


@register
class Judge(LLMOp):
    """A judge's score per response or per document; see the module docstring.

    `rubric`: `response` (an instruction's response, 1-10) or `edu` (a document's educational
    value, 0-5, FineWeb-Edu's rubric); unset: `response`, unless `prompt` names a document prompt.
    `prompt`: your own rubric file, with `{instruction}` and `{response}` or with `{text}`
    (pairwise: `{instruction}`, `{response_a}`, `{response_b}`), read now so that a missing file or
    placeholder fails before any request is paid for. `scale` [low, high], numbers >= 0: the scale
    your prompt asks for (default: the rubric's); a score outside it quarantines the row, since the
    judge then did not follow its rubric. `min_score` (unset: nothing dropped) is on that scale in
    pointwise mode, in wins in pairwise mode. `text_column`: the documents (`rubric: edu`), of which
    the judge reads the first `max_chars` characters (default 6,000, about 1,500-2,000 tokens of
    English and 4,000-6,000 of Chinese: enough to judge a page's educational value, and a bound on
    what a 100 KB document costs and on the server's context window; null: whole documents);
    `instruction_column`, `response_column`: the responses (as `respond` writes them);
    `group_column`: the responses compared pairwise. `json_mode` asks the server for JSON
    (`response_format: json_object`); off by default, since the `Score: N` line is read as well and
    some servers refuse the field."""

    name = "judge"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return named_files("prompt", params.get("prompt"))

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        if cls(**params).judged == "document":
            return [("text_column", params["text_column"])]
        return [("instruction_column", params["instruction_column"]), ("response_column", params["response_column"])]

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return dict(COLUMNS)

    def __init__(self, mode: Literal["pointwise", "pairwise"] = "pointwise",
                 rubric: Literal["response", "edu"] | None = None, prompt: str | None = None,
                 scale: tuple[NonNegativeFloat, NonNegativeFloat] | None = None,
                 min_score: NonNegativeFloat | None = None, text_column: str = "text",
                 max_chars: Annotated[int, Field(gt=0)] | None = 6000,
                 instruction_column: str = "instruction", response_column: str = "response",
                 group_column: str = "instruction_id", json_mode: bool = False, llm: LLMOverride | None = None):
        self.mode, self.prompt, self.min_score, self.json_mode = mode, prompt, min_score, json_mode
        self.text_column, self.max_chars = text_column, max_chars
        self.instruction_column, self.response_column = instruction_column, response_column
        # Pairwise compares the responses of one instruction: the runner keeps each group in one batch.
        self.group_column = group_column if mode == "pairwise" else None
        self.llm = llm.model_dump() if isinstance(llm, LLMOverride) else llm
        kind = _prompt_kind(prompt) if prompt else None
        if mode == "pairwise":
            if rubric == "edu":
                raise ValueError("rubric: edu scores documents one at a time; it needs mode: pointwise")
            if scale is not None:
                raise ValueError("scale: pairwise mode scores wins against the other responses, on no rubric's scale")
            self.rubric, self.judged, self.scale, stem = "response", "pairwise", None, "judge-pairwise"
        else:
            if prompt and kind is None and rubric is None:
                raise ValueError(f"prompt: {prompt} has neither {{instruction}} and {{response}} (a rubric for "
                                 "responses) nor {text} (a rubric for documents)")
            self.rubric = rubric or ("edu" if kind == "document" else "response")
            self.judged, default_scale, stem = RUBRICS[self.rubric]
            if kind is not None and kind != self.judged:
                wanted = " and ".join("{" + p + "}" for p in PLACEHOLDERS[self.judged])
                raise ValueError(f"prompt: {prompt} is a rubric for {kind}s, but rubric: {self.rubric} scores "
                                 f"{self.judged}s: give a prompt with {wanted}, or leave rubric out")
            low, high = (float(scale[0]), float(scale[1])) if scale is not None else default_scale
            if not low < high:
                raise ValueError(f"scale: give [low, high] with low under high, not [{low:g}, {high:g}]")
            if min_score is not None and not low <= min_score <= high:
                raise ValueError(f"min_score: {min_score:g} is outside the scale, {low:g}-{high:g}"
                                 + ("" if scale is not None else f" (rubric {self.rubric}; `scale` sets another)"))
            self.scale = (low, high)
        needed = PLACEHOLDERS[self.judged]
        self.templates = ({"en": load_prompt(prompt, needed), "zh": load_prompt(prompt, needed)} if prompt else
                          {lang: load_prompt(PROMPTS / f"{stem}-{lang}.txt", needed) for lang in ("en", "zh")})

    @property
    def score_column(self) -> str:  # the report draws min_score on this column's distribution
        return SCORE_COLUMN

    def _column(self, table: pa.Table, name: str, what: str) -> list:
        if name not in table.column_names:
            hint = ("name the column with judge's `text_column` parameter" if what == "text" else
                    f"put `respond` before `judge`, or name the column with judge's `{what}_column` parameter")
            raise YlinkError(f"judge: the rows have no {name!r} column ({what}); {hint}")
        return table.column(name).to_pylist()

    def _ask(self, prompts: list[str]) -> list:
        request = {"response_format": {"type": "json_object"}} if self.json_mode else {}
        return self.client.chat_many([[{"role": "user", "content": p}] for p in prompts], **request)

    def process(self, table: pa.Table) -> BatchResult:
        lang_column = table.column("lang").to_pylist() if "lang" in table.column_names else None
        if self.judged == "document":
            texts = self._column(table, self.text_column, "text")
            langs = prompt_languages(texts, lang_column)
            scores, reasons, errors, counts = self._pointwise(
                [self.templates[lang].replace("{text}", (text or "")[:self.max_chars]) for text, lang in zip(texts, langs)])
        else:
            instructions = self._column(table, self.instruction_column, "instruction")
            responses = self._column(table, self.response_column, "response")
            langs = prompt_languages(instructions, lang_column)
            if self.mode == "pointwise":
                scores, reasons, errors, counts = self._pointwise(
                    [self.templates[lang].replace("{instruction}", i or "").replace("{response}", r or "")
                     for i, r, lang in zip(instructions, responses, langs)])
            else:
                scores, reasons, errors, counts = self._pairwise(table, instructions, responses, langs)
        dropped = [None if e is not None or s is None or self.min_score is None or s >= self.min_score
                   else f"{self.name}:low_score" for s, e in zip(scores, errors)]
        out = table
        for (name, dtype), values in zip(COLUMNS.items(), (scores, reasons)):
            array = pa.array(values, dtype)
            out = (out.set_column(out.schema.get_field_index(name), name, array) if name in out.column_names
                   else out.append_column(name, array))
        counters = {k: v for k, v in counts.items() if v} | self.client.usage.take()
        return BatchResult(out, dropped=dropped, errors=errors if any(errors) else None, counters=counters)

    def _pointwise(self, prompts: list[str]):
        n = len(prompts)
        scores: list[float | None] = [None] * n
        reasons: list[str | None] = [None] * n
        errors: list[str | None] = [None] * n
        counts = {"scored": 0, "unparseable": 0, "out_of_range": 0, "truncated": 0, "unusable": 0}
        for i, reply in enumerate(self._ask(prompts)):
            if reply.error is not None:
                errors[i] = reply.error
                continue
            verdict = read(reply, lambda text: parse_score(text, *self.scale))
            if isinstance(verdict, Unusable):
                counts[_count(verdict)] += 1
                errors[i] = verdict.error
                continue
            scores[i], reasons[i] = verdict
            counts["scored"] += 1
        return scores, reasons, errors, counts

    def _pairwise(self, table: pa.Table, instructions: list, responses: list, langs: list[str]):
        n = len(responses)
        groups: dict[object, list[int]] = defaultdict(list)
        for i, key in enumerate(self._column(table, self.group_column, "group")):
            groups[key].append(i)
        pairs = [(g[a], g[b]) for g in groups.values() for a in range(len(g)) for b in range(a + 1, len(g))]
        prompts = []
        for i, j in pairs:  # each pair in both orders: i shown first, then j shown first
            template = self.templates[langs[i]].replace("{instruction}", instructions[i] or "")
            for first, second in ((i, j), (j, i)):
                prompts.append(template.replace("{response_a}", responses[first] or "")
                               .replace("{response_b}", responses[second] or ""))
        replies = self._ask(prompts)
        wins = [0.0] * n
        verdicts: list[list[str]] = [[] for _ in range(n)]
        errors: list[str | None] = [None] * n
        counts = {"comparisons": len(pairs), "pairwise_consistent": 0, "pairwise_inconsistent": 0,
                  "pairwise_ties": 0, "unparseable": 0, "truncated": 0, "unusable": 0}
        failed: dict[object, str] = {}
        index = {i: key for key, rows in groups.items() for i in rows}
        for k, (i, j) in enumerate(pairs):
            said = []
            for reply in replies[2 * k:2 * k + 2]:
                if reply.error is not None:
                    failed.setdefault(index[i], reply.error)
                    break
                verdict = read(reply, parse_winner)
                if isinstance(verdict, Unusable):
                    counts[_count(verdict)] += 1
                    failed.setdefault(index[i], verdict.error)
                    break
                said.append(verdict[0])
            if len(said) < 2:
                continue
            # In the second order j is shown as A: "B" there means i won again.
            first, swapped = said[0], {"A": "B", "B": "A", "tie": "tie"}[said[1]]
            if first != swapped:
                counts["pairwise_inconsistent"] += 1
                verdict = "inconsistent"
            elif first == "tie":
                counts["pairwise_ties"] += 1
                verdict = "tie"
            else:
                counts["pairwise_consistent"] += 1
                winner = i if first == "A" else j
                wins[winner] += 1
                verdict = "won" if winner == i else "lost"
            members = groups[index[i]]  # responses named by their place in the group
            verdicts[i].append(f"{verdict} against response {members.index(j)}")
            other = {"won": "lost", "lost": "won"}.get(verdict, verdict)
            verdicts[j].append(f"{other} against response {members.index(i)}")
        scores: list[float | None] = list(wins)
        reasons: list[str | None] = ["; ".join(v) for v in verdicts]
        for i in range(n):
            if index[i] in failed:
                errors[i], scores[i], reasons[i] = failed[index[i]], None, None
        return scores, reasons, errors, counts
