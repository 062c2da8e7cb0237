"""Chat rows as one shape: a list of `{"role", "content"}` messages, from any of the three formats
chat data comes in, with every way a conversation can be malformed named by one rule.

- OpenAI `messages`: `{"messages": [{"role": "system"|"user"|"assistant", "content": str}, ...]}`
- ShareGPT: `{"conversations": [{"from": "system"|"human"|"gpt", "value": str}, ...]}` (also the
  `user`/`assistant` spellings some exports use), with an optional top-level `system` prompt
- Alpaca: `{"instruction", "input", "output"}` (optional `system`): one user turn, the instruction
  and the non-empty input joined by a blank line, and one assistant turn

`format: auto` decides per row by its keys, in that order. A conversation that cannot be trained
on raises `Malformed(rule)`; the op drops it with reason `sft_tokenize:<rule>`:
`not_json`, `no_conversation`, `not_a_list`, `not_a_message`, `unknown_role`, `non_string_content`,
`empty_content`, `misplaced_system`, `not_alternating`, `no_assistant`.
"""
from __future__ import annotations

import json
from typing import Any

FORMATS = ("auto", "messages", "sharegpt", "alpaca")
ROLES = ("system", "user", "assistant")
_SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
# Which key makes a row which format, in the order `auto` tries them.
_FORMAT_KEYS = (("messages", "messages"), ("sharegpt", "conversations"), ("alpaca", "instruction"),
                ("alpaca", "output"))


class Malformed(ValueError):
    """A conversation that cannot be trained on; `rule` is the drop reason's rule name."""

    def __init__(self, rule: str, detail: str = ""):
        super().__init__(f"{rule}: {detail}" if detail else rule)
        self.rule = rule


def parse_row(text: str) -> dict[str, Any]:
    """The JSON object the reader made of a chat row (`input.chat: true`)."""
    try:
        row = json.loads(text)
    except ValueError:
        raise Malformed("not_json", "the text is not a JSON conversation (read the input with input.chat: true)") from None
    if not isinstance(row, dict):
        raise Malformed("not_json", f"a JSON {type(row).__name__}, not an object")
    return row


def detect_format(row: dict[str, Any]) -> str:
    fmt = next((fmt for fmt, key in _FORMAT_KEYS if key in row), None)
    if fmt is None:
        raise Malformed("no_conversation", f"no messages, conversations or instruction/output among {sorted(row)[:8]}")
    return fmt


def to_messages(row: dict[str, Any], fmt: str = "auto", alternate: bool = True) -> list[dict[str, str]]:
    """The row's conversation as checked messages (`check`); raises Malformed."""
    if fmt == "auto":
        fmt = detect_format(row)
    if fmt == "messages":
        messages = _turns(row, "messages", "role", "content", {r: r for r in ROLES})
    elif fmt == "sharegpt":
        messages = _turns(row, "conversations", "from", "value", _SHAREGPT_ROLES)
    elif fmt == "alpaca":
        messages = _alpaca(row)
    else:
        raise ValueError(f"unknown chat format {fmt!r}; one of {', '.join(FORMATS)}")
    if "system" in row and fmt != "alpaca" and not (messages and messages[0]["role"] == "system"):
        messages.insert(0, {"role": "system", "content": row["system"]})  # ShareGPT's top-level prompt
    check(messages, alternate)
    return messages


def _turns(row: dict[str, Any], key: str, role_key: str, content_key: str, roles: dict[str, str]) -> list[dict]:
    if key not in row:
        raise Malformed("no_conversation", f"no {key!r} field")
    turns = row[key]
    if not isinstance(turns, list):
        raise Malformed("not_a_list", f"{key!r} is a {type(turns).__name__}")
    messages = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise Malformed("not_a_message", f"{key}[{i}] is a {type(turn).__name__}")
        role = roles.get(turn.get(role_key)) if isinstance(turn.get(role_key), str) else None
        if role is None:
            raise Malformed("unknown_role", f"{key}[{i}].{role_key} is {turn.get(role_key)!r}")
        messages.append({"role": role, "content": turn.get(content_key)})
    return messages


def _alpaca(row: dict[str, Any]) -> list[dict]:
    for key in ("instruction", "input", "output", "system"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise Malformed("non_string_content", f"{key!r} is a {type(row[key]).__name__}")
    user = "\n\n".join(part for part in (row.get("instruction"), row.get("input")) if part and part.strip())
    messages = [{"role": "user", "content": user}, {"role": "assistant", "content": row.get("output")}]
    if row.get("system") is not None:
        messages.insert(0, {"role": "system", "content": row["system"]})
    return messages


def check(messages: list[dict[str, Any]], alternate: bool = True) -> None:
    """Raise Malformed unless every content is a non-blank string, a system message comes only first,
    there is an assistant turn, and (with `alternate`) user and assistant take turns from a user
    turn on, as most chat templates require."""
    for i, m in enumerate(messages):
        content = m["content"]
        if content is None:
            raise Malformed("empty_content", f"message {i} ({m['role']}) has no content")
        if not isinstance(content, str):
            raise Malformed("non_string_content", f"message {i} ({m['role']}) content is a {type(content).__name__}")
        if not content.strip():
            raise Malformed("empty_content", f"message {i} ({m['role']}) is blank")
        if m["role"] == "system" and i > 0:
            raise Malformed("misplaced_system", f"message {i} is a system message after the first")
    if not any(m["role"] == "assistant" for m in messages):
        raise Malformed("no_assistant", "no assistant turn to learn from")
    if alternate:
        turns = [m["role"] for m in messages if m["role"] != "system"]
        for i, role in enumerate(turns):
            expected = "user" if i % 2 == 0 else "assistant"
            if role != expected:
                raise Malformed("not_alternating", f"turn {i} is {role!r} where {expected!r} was due")
