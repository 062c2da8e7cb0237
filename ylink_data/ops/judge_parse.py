"""What a judge said: the score of a pointwise answer and the verdict of a pairwise one, read
strictly. An answer that does not state one value unambiguously raises `Unparseable` (its row is
quarantined, io/llm/answer.py): a guess stored as a score would be a wrong label that nothing flags.

Accepted forms of a pointwise answer, on the op's scale [low, high]:
- JSON (also in a ```json fence): `{"score": 7, "reason": "..."}`. The score is a number (not a
  bool, not NaN or Infinity), or a string holding one ("7", "7.5"), or a fraction of the scale's
  top, "7/10" or "7 out of 10" on a 1-10 scale ("3/10" on a 0-5 scale is no score on it). The
  reason is a string, or absent (another value makes the answer unusable).
- Otherwise lines `<label>: <number>` (`:` or `：`, Markdown emphasis, `#` or `-` before it, `[[7]]`
  and the same fractions allowed), with the label `Score`, `Rating`, `评分`, `分数` or `得分`, each
  maybe after `Total`, `Final`, `Overall` or `Educational` (`总`, `最终`, `综合`; and `总分`): a final
  score. When the answer has final lines, they alone count (per-criterion lines before a `Total
  score` line are its parts); otherwise every score line counts. The lines that count must all say
  the same number, or the answer is ambiguous. The reason is the answer's other lines.
A score outside [low, high] raises `OutOfRange` (the judge did not follow the rubric: its number
means nothing on our scale).

A pairwise answer: JSON `{"winner": "A" | "B" | "tie", "reason"}` (`[[A]]` and quotes allowed), or
lines `Winner: A` (`Verdict`, `胜者`, `结论`; `平局` for a tie) that all name the same one.

Every reader here is linear in the answer's length: regular expressions run on a line's first
LINE_HEAD characters only.
"""
from __future__ import annotations

import math
import re

from typing import NamedTuple

from ylink_data.io.llm.answer import Unparseable, json_answer

LINE_HEAD = 80  # characters of a line where a label and its value are looked for
_DECORATION = " \t*#_>-`"  # Markdown around a label: "**Score**:", "## Score:", "- Score:"
_SCORE_LABEL = re.compile(r"(?:(total|final|overall|educational) )?(?:score|rating)|(总|最终|综合)?(?:评分|分数|得分)|(总分)")
_WINNER_LABEL = re.compile(r"winner|verdict|胜者|结论")
_NUMBER = r"-?\d{1,12}(?:\.\d{1,12})?"
# A score's value: "7", "7.5", "7/10", "7 out of 10", "[[7]]", "**7**", "7分"; what follows is free.
_VALUE = re.compile(rf"[\s*\[]*({_NUMBER})(?![\d.])(?:\s*(?:/|out of)\s*({_NUMBER})(?![\d.]))?", re.I)
_WINNER_VALUE = re.compile(r"[\s*\[\"']*(a|b|tie|平局)(?![a-z])", re.I)
WINNERS = {"a": "A", "b": "B", "tie": "tie", "平局": "tie"}


class OutOfRange(Unparseable):
    pass


class Verdict(NamedTuple):
    """What a judge's answer says (a tuple: io/llm/answer.py names its fields in an error)."""

    value: float | str  # the score, or "A", "B", "tie"
    reason: str


def parse_score(text: str, low: float = 1, high: float = 10) -> Verdict:
    """(score, reason) of a pointwise answer on the scale [low, high]; see the module docstring."""
    data = _json_object(text)
    if isinstance(data, dict) and "score" in data:
        score, reason = _json_score(data["score"], high), _json_reason(data)
    else:
        score, reason = _line_score(text, high, data if isinstance(data, str) else 'no "score" in its JSON')
    if not low <= score <= high:
        raise OutOfRange(f"score {_shown(score)} is outside {low:g}-{high:g}")
    return Verdict(float(score), reason.strip())


def parse_winner(text: str) -> Verdict:
    """("A" | "B" | "tie", reason) of a pairwise answer; see the module docstring."""
    data = _json_object(text)
    if isinstance(data, dict) and "winner" in data:
        said = data["winner"]
        winner = WINNERS.get(said.lower().strip("[]\"' ")) if isinstance(said, str) else None
        if winner is None:
            raise Unparseable(f'winner {str(said)[:40]!r} is none of "A", "B", "tie"')
        return Verdict(winner, _json_reason(data).strip())
    found, rest = _labelled_lines(text, lambda label: _WINNER_LABEL.fullmatch(label) is not None)
    if not found:
        raise Unparseable('no verdict: neither JSON {"winner": "A" | "B" | "tie"} nor a "Winner: A" line')
    winners = set()
    for _, value in found:
        m = _WINNER_VALUE.match(value[:LINE_HEAD])
        if m is None:
            raise Unparseable(f'winner {value.strip()[:40]!r} is none of "A", "B", "tie"')
        winners.add(WINNERS[m.group(1).lower()])
    if len(winners) > 1:
        raise Unparseable(f"ambiguous: the answer names {len(winners)} winners ({', '.join(sorted(winners))})")
    return Verdict(winners.pop(), rest)


def _json_object(text: str) -> dict | str:
    """The answer's JSON object, or why it is none (not JSON, or JSON of another kind)."""
    try:
        data = json_answer(text)
    except Unparseable as exc:
        return str(exc)
    return data if isinstance(data, dict) else f"its JSON is a {type(data).__name__}, not an object"


def _json_reason(data: dict) -> str:
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise Unparseable(f"reason is a {type(reason).__name__}, not text")
    return reason or ""


def _json_score(score: object, high: float) -> float | int:
    if isinstance(score, str):
        return _value(score.strip(), high, whole=True)
    if isinstance(score, bool) or not isinstance(score, int | float) or (isinstance(score, float)
                                                                        and not math.isfinite(score)):
        raise Unparseable(f"score {str(score)[:40]!r} is not a number")
    return score


def _line_score(text: str, high: float, not_json: str) -> tuple[float, str]:
    found, rest = _labelled_lines(text, lambda label: _SCORE_LABEL.fullmatch(label) is not None)
    if not found:
        raise Unparseable(f'no score: neither JSON {{"score": N}} ({not_json[:200]}) nor a "Score: N" line')
    final = [value for label, value in found if _is_final(label)]
    counted = final or [value for _, value in found]
    scores = {_value(value, high) for value in counted}
    if len(scores) > 1:
        listed = ", ".join(_shown(s) for s in sorted(scores)[:5])
        raise Unparseable(f"ambiguous: {len(scores)} different {'final ' if final else ''}scores ({listed})")
    return scores.pop(), rest


def _is_final(label: str) -> bool:
    m = _SCORE_LABEL.fullmatch(label)
    return bool(m and (m.group(1) or m.group(2) or m.group(3)))


def _labelled_lines(text: str, wanted) -> tuple[list[tuple[str, str]], str]:
    """([(label, value)] of the lines `<label>: <value>` whose label is `wanted`, the other lines)."""
    found: list[tuple[str, str]] = []
    rest: list[str] = []
    for line in text.splitlines():
        head = line[:LINE_HEAD]
        cut = min((k for k in (head.find(":"), head.find("：")) if k >= 0), default=-1)
        label = " ".join(head[:cut].strip(_DECORATION).lower().split()) if cut >= 0 else ""
        if label and wanted(label):
            found.append((label, line[cut + 1:]))
        else:
            rest.append(line)
    return found, "\n".join(rest).strip()


def _value(value: str, high: float, whole: bool = False) -> float:
    """The score a value states: a number, or a fraction of the scale's top (`high`)."""
    m = _VALUE.match(value[:LINE_HEAD])
    if m is None or (whole and m.end() != len(value)):
        raise Unparseable(f"score {value.strip()[:40]!r} is not a number")
    score = float(m.group(1))
    if m.group(2) is not None and float(m.group(2)) != high:
        raise Unparseable(f"ambiguous: score {m.group(1)}/{m.group(2)} is not on this scale (its top is {high:g})")
    return score


def _shown(score: float | int) -> str:
    text = str(score) if isinstance(score, int) else f"{score:g}"
    return text if len(text) <= 20 else f"{text[:12]}... ({len(text)} digits)"
