"""PDF text lines to Markdown (pdf.py reads the lines with PDFium): paragraphs from the vertical
gaps between lines, headings from font height (or bold short lines standing alone), bullet lines
as list items, words hyphenated at a line end joined, running headers and footers dropped."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import takewhile
from typing import Callable, Iterable

_BULLETS = "•◦▪▫●○■□‣⁃∙·-–*"
_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")
_HYPHENS = ("-", "\u00ad", "\x02")  # PDFium reports a soft hyphen at a line end as \x02
_HEADING_RATIO = 1.1  # a line at least this much taller than the body text is a heading
_MAX_HEADING_CHARS = 150
# The share of the page height, at its top and at its bottom, in which running heads and feet
# stand. The farthest from its edge measured is the LNCS running head of the bundled
# 2305.03393v1-pg9.pdf, whose bottom is 13% of the page below the top edge (redp5110_sampled.pdf's
# footers: within 5%; the running heads of two pdfTeX manuals outside the bundle, libtasn1's and
# shared-mime-info's: 7.6% and 7.4%). Body text starts inside the band too (Word's 1 inch margin is
# 9% of a Letter page), so the band alone does not make a line margin (`_margin_lines`).
_MARGIN_BAND = 0.15


@dataclass(slots=True)
class Line:
    text: str
    size: float  # font height (loose char box) of its first characters
    top: float
    bottom: float
    left: float
    bold: bool  # its first characters are in a bold font


class Page(list[Line]):
    """A page's lines in content order, with the page's vertical extent (`bottom`, `top`) in the
    lines' coordinates (PDF points, y up), or None where the page's top is not up in them (a page
    turned by 90 degrees)."""
    __slots__ = ("bottom", "top")

    def __init__(self, lines: Iterable[Line] = (), bottom: float | None = None, top: float | None = None):
        super().__init__(lines)
        self.bottom, self.top = bottom, top


def without_running_lines(pages: list[Page | None]) -> list[list[Line] | None]:
    """Pages without their running headers and footers: a line in a page's top or bottom margin
    (`_margin_lines`) that recurs (page numbers aside) in the margins of a quarter of the pages, and
    of 3 or more (books alternate left and right running heads, so half would miss them). They are
    furniture, not text, and would repeat in every chunk of the document. Repetition alone is not
    enough: a worksheet's "Exercise N" headings and instructions recur at the top of every page's
    body too. A page whose lines would all go keeps them: no text is furniture on a page that has
    nothing else."""
    body = body_size(pages)
    margins = [_margin_lines(lines, body) if lines else [] for lines in pages]
    counts = Counter(key for margin in margins for key in {_running_key(line) for line in margin})
    least = max(3, (len(pages) + 3) // 4)
    running = {key for key, n in counts.items() if n >= least and key}
    if not running:
        return pages
    out: list[list[Line] | None] = []
    for lines, margin in zip(pages, margins):
        drop = {id(line) for line in margin if _running_key(line) in running}
        kept = [line for line in lines or () if id(line) not in drop]
        out.append(kept if kept else lines)
    return out


def _margin_lines(page: Page, body: float) -> list[Line]:
    """The lines in the page's top and bottom margins: at each edge, the run of lines from the
    edge inwards (`_edge_run`) up to its first heading-size line (a heading is where the body
    starts; running heads are set at text size or smaller). Lines without a position (size 0) are
    never margin."""
    if page.top is None or page.bottom is None:
        return []
    band = _MARGIN_BAND * (page.top - page.bottom)
    placed = [line for line in page if line.size > 0]
    runs = (_edge_run(sorted(placed, key=lambda line: -line.top), lambda line: line.bottom >= page.top - band, True),
            _edge_run(sorted(placed, key=lambda line: line.bottom), lambda line: line.top <= page.bottom + band, False))
    return [line for run in runs for line in takewhile(lambda line: not _is_heading_size(line, body), run)]


def _edge_run(lines: list[Line], in_band: Callable[[Line], bool], top_down: bool) -> list[Line]:
    """Of `lines`, ordered from a page edge inwards, those set close together from the edge: up to
    the first paragraph gap (`_paragraph_gap`) between the run so far and the next line. A
    running head stands apart from the body; a run that leaves the band before such a gap is body
    text starting at the edge, not margin, and gives none."""
    run: list[Line] = []
    inner: Line | None = None  # the run's line farthest from the edge
    for line in lines:
        if inner is not None and (_paragraph_gap(inner, line) if top_down else _paragraph_gap(line, inner)):
            break
        if not in_band(line):
            return []
        run.append(line)
        if inner is None or (line.bottom < inner.bottom if top_down else line.top > inner.top):
            inner = line
    return run


def _running_key(line: Line) -> str:
    key = re.sub(r"[\d\s]+", " ", line.text).strip().lower()
    return re.sub(r"^[ivxlc]+\b|\b[ivxlc]+$", "", key).strip()  # roman page numbers too


def body_size(pages: list[list[Line] | None]) -> float:
    """The font height most of the text is set in (by characters)."""
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line in lines or ():
            sizes[round(line.size, 1)] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def heading_levels(pages: list[list[Line] | None], body: float) -> dict[float, int]:
    """Heading sizes, largest first, as levels 1..3 (smaller ones share level 3)."""
    if body <= 0:
        return {}
    sizes = {round(line.size, 1) for lines in pages for line in lines or ()
             if _is_heading_size(line, body)}
    return {size: min(rank + 1, 3) for rank, size in enumerate(sorted(sizes, reverse=True))}


def _bold_heading(lines: list[Line], i: int) -> bool:
    """A short bold line that stands alone (a paragraph gap or plain text follows): a heading set
    at body size, as many documents do."""
    line = lines[i]
    if not line.bold or len(line.text) > 100 or line.text.endswith((".", ",", ";")) or line.text[:1] in _BULLETS:
        return False
    if not any(c.isalpha() for c in line.text):
        return False
    nxt = lines[i + 1] if i + 1 < len(lines) else None
    return nxt is None or not nxt.bold or _paragraph_gap(line, nxt)


def _is_heading_size(line: Line, body: float) -> bool:
    return (line.size >= body * _HEADING_RATIO and len(line.text) <= _MAX_HEADING_CHARS
            and any(c.isalpha() for c in line.text))


def page_markdown(lines: list[Line], body: float, levels: dict[float, int]) -> str:
    blocks: list[str] = []
    prev: Line | None = None
    prev_heading = False
    bold_level = min(max(levels.values(), default=1) + 1, 4)
    for i, line in enumerate(lines):
        level = levels.get(round(line.size, 1)) if body > 0 and _is_heading_size(line, body) else None
        if level is None and _bold_heading(lines, i):
            level = bold_level
        bullet = len(line.text) > 1 and line.text[0] in _BULLETS and line.text[1] == " "
        new_block = (prev is None or level is not None or prev_heading or bullet
                     or _paragraph_gap(prev, line))
        if level is not None and prev_heading and prev is not None and round(prev.size, 1) == round(line.size, 1) \
                and not _paragraph_gap(prev, line):
            blocks[-1] = join_lines(blocks[-1], line.text)  # a heading set on two lines
        elif new_block:
            if level is not None:
                blocks.append("#" * level + " " + line.text)
            elif bullet:
                blocks.append("- " + line.text[2:].strip())
            else:
                blocks.append(line.text)
        else:
            blocks[-1] = join_lines(blocks[-1], line.text)
        prev, prev_heading = line, level is not None
    out = blocks[:1]
    for block in blocks[1:]:  # list items one per line, not as loose paragraphs
        out.append(("\n" if block.startswith("- ") and out[-1].startswith("- ") else "\n\n") + block)
    return "".join(out)


def _paragraph_gap(prev: Line, line: Line) -> bool:
    """A new paragraph: a vertical gap of half a line or more, or a jump up (the next column)."""
    if prev.size <= 0 or line.size <= 0:
        return False
    gap = prev.bottom - line.top
    return gap > 0.5 * max(prev.size, line.size) or line.top > prev.top + 0.5 * line.size


def join_lines(text: str, line: str) -> str:
    """Append a line to a paragraph: a word broken by a hyphen at the line end is joined again,
    Chinese/Japanese lines are joined without a space."""
    if text.endswith(_HYPHENS) and len(text) > 1 and text[-2].isalpha() and line[:1].islower():
        return text[:-1] + line
    if text.endswith(("\u00ad", "\x02")):
        return text[:-1] + line
    if _CJK.match(text[-1:]) and _CJK.match(line[:1]):
        return text + line
    return text + " " + line
