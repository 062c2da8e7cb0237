"""Question–answer pairs that documents already hold, found without a model.

- `structured_pairs(html, url)`: schema.org `Question`s with an `acceptedAnswer` (else their
  `suggestedAnswer`s) in a page's JSON-LD (`@graph` nodes included) and microdata, through extruct;
  `FAQPage` and `QAPage` hold them as `mainEntity`. Answers may hold HTML: tags are stripped.
- `text_pairs(text)`: in plain text or Markdown,
  - "heading": a Markdown heading or a bold line (`**...**`, `__...__`) that ends in `?` or `？`,
    answered by the text after it up to the next such question or the next heading;
  - "pattern": `Q:` / `A:` (also `Question:` / `Answer:`, `问：` / `答：`, `问:` / `答:`, full-width
    colons, `Q1:`, bold markers), the answer running up to the next question marker or heading.
Every answer and question is cleaned: tags stripped, entities decoded, whitespace collapsed.
"""
from __future__ import annotations

import html as html_lib
import re
from dataclasses import dataclass
from typing import Any, Iterator

JSONLD, MICRODATA, HEADING, PATTERN = "jsonld", "microdata", "heading", "pattern"


@dataclass(frozen=True)
class Pair:
    question: str
    answer: str
    context: str  # the FAQ block it came from: its text span, or for markup the page's pairs as text
    method: str  # jsonld | microdata | heading | pattern


# ----------------------------------------------------------------------------- cleaning

_BLOCK_TAG = re.compile(r"<\s*(?:/\s*)?(?:p|div|br|li|ul|ol|h[1-6]|tr|td|th|table|blockquote|section|hr)\b[^<>]*>", re.I)
_TAG = re.compile(r"<[^<>]*>")  # ends at the next "<" too: linear on "<<<<..." (issue 39)
_SPACES = re.compile(r"\s+")


def clean(value: Any) -> str:
    """Text of a markup value: block tags become spaces, other tags go, entities are decoded (and
    tags that were escaped go too) and whitespace collapsed ("<a>Hier</a>." -> "Hier.")."""
    if isinstance(value, list):
        value = " ".join(clean(v) for v in value)
    if not isinstance(value, str):
        return ""
    text = value
    for _ in range(2):  # markup escaped once more inside JSON-LD ("&lt;strong&gt;") is markup too
        text = html_lib.unescape(_TAG.sub("", _BLOCK_TAG.sub(" ", text)))
    return _SPACES.sub(" ", text).strip()


# ----------------------------------------------------------------------------- markup


def _types(node: dict, key: str) -> list[str]:
    value = node.get(key) or []
    return [str(t).rsplit("/", 1)[-1] for t in (value if isinstance(value, list) else [value])]


def _answers(value: Any, props: str | None) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            node = item.get(props, item) if props else item
            out.append(clean(node.get("text") if isinstance(node, dict) else None))
        else:
            out.append(clean(item))
    return [a for a in out if a]


def _questions(node: Any, props: str | None, type_key: str) -> Iterator[tuple[str, str]]:
    """(question, answer) of every Question node under `node` (JSON-LD: props None, type "@type";
    microdata: properties under "properties", type "type")."""
    if isinstance(node, list):
        for item in node:
            yield from _questions(item, props, type_key)
        return
    if not isinstance(node, dict):
        return
    fields = node.get(props, {}) if props else node
    if "Question" in _types(node, type_key) and isinstance(fields, dict):
        question = clean(fields.get("name")) or clean(fields.get("text"))
        answers = _answers(fields.get("acceptedAnswer"), props) or _answers(fields.get("suggestedAnswer"), props)
        for answer in answers:
            if question:
                yield question, answer
        return
    for value in (fields.values() if isinstance(fields, dict) else []):
        yield from _questions(value, props, type_key)


def structured_pairs(page: str, url: str | None = None) -> list[Pair]:
    """Pairs of the page's schema.org markup, JSON-LD first, each pair once."""
    import extruct

    data = extruct.extract(page, base_url=url, syntaxes=["json-ld", "microdata"], uniform=False, errors="ignore")
    found: list[tuple[str, str, str]] = []
    for method, items, props, type_key in ((JSONLD, data.get("json-ld", []), None, "@type"),
                                           (MICRODATA, data.get("microdata", []), "properties", "type")):
        found += [(q, a, method) for q, a in _questions(items, props, type_key)]
    pairs, seen = [], set()
    for q, a, method in found:
        if (q, a) not in seen:
            seen.add((q, a))
            pairs.append((q, a, method))
    context = "\n\n".join(f"{q}\n{a}" for q, a, _ in pairs)
    return [Pair(q, a, context, method) for q, a, method in pairs]


# ----------------------------------------------------------------------------- text

_MD_HEADING = re.compile(r"^#{1,6}[ \t]+((?:.*[^ \t#\n])?)[ \t#]*$")  # not lazy before [ \t#]*: linear
_BOLD_LINE = re.compile(r"^(?:\*\*|__)(.+?)(?:\*\*|__)[ \t]*$")
_QUESTION_END = ("?", "？")
# A marker starts a line or follows a space or a sentence's end ("？答：" in an interview printed as one
# paragraph), never a word: "回答：" and "FAQ:" are no markers.
# "Question 3 :" takes its spaces once: `\s*` and `[ \t]*` never split one run (linear).
_AFTER = r"(?:^|(?<=[\s。！？；…!?.”\"』」）)*]))"
_Q_MARK = re.compile(_AFTER + r"(?:\*\*|__)?(?:Q\d*[ \t]*|Question\s*(?:\d+[ \t]*)?|[问問][ \t]*)[:：](?:\*\*|__)?[ \t]*", re.M)
_A_MARK = re.compile(_AFTER + r"(?:\*\*|__)?(?:A\d*[ \t]*|Answer\s*(?:\d+[ \t]*)?|答[ \t]*)[:：](?:\*\*|__)?[ \t]*", re.M)
_HEADING_START = re.compile(r"^#{1,6}[ \t]", re.M)


def _heading_question(line: str) -> str | None:
    """The question of a heading or bold line ending in ? or ？, else None."""
    line = line.strip()
    m = _MD_HEADING.match(line) or _BOLD_LINE.match(line)
    if not m:
        return None
    text = clean(m.group(1).strip("*_ "))
    return text if text.endswith(_QUESTION_END) else None


def _blocks(pairs: list[tuple[int, int, str, str]], text: str, method: str) -> list[Pair]:
    """Pairs (start, end, question, answer) grouped into runs of adjacent pairs (an FAQ block, with
    no other text between them): each pair's context is its block's text."""
    out: list[Pair] = []
    run: list[tuple[int, int, str, str]] = []

    def flush():
        if run:
            context = text[run[0][0]:run[-1][1]].strip()
            out.extend(Pair(q, a, context, method) for _, _, q, a in run)
            run.clear()

    for p in pairs:
        if run and text[run[-1][1]:p[0]].strip():
            flush()
        run.append(p)
    flush()
    return out


def _pattern_pairs(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, question, answer) of each question marker answered by an answer marker before
    the next question; the answer ends at the next question marker or Markdown heading."""
    questions = [(m.start(), m.end()) for m in _Q_MARK.finditer(text)]
    found = []
    for k, (q_start, q_end) in enumerate(questions):
        limit = questions[k + 1][0] if k + 1 < len(questions) else len(text)
        a = _A_MARK.search(text, q_end, limit)
        if a is None:
            continue
        heading = _HEADING_START.search(text, a.end(), limit)
        end = heading.start() if heading else limit
        question, answer = clean(text[q_end:a.start()]), clean(text[a.end():end])
        if question and answer:
            found.append((q_start, end, question, answer))
    return found


def _heading_pairs(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, question, answer) of each heading or bold line ending in ? or ？ and the text
    under it, up to the next such question or heading."""
    lines = text.splitlines(keepends=True)
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    found, i = [], 0
    while i < len(lines):
        question = _heading_question(lines[i])
        if question is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and _heading_question(lines[j]) is None and not _MD_HEADING.match(lines[j].strip()):
            j += 1
        answer = clean("".join(lines[i + 1:j]))
        if answer:
            found.append((starts[i], starts[j], question, answer))
        i = j
    return found


def text_pairs(text: str) -> list[Pair]:
    """Pattern and heading pairs of a plain-text or Markdown document, in document order; a heading
    question inside a pattern pair's span (a "**Q: ...?**" line) is the pattern pair's."""
    patterns = _pattern_pairs(text)
    headings = [p for p in _heading_pairs(text) if not any(s <= p[0] < e for s, e, _, _ in patterns)]
    pairs = [(p[0], pair) for p, pair in zip(patterns, _blocks(patterns, text, PATTERN))]
    pairs += [(p[0], pair) for p, pair in zip(headings, _blocks(headings, text, HEADING))]
    return [pair for _, pair in sorted(pairs, key=lambda x: x[0])]
