"""Splitting a document's text into chunks of a target size, at the strongest boundary that fits.

The text is cut into pieces that are never split further: sentences (English `.!?…` followed by
space, Chinese `。！？；`, each with the closing quotes and brackets after it), lines, and, only
when one sentence alone is larger than the size, parts of it cut at a space (or between characters
for text written without spaces). Each piece remembers the boundary before it: a Markdown heading,
a paragraph (blank line), a sentence or line, or a forced cut inside a sentence.

Pieces are then packed greedily: a heading always starts a new chunk (so each chunk has one
heading path); when the next piece does not fit, the chunk ends at its last paragraph boundary if
that keeps it at least half full, else at the sentence. Overlap repeats the previous chunk's last
sentences, as many as fit in `overlap`, starting at a sentence boundary.

Chunks are spans of the text: the chunks with their overlap removed, joined, are the text again.
Sizes are counted by `measure` (characters, or a tokenizer's tokens) per piece and added up: for
a byte-level BPE, whose pre-tokenizer splits at spaces and punctuation, the sum is an upper bound of
the chunk's own count, so a chunk never exceeds the size.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

HEADING, PARAGRAPH, SENTENCE, CUT = 3, 2, 1, 0  # the boundary before a piece, strongest first

# A heading line; its closing "  ##  " is stripped by `_title` (a lazy title before `[ \t]*#*[ \t]*$`
# is cubic in a long run of spaces).
_HEADING_LINE = re.compile(r"^(#{1,6})[ \t]+(.*)$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n\s*")
_CLOSERS = "\"'”’」』》）)\\]"
# After a sentence end: English needs the space that follows (3.5, e.g.x stay whole); Chinese does not.
# From a run of marks' start only (what fails there fails inside it): linear on "....." (issue 39).
_SENTENCE_END = re.compile(rf"(?<![.!?…])[.!?…]+[{_CLOSERS}]*[ \t\n]+|(?<![。！？；])[。！？；]+[{_CLOSERS}]*[ \t]*\n?|\n")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Chunk:
    start: int  # offset in the text where the chunk begins, overlap included
    body_start: int  # where its own text begins: [start, body_start) repeats the previous chunk
    end: int
    heading_path: tuple[str, ...]
    index: int


@dataclass(frozen=True)
class _Piece:
    start: int
    end: int
    boundary: int  # HEADING | PARAGRAPH | SENTENCE | CUT: what ends before this piece
    size: int


def sections(text: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """(start, end, heading path) of each Markdown section: a heading line up to the next heading,
    and the text before the first heading (path ()). Headings inside fenced code are text. A heading
    with nothing under it before the next heading (a title) starts the next section's span, which
    keeps the next heading's path."""
    starts: list[tuple[int, tuple[str, ...]]] = [(0, ())]
    stack: list[tuple[int, str]] = []
    fenced = False
    offset = 0
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            m = _HEADING_LINE.match(line.rstrip("\r\n"))
            title = m.group(2).rstrip(" \t").rstrip("#").rstrip(" \t") if m else ""
            if title:
                level = len(m.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, title))
                starts.append((offset, tuple(title for _, title in stack)))
        offset += len(line)
    if len(starts) > 1 and starts[1][0] == 0:  # the text begins with a heading
        starts.pop(0)
    bounds = [s for s, _ in starts[1:]] + [len(text)]
    out: list[tuple[int, int, tuple[str, ...]]] = []
    pending = None  # a heading with no text of its own goes with the section after it
    for (s, path), e in zip(starts, bounds):
        if e <= s:
            continue
        body = text[s:e].split("\n", 1)[1] if path and "\n" in text[s:e] else ("" if path else text[s:e])
        start = pending if pending is not None else s
        if path and not body.strip() and e < len(text):
            pending = start
            continue
        pending = None
        out.append((start, e, path))
    return out


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans, pos = [], start
    for m in _SENTENCE_END.finditer(text, start, end):
        if m.end() > pos:
            spans.append((pos, m.end()))
            pos = m.end()
    if pos < end:
        spans.append((pos, end))
    return spans


def _cut(text: str, start: int, end: int, size: int, measure: Callable[[str], int]) -> list[tuple[int, int]]:
    """A sentence larger than `size` cut into parts that fit: each as long as fits (binary search on
    its measure), ending after the last space in it when there is one."""
    parts = []
    while start < end:
        if measure(text[start:end]) <= size:
            parts.append((start, end))
            break
        lo, hi = start + 1, end  # the longest prefix that fits is text[start:lo]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if measure(text[start:mid]) <= size:
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        spaces = [m.end() for m in _SPACE.finditer(text, start, lo)]
        if spaces and spaces[-1] > start:
            cut = spaces[-1]
        parts.append((start, cut))
        start = cut
    return parts


def pieces(text: str, start: int, end: int, size: int, measure: Callable[[str], int]) -> list[_Piece]:
    """The section [start, end) as pieces that each fit in `size`, with the boundary before each."""
    out: list[_Piece] = []
    paragraphs, pos = [], start
    for m in _PARAGRAPH_END.finditer(text, start, end):
        paragraphs.append((pos, m.end()))
        pos = m.end()
    if pos < end:
        paragraphs.append((pos, end))
    for p, (ps, pe) in enumerate(paragraphs):
        for s, (ss, se) in enumerate(_sentences(text, ps, pe)):
            boundary = (HEADING if p == 0 else PARAGRAPH) if s == 0 else SENTENCE
            n = measure(text[ss:se])
            if n <= size:
                out.append(_Piece(ss, se, boundary, n))
                continue
            for c, (cs, ce) in enumerate(_cut(text, ss, se, size, measure)):
                out.append(_Piece(cs, ce, boundary if c == 0 else CUT, measure(text[cs:ce])))
    return out


def _overlap(chunk: list[_Piece], budget: int, room: int) -> list[_Piece]:
    """The chunk's last pieces to repeat: as many as fit in `budget` and in `room` (what the next
    piece leaves), starting at a sentence boundary (never inside a sentence)."""
    taken: list[_Piece] = []
    total = 0
    for piece in reversed(chunk[1:]):  # never the whole chunk: the next one must move on
        if total + piece.size > min(budget, room):
            break
        taken.insert(0, piece)
        total += piece.size
    while taken and taken[0].boundary == CUT:
        taken.pop(0)
    return taken


def chunk_text(text: str, size: int, overlap: int = 0, measure: Callable[[str], int] = len) -> list[Chunk]:
    """The chunks of `text` (see the module docstring); [] for a text of only whitespace."""
    if overlap >= size:
        raise ValueError(f"overlap ({overlap}) must be smaller than size ({size})")
    chunks: list[Chunk] = []
    for s_start, s_end, path in sections(text):
        if not text[s_start:s_end].strip():
            continue
        todo = pieces(text, s_start, s_end, size, measure)
        carried: list[_Piece] = []  # overlap from the previous chunk of this section
        i = 0
        while i < len(todo):
            chunk = list(carried)
            total = sum(p.size for p in carried)
            own = i
            while i < len(todo) and total + todo[i].size <= size:
                total += todo[i].size
                chunk.append(todo[i])
                i += 1
            if i < len(todo):  # full: end at the last paragraph boundary if it keeps half the size
                fill = sum(p.size for p in carried)
                best = None
                for j in range(own, i):
                    if j > own and todo[j].boundary >= PARAGRAPH and fill >= size / 2:
                        best = j
                    fill += todo[j].size
                if best is not None:
                    chunk = chunk[:len(carried) + best - own]
                    i = best
            chunks.append(Chunk(chunk[0].start, todo[own].start, chunk[-1].end, path, len(chunks)))
            more = i < len(todo)
            carried = _overlap(chunk, overlap, size - todo[i].size) if overlap and more else []
    return chunks
