"""Reading a model's answer: the one boundary between what a server said and what a row stores,
shared by every op that calls a model (judge, qa_generate, respond, instruct_generate).

An op's parser turns an answer's text into values (a score and a reason, question-answer pairs, a
numbered list, a response); `read` runs it on a reply, then checks that what it gave can be stored: Arrow and
Parquet hold UTF-8 strings (no lone surrogate, which JSON's `\\ud800` escape makes), 64-bit
integers and finite floats, nested no deeper than MAX_DEPTH. Anything raised on the way, by the
parser (its `Unparseable`, json's 4,300-digit limit on integers, the RecursionError of JSON nested
thousands deep, anything else) or by the check, makes the answer `Unusable`: the op quarantines its
row with the error "unusable answer: <why>; raw answer: '<its first RAW_CHARS characters>'", one
line of bounded length, which engine/tasks.py files under the reason `unusable_response`. The
answer stays in the response cache (it is what the server said) and is read through here again on
a rerun: a bad answer is quarantined again, and never stops a run.

An answer the server cut off at `max_tokens` (finish_reason `length`) is incomplete: a score line cut
after "Score: 1" of "Score: 10", half a JSON object, half a response. `read` refuses it before any
parser sees it, "truncated answer: ...", which engine/tasks.py files under the reason `truncated`
(raise `llm.max_tokens`, which also changes the request's cache key, so a rerun asks again). Only a
reader that keeps what is whole of a cut answer itself says so (`truncated_ok`: instruct_generate's
numbered lists, whose last item it drops as `truncated`).

JSON answers are read strictly (`json_answer`): an object that names a key twice
(`{"score": 0, "score": 5}`) is ambiguous, whichever one a parser would keep.

Parsers here are linear in the answer's length (up to io/llm/client.py MAX_BODY_BYTES): no regular
expression runs over a whole answer, only over a line's first few characters.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

RAW_CHARS = 2000  # of an unusable answer, quoted in its quarantine entry
WHY_CHARS = 300  # of what was wrong with it
MAX_DEPTH = 32  # nesting of a stored value: lists of pairs, a reason's object; deeper is no answer to us
INT64 = 2**63
T = TypeVar("T")


class Unparseable(ValueError):
    """An answer that does not say what the op asked for (no score, not JSON, two different scores)."""


class Ambiguous(Unparseable):
    """An answer that says two things where the op asked for one (a JSON key named twice)."""


class Unstorable(ValueError):
    """A value of an answer that Arrow cannot store (a lone surrogate, an infinite float...)."""


class Answered(Protocol):
    """What `read` takes: a model's reply (io/llm/client.py Reply) that holds an answer."""

    text: str | None
    finish_reason: str | None


@dataclass
class Unusable:
    """An answer that cannot be stored: `error` is its quarantine entry's one line, `cause` what was raised."""

    error: str
    cause: BaseException


class Truncated(Unparseable):
    """An answer the server cut off at max_tokens: what it says is incomplete."""


TRUNCATED = "truncated answer"  # how a Truncated answer's error starts (engine/tasks.py: reason `truncated`)


def read(reply: Answered, parse: Callable[[str], T], truncated_ok: bool = False) -> T | Unusable:
    """`parse(reply.text)`, checked storable; or Unusable with whatever went wrong on the way, or
    because the server cut the answer off at max_tokens (unless `truncated_ok`: the parser keeps
    only what is whole of it)."""
    text = reply.text or ""
    try:
        if reply.finish_reason == "length" and not truncated_ok:
            raise Truncated("the server stopped it at max_tokens (finish_reason \"length\"), so what it "
                            "says is incomplete; raise llm.max_tokens")
        value = parse(text)
        storable(value)
        return value
    except Exception as exc:  # the one boundary: no answer a server gives stops a run
        return Unusable(unusable(exc, text), exc)


def unusable(exc: BaseException, raw: str) -> str:
    why = str(exc) if isinstance(exc, Unparseable | Unstorable) else f"{type(exc).__name__}: {exc}"
    why = " ".join(why.split())
    why = why[:WHY_CHARS] + ("..." if len(why) > WHY_CHARS else "")
    quoted = repr(raw[:RAW_CHARS])  # one line: newlines, NULs and surrogates escaped
    if len(quoted) > 2 * RAW_CHARS:  # escapes make a character up to 10 long: the line stays bounded
        quoted = quoted[:2 * RAW_CHARS] + "..."
    what = TRUNCATED if isinstance(exc, Truncated) else "unusable answer"
    return f"{what}: {why}; raw answer: {quoted}" + (" (truncated)" if len(raw) > RAW_CHARS else "")


def storable(value: Any, where: str = "the answer", depth: int = 0) -> None:
    """Raises Unstorable (naming where in the value) unless Arrow can store `value`: strings that
    encode as UTF-8, integers within int64, finite floats, None and bools, and lists, tuples and
    dicts of those with string keys, at most MAX_DEPTH deep."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise Unstorable(f"{where} holds {value[exc.start]!r} at character {exc.start}, which is no "
                             "character (a lone surrogate) and cannot be stored") from None
        return
    if isinstance(value, int):
        if not -INT64 <= value < INT64:
            raise Unstorable(f"{where} is an integer of {len(str(abs(value)))} digits, beyond 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unstorable(f"{where} is {value}, which is no number to store")
        return
    if depth >= MAX_DEPTH:
        raise Unstorable(f"{where} is nested over {MAX_DEPTH} deep")
    if isinstance(value, list | tuple):
        names = getattr(value, "_fields", None)  # a NamedTuple's fields are named in the error
        for k, item in enumerate(value):
            storable(item, f"{where}'s {names[k]}" if names else f"{where}[{k}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise Unstorable(f"{where} has a key {key!r} that is no string")
            storable(key, f"a key of {where}", depth + 1)
            storable(item, f"{where}[{key[:40]!r}]", depth + 1)
        return
    raise Unstorable(f"{where} is a {type(value).__name__}, which cannot be stored")


def unfence(text: str) -> str:
    """The answer inside a ```json ... ``` fence (models often write one), else the answer, stripped."""
    body = text.strip()
    if len(body) < 6 or not body.startswith("```") or not body.endswith("```"):
        return body
    inner = body[3:-3]
    if inner[:4].lower() == "json":
        inner = inner[4:]
    return inner.strip()


def _no_constant(name: str) -> float:
    raise Unparseable(f"not JSON: {name} is no JSON number")


def _int64(digits: str) -> int:
    if len(digits.lstrip("-")) > 19:  # converted, 4,300 digits and more would raise, and cost time before
        raise Unparseable(f"an integer of {len(digits.lstrip('-'))} digits, beyond 64 bits")
    return int(digits)


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) < len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise Ambiguous(f"ambiguous: its JSON names the key {twice[:40]!r} twice")
    return data


def json_answer(text: str, numbers: Callable[[str], Any] | None = None) -> Any:
    """The answer's JSON value (fenced or not); Unparseable when it is not JSON, names a key twice in
    one object, or holds an integer beyond 64 bits. JavaScript's NaN and Infinity, which Python's
    json would take, are not JSON. `numbers`: what a number becomes, given its literal as written
    (judge_parse reads scores with the grammar of its text lines); by default ints and floats."""
    hooks = {"parse_int": numbers, "parse_float": numbers} if numbers else {"parse_int": _int64}
    try:
        return json.loads(unfence(text), parse_constant=_no_constant, object_pairs_hook=_one_value_per_key, **hooks)
    except json.JSONDecodeError as exc:
        raise Unparseable(f"not JSON ({exc})") from None
