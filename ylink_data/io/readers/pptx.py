"""PowerPoint (.pptx) files through python-pptx: one Markdown document per file, one section per
slide (a slide is a page: `metadata.pages` is the slide count, `page_offsets` where each begins).

A slide's title placeholder becomes a `#` heading; other shapes follow in reading order (top to
bottom, then left to right), group shapes and the shapes of `mc:AlternateContent` included: text
frames as paragraphs, indented paragraphs (level > 0) or bulleted ones as list items, tables as pipe
tables. Speaker notes are left out: they are the presenter's, not the audience's text. A shape or
slide the reader fails on is left out and counted (document.Parts); the rest of the deck is kept.
"""
from __future__ import annotations

import io
from typing import Iterator

import pptx
from lxml import etree
from pptx.enum.shapes import PP_PLACEHOLDER
from pptx.oxml.ns import qn
from pptx.shapes.group import GroupShape
from pptx.shapes.shapetree import SlideShapeFactory

from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.document import PPTX, UNREADABLE, Parts, document, number_lists, table, too_large

_TITLES = (PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE)
_BODIES = (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT)
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_ALTERNATE, _CHOICE, _FALLBACK = _MC + "AlternateContent", _MC + "Choice", _MC + "Fallback"
_SHAPES = frozenset(qn(t) for t in ("p:sp", "p:grpSp", "p:graphicFrame", "p:cxnSp", "p:pic"))
_TREE_PROPERTIES = frozenset(qn(t) for t in ("p:nvGrpSpPr", "p:grpSpPr", "p:extLst"))  # a tree's own, not shapes


def read_pptx(split: Split, data: bytes, max_unpacked_bytes: int) -> Iterator[Record | Skip | Bad]:
    """What python-pptx raises on the file as a whole is left to the caller (isolated.py: the file is
    quarantined); a slide or shape it fails on is skipped and counted (`Parts`)."""
    big = too_large(data, max_unpacked_bytes)
    if big:
        yield big
        return
    deck = pptx.Presentation(io.BytesIO(data))
    # The slides one by one, not `deck.slides`, which loads (and renames) all of them at once: a slide
    # whose part is missing or another kind of part costs that slide only.
    listed = deck.element.sldIdLst
    slide_ids = [s.rId for s in listed.sldId_lst] if listed is not None else []
    if not slide_ids:
        yield Bad(0, "presentation with zero slides", UNREADABLE)
        return
    parts = Parts()
    pages = []
    for rid in slide_ids:
        page = ""  # a slide that fails whole is still a page: page_offsets stay one per slide
        with parts.part("pptx_slide"):
            shapes = deck.part.related_slide(rid).shapes
            page = number_lists("\n\n".join(b for b in _blocks(shapes, parts) if b))
        pages.append(page)
    if not any(p.strip() for p in pages):
        yield parts.nothing_read()
        return
    title = ""
    with parts.part("pptx_properties"):
        title = (deck.core_properties.title or "").strip()
    title = title or next((b[2:] for p in pages for b in p.split("\n\n") if b.startswith("# ")), None)
    yield document(split, pages, PPTX, title, parts=parts)


def _blocks(shapes, parts: Parts) -> list[str]:
    """The blocks of a shape tree's shapes in reading order (top to bottom, then left to right)."""
    placed = []
    for el in _shape_elements(shapes.element, parts):
        with parts.part("pptx_shape"):
            shape = SlideShapeFactory(el, shapes)
            placed.append(((shape.top or 0, shape.left or 0), _shape_blocks(shape, parts)))
    placed.sort(key=lambda p: p[0])
    return [block for _, blocks in placed for block in blocks]


def _shape_elements(tree, parts: Parts) -> Iterator:
    """The shape elements of a tree in document order, with those inside `mc:AlternateContent` (the
    version PowerPoint shows, mc:Choice, else mc:Fallback), which python-pptx leaves out. Elements
    it has no class for (p:contentPart, ink; anything unknown) are skipped and counted."""
    for el in tree.iterchildren():
        if el.tag == _ALTERNATE:
            versions = [v for v in el.iterchildren(_CHOICE, _FALLBACK) if len(v)]
            yield from _shape_elements(versions[0], parts) if versions else ()
        elif el.tag in _SHAPES:
            yield el
        elif el.tag not in _TREE_PROPERTIES and isinstance(el.tag, str):
            parts.skip("pptx_shape", f"no reader for <{etree.QName(el).localname}>")


def _shape_blocks(shape, parts: Parts) -> list[str]:
    if isinstance(shape, GroupShape):
        return _blocks(shape.shapes, parts)
    if getattr(shape, "has_table", False) and shape.has_table:
        return [_table(shape.table)]
    if not shape.has_text_frame:
        return []
    if shape.is_placeholder and shape.placeholder_format.type in _TITLES:
        text = " ".join(shape.text_frame.text.split())
        return ["# " + text if text else ""]
    body = shape.is_placeholder and shape.placeholder_format.type in _BODIES
    return [_text_frame(shape.text_frame, body)]


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
