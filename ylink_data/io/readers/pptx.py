"""PowerPoint (.pptx) files through python-pptx: one Markdown document per file, one section per
slide (a slide is a page: `metadata.pages` is the slide count, `page_offsets` where each begins).

A slide's title placeholder becomes a `#` heading; other shapes follow in reading order (top to
bottom, then left to right), group shapes included: text frames as paragraphs, indented
paragraphs (level > 0) or bulleted ones as list items, tables as pipe tables. Speaker notes are
left out: they are the presenter's, not the audience's text.
"""
from __future__ import annotations

import io
import zipfile
from typing import Iterator

import pptx
from lxml import etree
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.exc import PackageNotFoundError

from .base import Bad, Record, Skip, Split
from .document import PPTX, UNREADABLE, document, number_lists, table

_TITLES = (PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE)
_BODIES = (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT)
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


def read_pptx(split: Split, data: bytes) -> Iterator[Record | Skip | Bad]:
    try:
        deck = pptx.Presentation(io.BytesIO(data))
        slides = list(deck.slides)
    except (zipfile.BadZipFile, PackageNotFoundError, KeyError, ValueError, etree.XMLSyntaxError) as exc:
        yield Bad(0, f"not a readable .pptx (corrupt, truncated or another format: {type(exc).__name__}: "
                     f"{' '.join(str(exc).split())[:150]})", UNREADABLE)
        return
    if not slides:
        yield Bad(0, "presentation with zero slides", UNREADABLE)
        return
    pages = [number_lists("\n\n".join(b for b in _blocks(slide.shapes) if b)) for slide in slides]
    if not any(p.strip() for p in pages):
        yield Skip(0, "empty")
        return
    title = (deck.core_properties.title or "").strip() or next(
        (b[2:] for p in pages for b in p.split("\n\n") if b.startswith("# ")), None)
    yield document(split, pages, PPTX, title)


def _blocks(shapes) -> Iterator[str]:
    for shape in sorted(shapes, key=lambda s: (s.top or 0, s.left or 0)):
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _blocks(shape.shapes)
        elif getattr(shape, "has_table", False) and shape.has_table:
            yield _table(shape.table)
        elif shape.has_text_frame:
            is_title = shape.is_placeholder and shape.placeholder_format.type in _TITLES
            if is_title:
                text = " ".join(shape.text_frame.text.split())
                yield "# " + text if text else ""
            else:
                body = shape.is_placeholder and shape.placeholder_format.type in _BODIES
                yield _text_frame(shape.text_frame, body)


def _table(t) -> str:
    """Pipe table; a merged cell's text is repeated in every cell it covers (as for Word)."""
    grid = [[cell.text for cell in row.cells] for row in t.rows]
    for r, row in enumerate(t.rows):
        for c, cell in enumerate(row.cells):
            if cell.is_merge_origin:
                for rr in range(r, min(r + cell.span_height, len(grid))):
                    for cc in range(c, min(c + cell.span_width, len(grid[rr]))):
                        grid[rr][cc] = cell.text
    return table(grid)


def _text_frame(frame, body: bool) -> str:
    """Paragraphs, and list items: those with a bullet or number of their own, or, in a body
    placeholder (whose layout bullets its paragraphs), those that do not switch it off."""
    lines: list[str] = []
    for para in frame.paragraphs:
        text = " ".join("".join(r.text for r in para.runs).split()) or " ".join(para.text.split())
        if not text:
            continue
        ppr = para._p.pPr
        own = ppr is not None and (ppr.find(f"{_A}buChar") is not None or ppr.find(f"{_A}buAutoNum") is not None)
        bulleted = own or (body and (ppr is None or ppr.find(f"{_A}buNone") is None))
        numbered = ppr is not None and ppr.find(f"{_A}buAutoNum") is not None
        if para.level > 0 or bulleted:
            lines.append("    " * max(para.level - (0 if bulleted else 1), 0) + ("1. " if numbered else "- ") + text)
        else:
            lines.append(("\n" if lines else "") + text)
    return "\n".join(lines).strip("\n")
