"""Word (.docx) files through python-docx: one Markdown document per file.

The body is walked in document order (paragraphs, tables, and the paragraphs and tables inside
content controls). Headings come from paragraph styles (`Title`, `Heading N`), list items from
numbering or list styles (indented by level, with Word's own labels: wordlists.py), tables become pipe tables
(a merged cell's text repeated in each column it spans, as python-docx reports it). A paragraph's
text is every text run in it, including text boxes and hyperlinks, which python-docx's
`Paragraph.text` leaves out. Equations (OMML) are LaTeX (omml.py), as docling writes them: `$...$`
within a paragraph's text, `$$...$$` as their own blocks where a paragraph holds nothing but
equations. Word has no stored page breaks, so there are no pages.
"""
from __future__ import annotations

import io
import re
import zipfile
from typing import Iterator

import docx
from docx.oxml.ns import qn
from docx.table import Table
from lxml import etree

from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.document import DOCX, Parts, document, first_heading, table, too_large
from ylink_data.io.readers.omml import omml_to_latex
from ylink_data.io.readers.wordlists import WordLists

_STRICT = re.compile(rb"http://purl\.oclc\.org/ooxml/(\w+)/(\w+)")
_M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
# An equation's place in a paragraph's text until display or inline is known: NUL, which XML text cannot hold.
_OMATH, _EQ = _M + "oMath", "\x00"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_HEADING = re.compile(r"^(?:heading|überschrift|titre|título|标题)\s*(\d)$", re.I)
_P, _TBL, _SDT, _DOCUMENT = qn("w:p"), qn("w:tbl"), qn("w:sdt"), qn("w:document")
_MAX_LEVEL = 8  # list levels 0-8, as Word has them: an ilvl of 10**9 would indent by 4 GB of spaces
# python-docx gives a row one cell per column a cell spans, so a `w:gridSpan` of 10**9 in a 1 KB
# file would build a billion cells. Word makes at most 63 columns; other writers more, not thousands.
_MAX_COLUMNS = 1000
_TEXTS, _BREAKS, _TAB, _TXBX = {qn("w:t"), _M + "t"}, {qn("w:br"), qn("w:cr")}, qn("w:tab"), qn("w:txbxContent")


def read_docx(split: Split, data: bytes, max_unpacked_bytes: int) -> Iterator[Record | Skip | Bad]:
    """What python-docx raises on the file as a whole is left to the caller (isolated.py: the file is
    quarantined); a paragraph or table it fails on is skipped and counted (`Parts`)."""
    big = too_large(data, max_unpacked_bytes)
    if big:
        yield big
        return
    doc = docx.Document(io.BytesIO(_transitional(data)))
    if doc.element.tag != _DOCUMENT:
        raise ValueError(f"word/document.xml holds <{etree.QName(doc.element).localname}>, not a Word document")
    parts = Parts()
    numbered = WordLists()
    with parts.part("docx_numbering"):  # without it, numbered paragraphs are bullets
        numbered = WordLists.of(doc)
    blocks = _blocks(doc, doc.element.body, numbered, parts)
    markdown = "\n\n".join(b for b in blocks if b)
    markdown = re.sub(r"(?m)^([ \t]*(?:- |\d+\. ).*)\n\n(?=\s*(?:- |\d+\. ))", r"\1\n", markdown)
    if not markdown.strip():
        yield parts.nothing_read()
        return
    title = ""
    with parts.part("docx_properties"):
        title = (doc.core_properties.title or "").strip()
    yield document(split, [markdown], DOCX, title or first_heading(markdown), paged=False, parts=parts)


def _transitional(data: bytes) -> bytes:
    """A Strict OOXML file (ISO 29500 Strict, purl.oclc.org namespaces) rewritten with the
    Transitional namespaces python-docx knows; the two differ in these names, not in structure,
    for everything read here. Other files are returned as they are."""
    if b"purl.oclc.org/ooxml" not in data and not _zip_mentions(data, b"purl.oclc.org/ooxml"):
        return data
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            part = src.read(info)
            if info.filename.endswith((".xml", ".rels")):
                part = _STRICT.sub(rb"http://schemas.openxmlformats.org/\1/2006/\2", part)
            dst.writestr(info, part)
    return out.getvalue()


def _zip_mentions(data: bytes, needle: bytes) -> bool:
    """Whether the package's relationships (compressed, so not visible in `data`) name `needle`."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return needle in z.read("_rels/.rels")
    except (zipfile.BadZipFile, KeyError, OSError, EOFError):
        return False


def _blocks(doc, parent, numbered: WordLists, parts: Parts) -> list[str]:
    out: list[str] = []
    for child in parent.iterchildren():
        if child.tag == _P:
            with parts.part("docx_paragraph"):
                boxes: list = []
                out.append(_paragraph(doc, child, numbered, boxes))
                for box in boxes:  # text boxes anchored in the paragraph, as their own blocks after it
                    out += _blocks(doc, box, numbered, parts)
        elif child.tag == _TBL:
            with parts.part("docx_table"):
                out.append(_table(Table(child, doc)))
        elif child.tag == _SDT:
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                out += _blocks(doc, content, numbered, parts)
    return out


def _text(el, boxes: list | None = None, maths: list | None = None) -> str:
    """The text of a paragraph's runs. Text boxes go to `boxes` (or are skipped), and the VML
    fallback copy Word keeps of each drawing (mc:Fallback) is left out: it repeats the text.
    Equations go to `maths` as LaTeX, leaving `_EQ` in the text (without `maths`, `$...$` inline)."""
    out = []
    for child in el.iterchildren():
        tag = child.tag
        if tag == _OMATH:
            try:
                latex = omml_to_latex(child)
            except ValueError:  # beyond the converter: the equation's text as Word shows it
                out.append(_text(child))
                continue
            if not latex:
                continue
            if maths is None:
                out.append(f"${latex}$")
            else:
                maths.append(latex)
                out.append(_EQ)
        elif tag in _TEXTS:
            out.append(child.text or "")
        elif tag == _TAB:
            out.append("\t")
        elif tag in _BREAKS:
            out.append("\n")
        elif tag == _TXBX:
            if boxes is not None:
                boxes.append(child)
        elif tag != _FALLBACK and isinstance(tag, str):
            out.append(_text(child, boxes, maths))
    return "".join(out)


def _paragraph(doc, p, numbered: WordLists, boxes: list) -> str:
    maths: list[str] = []
    text = " ".join(_text(p, boxes, maths).split())
    if not text:
        return ""
    # Equations alone in a paragraph are display equations unless it is a heading or list item.
    display = "\n\n".join(f"$${m}$$" for m in maths) if maths and not text.replace(_EQ, "").strip() else ""
    if maths:
        pieces = text.split(_EQ)
        text = pieces[0] + "".join(f"${m}${rest}" for m, rest in zip(maths, pieces[1:]))
    style = _style_name(doc, p)
    if style == "title":
        return "# " + text
    m = _HEADING.match(style)
    if m:
        return "#" * min(int(m.group(1)) + 1, 6) + " " + text
    num = p.find(f"{qn('w:pPr')}/{qn('w:numPr')}")
    if num is not None or style.startswith("list"):
        level = min(max(_attr_int(num, "w:ilvl"), 0), _MAX_LEVEL) if num is not None else 0
        num_id = str(_attr_int(num, "w:numId")) if num is not None else ""
        label = numbered.label(num_id, level) if num is not None else ("1." if "number" in style else None)
        if label is None:
            return "    " * level + "- " + text
        # "3." or "3" is a Markdown list item; other labels ("1.2.", "b)") stay as text of a bullet.
        plain = re.fullmatch(r"(\d+)\.?", label)
        return "    " * level + (f"{plain.group(1)}. " if plain else f"- {label} ") + text
    return display or text


def _style_name(doc, p) -> str:
    style = p.find(f"{qn('w:pPr')}/{qn('w:pStyle')}")
    if style is None:
        return ""
    style_id = style.get(qn("w:val"))
    try:
        found = doc.styles.element.get_by_id(style_id)
        name = found.name_val if found is not None else style_id
    except (KeyError, AttributeError):
        name = style_id
    return (name or "").lower()


def _attr_int(el, child: str) -> int:
    node = el.find(qn(child)) if el is not None else None
    try:
        return int(node.get(qn("w:val"))) if node is not None else 0
    except (TypeError, ValueError):
        return 0


def _table(t: Table) -> str:
    for tr in t._tbl.tr_lst:
        width = sum(tc.grid_span for tc in tr.tc_lst)
        if width > _MAX_COLUMNS:
            raise ValueError(f"a table row spans {width:,} columns (Word allows 63)")
    texts: dict = {}  # a cell spanning columns comes once per column: its text is read once
    rows = []
    for row in t.rows:
        cells = []
        for cell in row.cells:
            if cell._tc not in texts:
                texts[cell._tc] = " ".join(_text(p) for p in cell._tc.iter(_P))
            cells.append(texts[cell._tc])
        rows.append(cells)
    return table(rows)
