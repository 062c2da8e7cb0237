"""What a judge said: the score of a pointwise answer and the verdict of a pairwise one, read with
one strict grammar. An answer that does not state one value unambiguously raises `Unparseable` (its
row is quarantined, io/llm/answer.py): a guess stored as a score would be a wrong label that nothing
flags.

A score is a plain number: an integer or a decimal, `-`? digits (`.` digits)?, at most 12 digits on
each side of the point ("7", "7.5", "-0" which is 0), or a fraction of the scale's top, "7/10" or "7
out of 10" on a 1-10 scale ("3/10" on a 0-5 scale is no score on it). Nothing else is a score:
exponents ("8e-1", "1e309"), hexadecimal ("0x5"), separators ("1_0", "4,5"), vulgar fractions
("5½"), ranges and alternatives ("2-5", "7 to 8", "7 or 8"), fractions of fractions ("7 / 10 / 2").
A score outside [low, high] raises `OutOfRange` (the judge did not follow the rubric: its number
means nothing on our scale).

Accepted forms of a pointwise answer, on the op's scale [low, high]:
- JSON (also in a ```json fence): `{"score": 7, "reason": "..."}`. The score is a JSON number written
  as a score is (not 7e0, not a bool, not NaN or Infinity), or a string holding a score ("7", "7/10",
  "7 out of 10") and nothing else. The reason is a string, or absent (another value makes the answer
  unusable). An object naming a key twice is ambiguous (io/llm/answer.py json_answer).
- Otherwise lines `<label>: <score>` (`:` or `：`, Markdown emphasis, `#` or `-` before the label,
  `**7**`, `[[7]]`, `(7)` and a `分` after the score allowed), with the label `Score`, `Rating`, `评分`,
  `分数` or `得分`, each maybe after `Total`, `Final`, `Overall` or `Educational` (`总`, `最终`, `综合`;
  and `总分`): a final score. The score ends the line or is followed by a space or a punctuation mark
  and words; a score line that holds any other number after its score ("7 (on a 1-10 scale)",
  "7 to 8") is ambiguous. When the answer has final lines, they alone count (per-criterion lines
  before a `Total score` line are its parts); otherwise every score line counts. The lines that count
  must all say the same number, or the answer is ambiguous. The reason is the answer's other lines.

A pairwise answer: JSON `{"winner": "A" | "B" | "tie", "reason"}` (`[[A]]` and quotes allowed), or
lines `Winner: A` (`Verdict`, `胜者`, `结论`; `平局` for a tie) that all name the same one; a verdict
line that names another verdict after its own ("A or B", "A, then B on reflection") is ambiguous.

Every reader here is linear in the answer's length: regular expressions run on a line's first
LINE_HEAD characters only, on patterns without nested or adjacent quantifiers over one class.
"""
from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

from ylink_data.io.llm.answer import Ambiguous, Unparseable, json_answer

LINE_HEAD = 80  # characters of a line where a label and its value are looked for
_DECORATION = " \t*#_>-`"  # Markdown around a label: "**Score**:", "## Score:", "- Score:"
_SCORE_LABEL = re.compile(r"(?:(total|final|overall|educational) )?(?:score|rating)|(总|最终|综合)?(?:评分|分数|得分)|(总分)")
_WINNER_LABEL = re.compile(r"winner|verdict|胜者|结论")
PLAIN_NUMBER = re.compile(r"-?[0-9]{1,12}(?:\.[0-9]{1,12})?")  # ASCII digits: \d would take "７" and "٧"
_OPENERS = " \t*[("  # before a value: "**7**", "[[7]]", "(7)"
_CLOSERS = "*])"
_UNIT = "分"  # "7分": Chinese judges write the score's unit after it
_FOLLOWERS = frozenset(" \t.,;:!?。，；：！？、")  # what may follow a value (then words)
_OUT_OF = "out of"
WINNERS = {"a": "A", "b": "B", "tie": "tie", "平局": "tie"}


class OutOfRange(Unparseable):
    pass


class Verdict(NamedTuple):
    """What a judge's answer says (a tuple: io/llm/answer.py names its fields in an error)."""

    value: float | str  # the score, or "A", "B", "tie"
    reason: str


class _Literal(NamedTuple):
    """A JSON number as written (json_answer's `numbers`): read with the score grammar."""

    text: str


def parse_score(text: str, low: float = 1, high: float = 10) -> Verdict:
    """(score, reason) of a pointwise answer on the scale [low, high]; see the module docstring."""
    data = _json_object(text)
    if isinstance(data, dict) and "score" in data:
        score, reason = _json_score(data["score"], high), _json_reason(data)
    else:
        score, reason = _line_score(text, high, data if isinstance(data, str) else 'no "score" in its JSON')
    if not low <= score <= high:
        raise OutOfRange(f"score {score:g} is outside {low:g}-{high:g}")
    return Verdict(score + 0.0, reason.strip())  # + 0.0: "-0" is the score 0, not -0.0


def parse_winner(text: str) -> Verdict:
    """("A" | "B" | "tie", reason) of a pairwise answer; see the module docstring."""
    data = _json_object(text)
    if isinstance(data, dict) and "winner" in data:
        said = data["winner"]
        winner = WINNERS.get(said.lower().strip("[]\"' ")) if isinstance(said, str) else None
        if winner is None:
            shown = said.text if isinstance(said, _Literal) else str(said)
            raise Unparseable(f'winner {shown[:40]!r} is none of "A", "B", "tie"')
        return Verdict(winner, _json_reason(data).strip())
    found, rest = _labelled_lines(text, lambda label: _WINNER_LABEL.fullmatch(label) is not None)
    if not found:
        raise Unparseable('no verdict: neither JSON {"winner": "A" | "B" | "tie"} nor a "Winner: A" line')
    winners = {_winner_value(value) for _, value in found}
    if len(winners) > 1:
        raise Unparseable(f"ambiguous: the answer names {len(winners)} winners ({', '.join(sorted(winners))})")
    return Verdict(winners.pop(), rest)


def score_value(value: str, high: float, whole: bool = False) -> float:
    """The score a value states (see the module docstring): a plain number, or a fraction of the
    scale's top (`high`), after `_OPENERS` and before `_CLOSERS` and a `分`; then a space or a
    punctuation mark and words without a number (`whole`, a JSON string: no words)."""
    i = _skip(value, 0, _OPENERS)
    number = PLAIN_NUMBER.match(value, i, i + LINE_HEAD)
    if number is None:
        raise Unparseable(f"score {value.strip()[:40]!r} is not a number")
    score, end = float(number.group()), number.end()
    k = _skip(value, end, " \t")
    over = k + 1 if value.startswith("/", k) else k + len(_OUT_OF) if value[k:k + len(_OUT_OF)].lower() == _OUT_OF else -1
    if over >= 0:
        top = PLAIN_NUMBER.match(value, _skip(value, over, " \t"))
        if top is not None:
            if float(top.group()) != high:
                raise Unparseable(f"ambiguous: score {number.group()}/{top.group()} is not on this scale (its top is {high:g})")
            end = top.end()
    end = _skip(value, end, _CLOSERS)
    end += value.startswith(_UNIT, end)
    shown = value.strip()[:40]
    follow = value[end:end + 1]
    if follow and (follow not in _FOLLOWERS or whole and any(c not in _FOLLOWERS for c in value[end:])):
        raise Unparseable(f"score {shown!r} is not a plain number")
    if _has_number(value[end:]):
        raise Unparseable(f"ambiguous: score {shown!r} holds another number after {value[i:end].strip()!r}")
    return score


def _winner_value(value: str) -> str:
    """The verdict a `Winner:` line's value names: one of WINNERS, and no other after it."""
    i = _skip(value, 0, " \t*[\"'")
    head = value[i:i + 3].lower()
    said = next((w for w in ("tie", "平局", "a", "b") if head.startswith(w)), None)
    end = i + len(said or "")
    if said is None or (said != "平局" and value[end:end + 1].isalnum()):
        raise Unparseable(f'winner {value.strip()[:40]!r} is none of "A", "B", "tie"')
    winner = WINNERS[said]
    rest = value[end:]
    words = "".join(c if c.isalnum() else " " for c in rest).split()
    named = {WINNERS[w.lower()] for w in words if w in ("A", "B") or w.lower() == "tie"}
    named |= {"tie"} if "平局" in rest else set()
    if named - {winner}:
        raise Unparseable(f"ambiguous: the verdict line {value.strip()[:40]!r} names {winner} and "
                          f"{', '.join(sorted(named - {winner}))}")
    return winner


def _skip(text: str, i: int, chars: str) -> int:
    while i < len(text) and text[i] in chars:
        i += 1
    return i


def _has_number(text: str) -> bool:
    """Whether `text` holds a digit or any other number character ("½", "Ⅷ", "²"): Unicode's N*."""
    return any(c.isdigit() or (not c.isascii() and unicodedata.category(c)[0] == "N") for c in text)


def _json_object(text: str) -> dict | str:
    """The answer's JSON object, or why it is none (not JSON, or JSON of another kind)."""
    try:
        data = json_answer(text, numbers=_Literal)
    except Ambiguous:
        raise
    except Unparseable as exc:
        return str(exc)
    return data if isinstance(data, dict) else f"its JSON is a {_kind(data)}, not an object"


def _kind(value: object) -> str:
    return "number" if isinstance(value, _Literal) else type(value).__name__


def _json_reason(data: dict) -> str:
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise Unparseable(f"reason is a {_kind(reason)}, not text")
    return reason or ""


def _json_score(score: object, high: float) -> float:
    if isinstance(score, _Literal | str):
        literal = score.text if isinstance(score, _Literal) else score.strip()
        return score_value(literal, high, whole=True)
    raise Unparseable(f"score {str(score)[:40]!r} is not a number")


def _line_score(text: str, high: float, not_json: str) -> tuple[float, str]:
    found, rest = _labelled_lines(text, lambda label: _SCORE_LABEL.fullmatch(label) is not None)
    if not found:
        raise Unparseable(f'no score: neither JSON {{"score": N}} ({not_json[:200]}) nor a "Score: N" line')
    final = [value for label, value in found if _is_final(label)]
    counted = final or [value for _, value in found]
    scores = {score_value(value, high) + 0.0 for value in counted}
    if len(scores) > 1:
        listed = ", ".join(f"{s:g}" for s in sorted(scores)[:5])
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
