"""respond: `n` responses per instruction from the pipeline's model.

Each input row is an instruction: its `instruction` column (else `text`), with its `input` column
appended after a blank line when it has one, sent as the user message after `system` (when set).
Sampling comes from the `llm:` block or the op's own `llm:` (temperature, top_p, max_tokens).
Response k of an instruction is its own request with `seed` = llm.seed (0 when unset) + k, so the n
responses differ on servers that honour a seed and each is cached on its own: a rerun asks nothing.

Every response is a row (fan-out, ids `<instruction row id>#<k>`), which is what `judge` and
`preference_pairs` group: columns
  instruction     the instruction as asked (without `input`)
  input           the instruction's input, or null
  response        the model's answer
  response_index  k, 0..n-1
  instruction_id  the id of the instruction's row: the n responses of one instruction share it
and `text` = instruction, input and response, blank-line separated, for the filters after it.
An empty response is dropped as `respond:empty`, an instruction without text as
`respond:no_instruction`. A response cut off at max_tokens (finish_reason `length`) quarantines its
row with reason `truncated` (raise `llm.max_tokens`), one that cannot be stored (io/llm/answer.py: a
lone surrogate) as `unusable_response`, and a request that failed after llm.max_retries with the error
(reason `timeout` when the server never answered in time). The run goes on either way.
"""
from __future__ import annotations

from typing import Annotated, Any

import pyarrow as pa
from pydantic import Field

from ylink_data.io.llm.answer import Unusable, read
from ylink_data.io.llm.config import LLMOverride
from ylink_data.ops.llm_op import LLMOp
from ylink_data.text.datagen.prompt import instruction_prompt
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, fan_out

COLUMNS = {"instruction": pa.string(), "input": pa.string(), "response": pa.large_string(),
           "response_index": pa.int32(), "instruction_id": pa.string()}


@register
class Respond(LLMOp):
    """`n` responses per instruction; see the module docstring."""

    name = "respond"

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []  # `instruction` and `input`, by no parameter

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return dict(COLUMNS)

    def __init__(self, n: Annotated[int, Field(ge=1, le=64)] = 1, system: str | None = None,
                 llm: LLMOverride | None = None):
        self.n, self.system = n, system
        self.llm = llm.model_dump() if isinstance(llm, LLMOverride) else llm

    def _messages(self, instruction: str, given: str | None) -> list[dict[str, str]]:
        user = instruction_prompt(instruction, given)
        return ([{"role": "system", "content": self.system}] if self.system else []) + [{"role": "user", "content": user}]

    def process(self, table: pa.Table) -> BatchResult:
        names = table.column_names
        instructions = [(x or "").strip() for x in table.column("instruction" if "instruction" in names
                                                                 else "text").to_pylist()]
        inputs = [x or None for x in table.column("input").to_pylist()] if "input" in names else [None] * table.num_rows
        ids = table.column("id").to_pylist()
        asked = [i for i, s in enumerate(instructions) if s]
        base = self.llm_config().seed or 0
        jobs = [(i, k) for i in asked for k in range(self.n)]
        requests = {}
        for k in range(self.n):  # one chat_many per k: each its own `seed`, all of them concurrent within
            mine = [i for i, kk in jobs if kk == k]
            replies = self.client.chat_many([self._messages(instructions[i], inputs[i]) for i in mine], seed=base + k)
            requests.update({(i, k): r for i, r in zip(mine, replies)})
        children: list[list[dict] | None] = []
        dropped: list[str | None] = []
        errors: list[str | None] = []
        for i, instruction in enumerate(instructions):
            if not instruction:
                children.append(None)
                dropped.append(f"{self.name}:no_instruction")
                errors.append(None)
                continue
            rows = []
            for k in range(self.n):
                reply = requests[(i, k)]
                answer = read(reply, str.strip) if reply.error is None else None
                error = reply.error or (answer.error if isinstance(answer, Unusable) else None)
                text = answer if error is None else ""
                body = "\n\n".join(x for x in (instruction, inputs[i], text) if x)
                rows.append({"text": body, "instruction": instruction, "input": inputs[i],
                             "response": text if error is None else None, "response_index": k,
                             "instruction_id": ids[i]})
                if error is not None:
                    dropped.append(None)
                    errors.append(error)
                else:
                    dropped.append(None if text else f"{self.name}:empty")
                    errors.append(None)
            children.append(rows)
        out, parents = fan_out(table, children, COLUMNS)
        return BatchResult(out, dropped=dropped, errors=errors if any(errors) else None,
                           counters=self.client.usage.take(), parents=parents)
