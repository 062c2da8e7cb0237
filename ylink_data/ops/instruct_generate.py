"""instruct_generate: new instructions from seed tasks, by Self-Instruct or Evol-Instruct.

Input rows are instructions: the seed tasks read as JSONL (`input.text_field: instruction`; the
bundled seeds are ylink_data/assets/seeds/), or any rows with an `instruction` column or a `text`.
Output rows hold `instruction`, `input` (the seed's first instance input; null for generated ones),
`origin` (`seed`, `self_instruct`, or `evol:<method>`), `rouge_l_max` and `text` = the instruction,
so that dedup, langid and filters work on it. New rows are fanned out of an input row (ids
`<row id>#<k>`, counted as `created`); `keep_seeds: false` drops the input rows themselves (reason
`instruct_generate:seed`).

`mode: self_instruct` (Wang et al. 2022) bootstraps a pool from the seeds of one batch (one input
file of up to 2048 seeds is one batch; with more, each batch grows its own pool and `count` is per
batch). Rounds of `prompts_per_round` prompts are sent at once, each with `examples` (8) in-context
instructions, `from_generated` (2) of them already generated; the answers' numbered lists are
checked in prompt order, so a seed gives the same run every time with the same answers (the
response cache makes a rerun free). A candidate is kept when it passes the heuristics
(text/datagen/heuristics.py) and its ROUGE-L F to every instruction of the pool is at most `threshold`
(0.7, the paper's `> 0.7` rejection); every rejected candidate is a row dropped with its rule
(`too_short`, `too_long`, `banned_keyword`, `write_a_program`, `punctuation`, `non_english`,
`not_chinese`, `similar`, `truncated`), kept in rejected/ with keep_rejected, child of the first seed of
its prompt (kept ones too). Stops at `count` kept, or after `patience` rounds that kept nothing,
or after `max_prompts`; the counter `count_missed` says how many short it fell.

`mode: evol` (Xu et al. 2023) evolves every input row `rounds` times, each step by a method drawn
from `methods` with `seed` (a step that fails leaves the next one to evolve the previous version,
as the paper's pool does); kept steps are rows (at most `count` per batch when set), failed ones are
dropped as `copied_prompt`, `unchanged` or a heuristic rule.

Language: the batch's seeds' `lang` (else their script) picks the prompt (`-zh` for Chinese, `-en`
otherwise) and the heuristics. A prompt whose request failed after llm.max_retries is counted
(`prompts_failed`), and so is an answer that cannot be stored (`unusable`, io/llm/answer.py: a lone
surrogate); when none of a batch's requests got a usable answer, its rows are quarantined with the
last error. An answer holding no numbered item is counted (`unparseable`).
"""
from __future__ import annotations

import json
import random
from typing import Annotated, Any, Literal

import pyarrow as pa
from pydantic import Field, PositiveInt

from ylink_data.text.datagen import evol, heuristics
from ylink_data.text.datagen import self_instruct as si
from ylink_data.io.llm.answer import Unusable, read
from ylink_data.io.llm.config import LLMOverride
from ylink_data.ops.llm_op import LLMOp
from ylink_data.text.transform.rouge import RougePool, rouge_l
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, Fraction, fan_out, named_files

COLUMNS = {"instruction": pa.string(), "input": pa.string(), "origin": pa.string(), "rouge_l_max": pa.float64()}
Method = Literal["constraints", "deepen", "concretise", "reasoning", "breadth"]


@register
class InstructGenerate(LLMOp):
    """New instructions from seeds; see the module docstring. Defaults are Self-Instruct's
    (`bootstrap_instructions.py`: 8 examples, 2 of them generated, ROUGE-L 0.7) and, for `rounds`
    (WizardLM evolves 4 epochs) and `unchanged_above` (ours: an evolved instruction that adds
    nothing scores 1.0, one adding a 10-word constraint to a 20-word one about 0.8), ours."""

    name = "instruct_generate"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return named_files("prompt", params.get("prompt"))

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return dict(COLUMNS)

    def __init__(self, mode: Literal["self_instruct", "evol"] = "self_instruct", count: PositiveInt | None = None,
                 seed: Annotated[int, Field(ge=0, lt=2**63)] = 0, threshold: Fraction = 0.7,
                 examples: Annotated[int, Field(ge=1, le=64)] = 8,
                 from_generated: Annotated[int, Field(ge=0, le=64)] = 2,
                 new_per_prompt: Annotated[int, Field(ge=1, le=100)] = 8,
                 prompts_per_round: Annotated[int, Field(ge=1, le=4096)] = 8,
                 patience: Annotated[int, Field(ge=1, le=1000)] = 3, max_prompts: PositiveInt | None = None,
                 rounds: Annotated[int, Field(ge=1, le=16)] = 1, methods: list[Method] | None = None,
                 unchanged_above: Fraction = 0.95, keep_seeds: bool = True, prompt: str | None = None,
                 llm: LLMOverride | None = None):
        if from_generated > examples:
            raise ValueError(f"from_generated ({from_generated}) exceeds examples ({examples})")
        if mode == "self_instruct" and count is None:
            raise ValueError("count: how many new instructions self_instruct should make (per batch of seeds)")
        self.mode, self.count, self.seed, self.threshold = mode, count, seed, threshold
        self.examples, self.from_generated, self.new_per_prompt = examples, from_generated, new_per_prompt
        self.prompts_per_round, self.patience, self.max_prompts = prompts_per_round, patience, max_prompts
        self.rounds, self.methods = rounds, list(methods or evol.METHODS)
        if not self.methods:
            raise ValueError("methods: name at least one of " + ", ".join(evol.METHODS))
        self.unchanged_above, self.keep_seeds = unchanged_above, keep_seeds
        self.llm = llm.model_dump() if isinstance(llm, LLMOverride) else llm
        # Read now: a missing file or placeholder is a config error before any request is paid for.
        if mode == "self_instruct":
            self.templates = {lang: si.load_template(prompt or si.PROMPTS / f"self_instruct-{lang}.txt")
                              for lang in ("en", "zh")}
        else:
            self.templates = {lang: evol.load_templates(lang, prompt) for lang in ("en", "zh")}

    # ------------------------------------------------------------------ rows in, rows out
    def process(self, table: pa.Table) -> BatchResult:
        n = table.num_rows
        names = table.column_names
        instructions = [(x or "").strip() for x in table.column("instruction" if "instruction" in names
                                                                 else "text").to_pylist()]
        inputs = _seed_inputs(table)
        lang = _batch_language(instructions, table.column("lang").to_pylist() if "lang" in names else None)
        rng = random.Random(f"{self.seed}:{table.column('id')[0].as_py() if n else ''}")
        counts: dict[str, int] = {}
        generate = self._self_instruct if self.mode == "self_instruct" else self._evolve
        made, error = generate(instructions, lang, rng, counts)  # made: (parent, row, reason)
        children: list[list[dict] | None] = [None] * n
        reasons: dict[int, list[str | None]] = {}
        for i in range(n):
            if self.keep_seeds and error is None and instructions[i]:
                children[i] = [{"text": instructions[i], "instruction": instructions[i], "input": inputs[i],
                                "origin": "seed"}]
                reasons[i] = [None]
        for parent, row, reason in made:
            children[parent] = (children[parent] or []) + [row]
            reasons.setdefault(parent, []).append(reason)
        dropped: list[str | None] = []
        errors: list[str | None] = []
        for i in range(n):
            if children[i] is None:
                dropped.append(None if error else f"{self.name}:{'seed' if instructions[i] else 'empty'}")
                errors.append(error)
            else:
                dropped += [f"{self.name}:{r}" if r else None for r in reasons[i]]
                errors += [None] * len(reasons[i])
        out, parents = fan_out(table, children, COLUMNS)
        counters = {k: v for k, v in counts.items() if v} | self.client.usage.take()
        return BatchResult(out, dropped=dropped, errors=errors if any(errors) else None, counters=counters,
                           parents=parents)

    # ------------------------------------------------------------------ Self-Instruct
    def _self_instruct(self, seeds: list[str], lang: str, rng: random.Random, counts: dict[str, int]):
        pool = RougePool()
        seed_idx = [i for i, s in enumerate(seeds) if s]
        for i in seed_idx:
            pool.add(seeds[i])
        generated: list[int] = []  # indices into `made` of kept rows
        made: list[tuple[int, dict, str | None]] = []
        texts = [seeds[i] for i in seed_idx]  # pool index -> text (seeds first, as added)
        asked = answered = idle = 0
        last_error = None
        max_prompts = self.max_prompts or 10 * -(-self.count // self.new_per_prompt) + 10
        while len(generated) < self.count and asked < max_prompts and idle < self.patience and seed_idx:
            prompts, firsts = [], []
            for _ in range(min(self.prompts_per_round, max_prompts - asked)):
                picked = si.sample_examples(rng, list(range(len(seed_idx))),
                                            list(range(len(seed_idx), len(texts))), self.examples,
                                            self.from_generated)
                prompts.append(si.build_prompt(self.templates[lang], [texts[k] for k in picked],
                                               self.new_per_prompt))
                human = [k for k in picked if k < len(seed_idx)]
                firsts.append(seed_idx[min(human)] if human else seed_idx[0])
            asked += len(prompts)
            replies = self.client.chat_many([[{"role": "user", "content": p}] for p in prompts])
            kept_before = len(generated)
            for reply, parent in zip(replies, firsts):
                if reply.error is not None:
                    counts["prompts_failed"] = counts.get("prompts_failed", 0) + 1
                    last_error = reply.error
                    continue
                items = read(reply, si.parse_list, truncated_ok=True)  # its last item: `truncated` below
                if isinstance(items, Unusable):
                    counts["unusable"] = counts.get("unusable", 0) + 1
                    last_error = items.error
                    continue
                answered += 1
                if not items:
                    counts["unparseable"] = counts.get("unparseable", 0) + 1
                for k, item in enumerate(items):
                    if len(generated) >= self.count:
                        counts["candidates_unused"] = counts.get("candidates_unused", 0) + len(items) - k
                        break
                    counts["candidates"] = counts.get("candidates", 0) + 1
                    truncated = reply.finish_reason == "length" and k == len(items) - 1
                    reason = "truncated" if truncated else (heuristics.check(item, lang) if item else "too_short")
                    score = None
                    if reason is None:
                        score, _ = pool.nearest(item, above=self.threshold)
                        if score > self.threshold:
                            reason = "similar"
                    row = {"text": item, "instruction": item, "input": None, "origin": "self_instruct",
                           "rouge_l_max": None if score is None else round(score, 4)}
                    made.append((parent, row, reason))
                    if reason is None:
                        pool.add(item)
                        texts.append(item)
                        generated.append(len(made) - 1)
            idle = idle + 1 if len(generated) == kept_before else 0
        if len(generated) < self.count:
            counts["count_missed"] = self.count - len(generated)
        if asked and not answered:
            return [], f"{last_error} (no request of this batch got a usable answer)"
        return made, None

    # ------------------------------------------------------------------ Evol-Instruct
    def _evolve(self, instructions: list[str], lang_default: str, rng: random.Random, counts: dict[str, int]):
        current = {i: s for i, s in enumerate(instructions) if s}
        made: list[tuple[int, dict, str | None]] = []
        kept = 0
        asked = answered = 0
        last_error = None
        for _ in range(self.rounds):
            order = [i for i in current if self.count is None or kept < self.count]
            if not order:
                break
            steps = [(i, rng.choice(self.methods)) for i in order]
            langs = {i: "zh" if heuristics.is_chinese(current[i]) else "en" for i in order}
            prompts = [evol.build_prompt(self.templates[langs[i]], m, current[i]) for i, m in steps]
            asked += len(prompts)
            replies = self.client.chat_many([[{"role": "user", "content": p}] for p in prompts])
            for (i, method), reply in zip(steps, replies):
                if reply.error is not None:
                    counts["prompts_failed"] = counts.get("prompts_failed", 0) + 1
                    last_error = reply.error
                    continue
                text = read(reply, evol.clean, truncated_ok=True)  # a `truncated` candidate below
                if isinstance(text, Unusable):
                    counts["unusable"] = counts.get("unusable", 0) + 1
                    last_error = text.error
                    continue
                answered += 1
                if self.count is not None and kept >= self.count:
                    counts["candidates_unused"] = counts.get("candidates_unused", 0) + 1
                    continue
                score = rouge_l(text, current[i]) if text else 0.0
                if reply.finish_reason == "length":
                    reason = "truncated"
                elif not text:
                    reason = "too_short"
                elif evol.copies_prompt(text):
                    reason = "copied_prompt"
                elif score >= self.unchanged_above:
                    reason = "unchanged"
                else:
                    reason = heuristics.check(text, langs[i])
                counts["candidates"] = counts.get("candidates", 0) + 1
                made.append((i, {"text": text, "instruction": text, "input": None, "origin": f"evol:{method}",
                                 "rouge_l_max": round(score, 4)}, reason))
                if reason is None:
                    current[i] = text
                    kept += 1
        if asked and not answered:
            return [], f"{last_error} (no request of this batch got a usable answer)"
        return made, None


def _seed_inputs(table: pa.Table) -> list[str | None]:
    """Each seed's first instance input (Self-Instruct's seed layout keeps it in `instances`, which the
    JSONL reader puts in `metadata`), or the row's `input` column."""
    if "input" in table.column_names:
        return [x or None for x in table.column("input").to_pylist()]
    out: list[str | None] = []
    for meta in (table.column("metadata").to_pylist() if "metadata" in table.column_names else [None] * table.num_rows):
        value = None
        if meta:
            instances = json.loads(meta).get("instances")
            if isinstance(instances, list) and instances and isinstance(instances[0], dict):
                value = instances[0].get("input") or None
        out.append(value)
    return out


def _batch_language(texts: list[str], langs: list[str | None] | None) -> str:
    """`zh` when most of the batch's seeds are Chinese (by `lang`, else by script), else `en`."""
    votes = 0
    for i, text in enumerate(texts):
        lang = (langs[i] if langs else None) or ("zh" if heuristics.is_chinese(text) else "en")
        votes += 1 if lang.lower().startswith("zh") else -1
    return "zh" if votes > 0 else "en"

