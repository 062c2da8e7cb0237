"""Generated model answers for the chaos tests of issue 33 (tests/chaos/test_llm_hostile.py): values an
answer may hold, each with what a run must make of it, built from real text with a seeded RNG.

A value is a JSON literal as a server's answer would hold it (`literal`) with what a row must store
(`stored`), or None when no row can store it: a lone surrogate (JSON's `\\udXXX` escape of half a
pair), an integer of thousands of digits, NaN and Infinity (no JSON), 1e999 (infinite), nesting
deeper than any parser goes. The expectations come from how each value was built, not from the
code under test.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any


@dataclass
class Value:
    name: str
    literal: str  # JSON text
    stored: Any  # what a row holds of it; None: no row can hold it (the answer is unusable)


def _insert(rng: random.Random, text: str, piece: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + piece + text[at:]


def strings(rng: random.Random, real: list[str]) -> list[Value]:
    """String values: real text as it is, with NUL and control characters, with characters outside
    the BMP (a surrogate pair in JSON), megabytes of it; and with lone surrogates, which no UTF-8
    column holds (a high half, a low half, a pair reversed)."""
    def text() -> str:
        return rng.choice(real)

    out = [Value("real", json.dumps(t := text()), t)]
    t = _insert(rng, text(), "\x00")
    out.append(Value("NUL", json.dumps(t), t))
    t = _insert(rng, text(), "".join(chr(rng.randrange(1, 32)) for _ in range(5)))
    out.append(Value("control characters", json.dumps(t), t))
    t = _insert(rng, text(), "".join(chr(rng.randrange(0x1F300, 0x1FAFF)) for _ in range(3)))
    out.append(Value("astral characters", json.dumps(t), t))
    big = " ".join(rng.choice(real) for _ in range(rng.randrange(600, 1200)))  # 1-3 MB: enormous, still storable
    out.append(Value(f"enormous ({len(big):,} characters)", json.dumps(big), big))
    for low, high, what in ((0xD800, 0xDBFF, "high"), (0xDC00, 0xDFFF, "low")):
        cp = rng.randrange(low, high + 1)
        out.append(Value(f"lone {what} surrogate U+{cp:04X}", json.dumps(_insert(rng, text(), chr(cp))), None))
    pair = "\\udc00\\ud800"  # a low half, then a high one: two lone surrogates
    t = text()
    out.append(Value("reversed surrogate pair", json.dumps(t)[:-1] + pair + '"', None))
    return out


def junk(rng: random.Random) -> list[Value]:
    """Values of no type an op asked for (where it wants text or a score): numbers Arrow cannot hold
    or JSON does not have, and nesting from shallow to deeper than a parser's stack."""
    digits = rng.randrange(20, 6000)
    deep = rng.randrange(20_000, 200_000)
    shallow = rng.randrange(2, 20)
    return [Value(f"integer of {digits} digits", str(rng.randrange(1, 10)) + "1" * (digits - 1), None),
            Value("2**63", str(2**63), None),
            Value("1e999", "1e999", None),
            Value("NaN", "NaN", None), Value("Infinity", "Infinity", None), Value("-Infinity", "-Infinity", None),
            Value(f"nested {deep} deep", "[" * deep + "]" * deep, None),
            Value(f"nested {shallow} deep", "[" * shallow + "1" + "]" * shallow, None),
            Value("an object", '{"text": "fine"}', None)]


def scores(rng: random.Random, low: int, high: int) -> list[Value]:
    """Score values on the scale [low, high] (integers) in every JSON form, with the score they state
    or None: on the scale as a number, a string, a fraction of the top ("3/5", "3 out of 5"), a half;
    and off it: outside, a fraction of another top ("3/10" on 0-5), no number, a bool, a list."""
    out = []
    for k in range(low, high + 1):
        out += [Value(f"{k}", f"{k}", float(k)), Value(f'"{k}"', f'"{k}"', float(k)),
                Value(f'"{k}/{high}"', f'"{k}/{high}"', float(k)), Value(f'"{k} out of {high}"', f'"{k} out of {high}"', float(k))]
        if k < high:
            out.append(Value(f"{k}.5", f"{k}.5", k + 0.5))
        other = rng.choice([t for t in (3, 4, 5, 10, 100) if t != high])
        out.append(Value(f'"{k}/{other}"', f'"{k}/{other}"', None))
    out += [Value(f"{high + 1}", f"{high + 1}", None), Value(f"{low - 1}", f"{low - 1}", None),
            Value("true", "true", None), Value("null", "null", None), Value('""', '""', None),
            Value('"three"', '"three"', None), Value("[3]", "[3]", None), Value('{"v": 3}', '{"v": 3}', None)]
    return out


@dataclass
class ScoreLines:
    name: str
    text: str
    score: float | None  # None: ambiguous or off the scale


def score_lines(rng: random.Random, real: list[str], low: int, high: int) -> list[ScoreLines]:
    """Answers without JSON: `Score: N` lines in the forms judges write (Markdown, Chinese labels,
    fractions, [[N]]), one line, several that agree, per-criterion lines under a total, and the
    ambiguous ones: several different scores, two different totals, a fraction of another top."""
    labels = ("Score", "Rating", "评分", "得分", "Educational score", "Total score", "Final score", "总分")
    decorations = (("", ""), ("**", "**"), ("## ", ""), ("- ", ""))
    values = (lambda k: f"{k}", lambda k: f"{k}/{high}", lambda k: f"[[{k}]]", lambda k: f"**{k}**",
              lambda k: f"{k} out of {high}")
    out = []
    for label in labels:
        k = rng.randint(low, high)
        before, after = rng.choice(decorations)
        line = f"{before}{label}{after}{rng.choice(':：')} {rng.choice(values)(k)}"
        out.append(ScoreLines(f"line {line!r}", f"{rng.choice(real)}\n{line}", float(k)))
    k = rng.randint(low, high)
    out.append(ScoreLines("agreeing lines", f"Score: {k}\n{rng.choice(real)}\nScore: {k}/{high}", float(k)))
    parts = [rng.randint(0, 1) for _ in range(high - low)]
    total = low + sum(parts)
    criteria = "\n".join(f"Criterion {i + 1}: {rng.choice(real)[:60]}\nScore: {p}" for i, p in enumerate(parts))
    out.append(ScoreLines("per-criterion lines and a total", f"{criteria}\nTotal score: {total}", float(total)))
    a, b = rng.sample(range(low, high + 1), 2)
    out.append(ScoreLines("two different scores", f"Score: {a}\n{rng.choice(real)}\nScore: {b}", None))
    out.append(ScoreLines("two different totals", f"Total score: {a}\nFinal score: {b}", None))
    other = 10 if high != 10 else 5
    out.append(ScoreLines(f"a fraction of {other}", f"{rng.choice(real)}\nScore: {a}/{other}", None))
    out.append(ScoreLines("a score line without a number", "Score: good\nIt is fine.", None))
    out.append(ScoreLines("no score", rng.choice(real), None))
    return out


@dataclass
class Said:
    name: str
    text: str
    winner: str | None  # "A", "B", "tie"; None: no usable verdict


def verdicts(rng: random.Random, real: list[str]) -> list[Said]:
    """Pairwise answers in every form a judge writes, with the verdict they state, and the unusable
    ones: a winner that is none of A, B, tie, two different winners, no verdict, a reason that is no
    text or that no row can store."""
    out = []
    for w in ("A", "B", "tie"):
        reason = rng.choice(real)
        for form in (w, f"[[{w}]]", w.lower(), f" {w} "):
            out.append(Said(f"JSON winner {form!r}", json.dumps({"winner": form, "reason": reason}), w))
        out.append(Said(f"fenced JSON {w}", f"```json\n{json.dumps({'reason': reason, 'winner': w})}\n```", w))
        said = "平局" if w == "tie" else w
        for line in (f"Winner: {w}", f"**Verdict**: [[{w}]]", f"胜者：{said}", f"## Winner: {w}", f"结论：{said}"):
            out.append(Said(f"line {line!r}", f"{reason}\n{line}" if rng.random() < 0.5 else f"{line}\n{reason}", w))
        out.append(Said(f"agreeing lines {w}", f"Winner: {w}\n{reason}\nVerdict: {w}", w))
    for v in strings(rng, real):
        out.append(Said(f"reason {v.name}", f'{{"winner": "{rng.choice("AB")}", "reason": {v.literal}}}',
                        None if v.stored is None else "pending"))
    for v in junk(rng):
        out.append(Said(f"reason {v.name}", f'{{"winner": "A", "reason": {v.literal}}}', None))
        out.append(Said(f"winner {v.name}", f'{{"winner": {v.literal}}}', None))
    out += [Said("winner C", '{"winner": "C"}', None), Said("winner 1", '{"winner": 1}', None),
            Said("two winners", f"Winner: A\n{rng.choice(real)}\nWinner: B", None),
            Said("no verdict", rng.choice(real), None)]
    for said in out:  # a storable reason's verdict is its JSON's winner
        if said.winner == "pending":
            said.winner = json.loads(said.text)["winner"]
    return out
