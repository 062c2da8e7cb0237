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


# ----------------------------------------------------------------------------- issue 39, point 10
# The grammar of a judge's answer, generated: every label form times every way of writing a value
# times every way of going on after it. Each piece says what it does to the answer (a score, a
# verdict, or nothing usable), so the expectation of every product comes from how it was built.
# The table of the issue: each answer was stored as the wrong score before.
ISSUE_39_SCORES = ("Score: 1e309", "8e-1", "Score: 8e-1", "Score: 1.5e1", "Score: 4,5", "Score: 2-5", "Score: 7 to 8",
                   "Score: 0x5", "Score: 1_0", "Score: 5½", "Score: 7 / 10 / 2", '{"score":0,"score":5}')
ISSUE_39_VERDICTS = ('{"winner":"A","winner":"B"}', "Winner: A or B")


def score_values(k: int, low: int, high: int) -> list[tuple[str, float | None]]:
    """Ways of writing score k on [low, high] (k < high), with the score each states, or None: a
    plain number, a fraction of the top, decorated, with its unit; and what is no plain number
    (exponents, hexadecimal, separators, vulgar fractions, signs, other digits), ranges and
    alternatives, fractions of another top or of a fraction, scores off the scale."""
    other = next(t for t in (3, 4, 5, 10, 100) if t != high)
    valid = [(f"{k}", k), (f"{k}.0", k), (f"{k}.5", k + 0.5), (f"0{k}", k), (f"{k}/{high}", k), (f"{k} / {high}", k),
             (f"{k} out of {high}", k), (f"**{k}**", k), (f"[[{k}]]", k), (f"({k})", k), (f"{k}分", k),
             (f"[[{k}/{high}]]", k), (f"{k}.", k)]
    if low == 0:
        valid.append(("-0", 0))
    invalid = [f"{k}e0", f"{k}E1", f"{k}.5e1", "1e309", f"{k}e-1", f"0x{k}", f"{k}_0", f"{k},5", f"{k}½", f"+{k}",
               chr(0xFF10 + k), f"{k}/{other}", f"{k}/{high}/2", f"{k}-{k + 1}", f"{k} to {k + 1}", f"{k} or {k + 1}",
               f"{k}~{k + 1}", ".5", f"{k}%", "seven", f"{high + 1}", f"{low - 1}", f"{k}.5.1", f"{k}²", f"{k}x"]
    return [(v, float(s)) for v, s in valid] + [(v, None) for v in invalid]


# What may follow a score on its line: words (kept: they are the score line's, not its reason), or
# words holding another number (ambiguous: which number is the score?).
SCORE_TRAILERS = (("", True), (".", True), (" ", True), (". The answer is clear and complete.", True),
                  (" - clear, but terse", True), ("，理由充分。", True), ("。回答完整。", True), (" points", True),
                  (" (on a 1-10 scale)", False), (", maybe 8 on a second reading", False), (" (2 criteria met)", False),
                  ("; 二级标准", True), (" ½", False), ("，满分十分", True))


def score_shapes(rng: random.Random, real: list[str], low: int, high: int) -> list[ScoreLines]:
    """`Score: N` answers: every label and decoration (drawn for each value) times every value of
    `score_values` times every trailer, with a sentence of real text before or after; the score a
    valid value with a number-free trailer states, else None."""
    labels = ("Score", "Rating", "评分", "得分", "分数", "Educational score", "Total score", "Final score", "总分", "最终评分")
    decorations = (("", ""), ("**", "**"), ("## ", ""), ("- ", ""), ("**", ":**"))
    out = []
    for k in (low, low + 1, high - 1):
        for value, score in score_values(k, low, high):
            for trailer, clean in SCORE_TRAILERS:
                before, after = rng.choice(decorations)
                colon = "" if after.endswith(":**") else rng.choice((":", "：", ": "))
                line = f"{before}{rng.choice(labels)}{after}{colon} {value}{trailer}"
                said = score if clean and score is not None and low <= score <= high else None
                text = f"{rng.choice(real)}\n{line}" if rng.random() < 0.5 else f"{line}\n{rng.choice(real)}"
                out.append(ScoreLines(f"line {line!r}", text, said))
    return out


def json_score_shapes(rng: random.Random, real: list[str], low: int, high: int) -> list[ScoreLines]:
    """JSON answers: the score as a JSON number or string written in every way of `score_values`
    (a JSON number only where it is one), and objects that name a key twice (ambiguous, whichever
    one a parser would keep; nested too)."""
    out = []
    k = rng.randint(low, high - 1)
    for value, score in score_values(k, low, high):
        reason = rng.choice(real)
        out.append(ScoreLines(f"JSON string {value!r}", json.dumps({"score": value, "reason": reason}),
                              score if score is not None and low <= score <= high else None))
        try:
            json.loads(value)
        except ValueError:
            continue
        if isinstance(json.loads(value), int | float) and not isinstance(json.loads(value), bool):
            out.append(ScoreLines(f"JSON number {value}", f'{{"score": {value}, "reason": {json.dumps(reason)}}}',
                                  score if score is not None and low <= score <= high else None))
    a, b = rng.sample(range(low, high + 1), 2)
    reason = json.dumps(rng.choice(real))
    for name, text in (("score twice, two values", f'{{"score": {a}, "score": {b}}}'),
                       ("score twice, one value", f'{{"score": {a}, "reason": {reason}, "score": {a}}}'),
                       ("reason twice", f'{{"score": {a}, "reason": {reason}, "reason": "other"}}'),
                       ("a key twice in a nested object", f'{{"score": {a}, "detail": {{"x": 1, "x": 2}}}}'),
                       ("score twice, fenced", f'```json\n{{"score": {a}, "score": {b}}}\n```')):
        out.append(ScoreLines(name, text, None))
    return out


def verdict_shapes(rng: random.Random, real: list[str]) -> list[Said]:
    """Pairwise answers: every verdict label times every way of writing a verdict times every trailer;
    a trailer that names another verdict ("A or B", "A, B on reflection") makes the answer ambiguous,
    one that names the same one or none keeps it. JSON with `winner` named twice is ambiguous."""
    labels = ("Winner", "Verdict", "胜者", "结论", "**Winner**", "## Verdict", "- Winner")
    out = []
    for w in ("A", "B", "tie"):
        other = {"A": "B", "B": "A", "tie": rng.choice("AB")}[w]
        forms = [(w, w), (f"[[{w}]]", w), (f"**{w}**", w), (f'"{w}"', w), (w.lower(), w)]
        if w == "tie":
            forms.append(("平局", "tie"))
        forms += [(f"Assistant {w}", None), ("C", None), ("AB", None), ("both", None), (f"{w}{w}", None)]
        trailers = [("", True), (".", True), (f". {w} is clearer and more accurate.", True),
                    ("，因为它更准确。", True), (f" or {other}", False), (f", then {other} on reflection", False),
                    (" (a tie)" if w != "tie" else f" ({other} is close)", False)]
        for form, said in forms:
            for trailer, clean in trailers:
                line = f"{rng.choice(labels)}{rng.choice(':：')} {form}{trailer}"
                reason = rng.choice(real)
                out.append(Said(f"line {line!r}", f"{reason}\n{line}" if rng.random() < 0.5 else f"{line}\n{reason}",
                                said if clean else None))
        out.append(Said(f"JSON winner {w} twice", f'{{"winner": "{w}", "winner": "{w}"}}', None))
        out.append(Said(f"JSON winners {w} and {other}", f'{{"winner": "{w}", "reason": "x", "winner": "{other}"}}', None))
        out.append(Said(f"JSON winner {w} or {other}", json.dumps({"winner": f"{w} or {other}"}), None))
    return out
