"""PDF files through pypdfium2 (PDFium, Apache-2.0/BSD): one Markdown document per file.

PDFium gives each page's text in content order with its own line breaks; here each line gets its
position, font height and weight, and pdflayout.py rebuilds paragraphs, headings and list items
from them, joins words broken by a hyphen at a line end and drops running headers. Tables come out as their cell text, row by row (no pipe tables: that
needs a layout model). Measured against pdfplumber on the bundled PDFs (bench/RESULTS.md): higher
word F1 on every file and ~30x the pages/s.

A page that has images but no text, or whose text is mostly characters with no Unicode meaning
(private-use code points, U+FFFD, control characters: fonts without a ToUnicode map), needs OCR. The
whole file is then quarantined with reason `needs_ocr`, naming the pages, unless `input.ocr` is on:
then those pages (only) are read by Tesseract (ocr.py). Whole-file, because one input file is one
record in the run's books: a document missing pages would be a silent loss.
"""
from __future__ import annotations

import ctypes
import re
import subprocess
from typing import Iterator

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ylink_data.io.readers.base import TOO_LARGE, Bad, Record, Skip, Split
from ylink_data.io.readers.pdf_filters import DecodeError, Unbounded, decoded_size
from ylink_data.io.readers.document import ENCRYPTED, NEEDS_OCR, PDF, UNREADABLE, Parts, document, first_heading
from ylink_data.io.readers.pdflayout import Line, Page, body_size, heading_levels, page_markdown, without_running_lines

_GARBAGE = re.compile(r"[\ue000-\uf8ff\ufffd\x00\x01\x03-\x08\x0b\x0e-\x1f]")  # not \x02: a soft hyphen
_ARABIC = re.compile(r"[\u0600-\u06ff]")
_ALEF_LAM = re.compile(r"[\u0622\u0623\u0625\u0627]\u0644")
_MIXED = re.compile(r"(?<=[A-Za-z])(?=[\u0600-\u06ff])|(?<=[\u0600-\u06ff])(?=[A-Za-z])")
_GARBAGE_SHARE = 0.3


def read_pdf(split: Split, data: bytes, ocr: bool, ocr_languages: str,
             max_unpacked_bytes: int) -> Iterator[Record | Skip | Bad]:
    if not data:
        yield Bad(0, "empty file (0 bytes), not a PDF; remove it or replace it with the complete file", UNREADABLE)
        return
    if not data.startswith(b"%PDF-") and b"%PDF-" not in data[:1024]:
        yield Bad(0, "not a PDF (no %PDF- header); the file is corrupt or misnamed", UNREADABLE)
        return
    if b"%%EOF" not in data[-2048:]:
        # PDFium rebuilds a cut-short file from what is left and would return part of it as if whole.
        yield Bad(0, "truncated PDF (no %%EOF at the end); copy the complete file again", UNREADABLE)
        return
    big = _stream_too_large(data, max_unpacked_bytes)
    if big is not None:
        yield big
        return
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        # A zero-page file fails to load without an error code of its own, so PDFium's message may
        # be left over from the file before: the page tree is checked first.
        if re.search(rb"/Count\s+0\b", data) and not re.search(rb"/Count\s+[1-9]", data):
            yield Bad(0, "PDF with zero pages", UNREADABLE)
        elif "password" in str(exc).lower():
            yield Bad(0, "encrypted PDF (needs a password); decrypt it first, e.g. `qpdf --decrypt`", ENCRYPTED)
        else:
            yield Bad(0, f"corrupt PDF, PDFium cannot open it ({exc})", UNREADABLE)
        return
    parts = Parts()
    try:
        if len(pdf) == 0:
            yield Bad(0, "PDF with zero pages", UNREADABLE)
            return
        pages = [_page_lines(pdf[i]) for i in range(len(pdf))]
        scanned = [i for i, lines in enumerate(pages) if lines is None]
        if scanned and not ocr:
            numbers = ", ".join(str(i + 1) for i in scanned[:20]) + (", ..." if len(scanned) > 20 else "")
            yield Bad(0, f"{len(scanned)} of {len(pdf)} pages have no usable text layer (pages {numbers}); "
                         f"set input.ocr: true to read them with Tesseract", NEEDS_OCR)
            return
        if scanned:
            from ylink_data.io.readers.ocr import TIMEOUT_S as OCR_TIMEOUT_S, ocr_page

            try:
                ocr_text = {i: ocr_page(pdf[i], ocr_languages) for i in scanned}
            except subprocess.TimeoutExpired:
                yield Bad(0, f"tesseract took over {OCR_TIMEOUT_S} s on a page; the page is too large "
                             f"or not text", UNREADABLE)
                return
        title = ""
        with parts.part("pdf_properties"):  # a Title that is not UTF-16 (a lone surrogate) raises
            title = (pdf.get_metadata_value("Title") or "").strip()
    except pdfium.PdfiumError as exc:
        yield Bad(0, f"corrupt PDF, PDFium fails on a page ({exc})", UNREADABLE)
        return
    finally:
        pdf.close()
    pages = without_running_lines(pages)
    body = body_size(pages)
    levels = heading_levels(pages, body)
    markdown = [ocr_text[i] if lines is None else page_markdown(lines, body, levels) for i, lines in enumerate(pages)]
    if not any(page.strip() for page in markdown):
        yield Skip(0, "empty")
        return
    # The first heading before the Title entry, which is often the authoring tool's file name.
    yield document(split, markdown, PDF, first_heading("\n".join(markdown)) or title, parts=parts)


_STREAM = re.compile(rb"(?<!end)stream(?:\r\n|\n|\r)")
_FILTER = re.compile(rb"/Filter\s*(?:/([^\s/\[\]<>()]+)|\[([^\[\]]*)\]|(\d+\s+\d+\s+R))")
_NAME = re.compile(rb"/([^\s/\[\]<>()]+)")
_LENGTH = re.compile(rb"/Length\s+(\d+)(?!\s+\d+\s+R)")


def _stream_too_large(data: bytes, limit: int) -> Bad | None:
    """A PDF with a stream that decodes to more than `limit` bytes, or one whose filters cannot be
    decoded here: PDFium decodes a stream whole, and a content stream parsed takes ~12 times its size
    (a 712 KB file of one 200 MB stream took the reader to 2.5 GB). Each stream is decoded here first
    through its filter chain, bounded (pdf_filters.py), and only counted. A stream is found by its
    keyword, its filters in the dictionary before it (back to its `obj`), its bytes up to its direct
    /Length or else its `endstream`; one whose bytes break its filters (encrypted, or the word inside
    binary data) is PDFium's to judge."""
    view = memoryview(data)
    for m in _STREAM.finditer(data):
        start = data.rfind(b"obj", max(0, m.start() - 4096), m.start())
        if start < 0:
            continue
        filters = _filters(data, start, m.start())
        if not filters:
            continue  # no filter: the stream is its bytes in the file
        try:
            size = decoded_size(view[m.end():_stream_end(data, start, m)], filters, limit)
        except Unbounded as exc:
            return Bad(0, f"a stream has a filter whose output cannot be bounded here ({exc}), so it could "
                          f"unpack past input.max_unpacked_bytes; re-save it with standard filters (e.g. `qpdf --decode-level=generalized IN OUT`) or leave it out",
                       TOO_LARGE)
        except DecodeError:
            continue
        if size > limit:
            return Bad(0, f"a stream decodes to over input.max_unpacked_bytes ({limit:,} bytes); raise it to "
                          f"read this file", TOO_LARGE)
    return None


def _filters(data: bytes, start: int, end: int) -> list[str]:
    """The stream's filter names, first applied first; `?` for one given by reference."""
    m = _FILTER.search(data, start, end)
    if m is None:
        return []
    if m.group(3):
        return ["? (an indirect /Filter)"]
    if m.group(1):
        return [m.group(1).decode("latin-1")]
    inside = m.group(2)
    names = [n.decode("latin-1") for n in _NAME.findall(inside)]
    return names if _NAME.sub(b"", inside).strip() == b"" else names + ["? (a /Filter array with references)"]


def _stream_end(data: bytes, start: int, m: re.Match) -> int:
    length = _LENGTH.search(data, start, m.start())
    if length is not None:
        end = m.end() + int(length.group(1))
        if data.startswith(b"endstream", end) or b"endstream" in data[end:end + 16]:
            return end
    end = data.find(b"endstream", m.end())
    return len(data) if end < 0 else end


def _page_lines(page: pdfium.PdfPage) -> Page | None:
    """The page's text lines, or None when the page needs OCR."""
    textpage = page.get_textpage()
    try:
        n = textpage.count_chars()
        text = textpage.get_text_range(0, n) if n else ""
        visible = len(text) - sum(map(str.isspace, text))
        if visible == 0:
            return None if _has_image(page) else Page()
        if len(_GARBAGE.findall(text)) > _GARBAGE_SHARE * visible:
            return None
        exact = len(text) == n  # char i of the string is PDFium's char i (no surrogate pairs)
        if exact and _ARABIC.search(text):
            text = _arabic(textpage, text)
        # Else PDFium's string leaves some of its chars out (soft hyphens at line ends, on 5 of
        # redp5110_sampled.pdf's 18 pages), and PDFium maps each string index to its char: the
        # lines of such a page have their position too, which the running header rule needs.
        char = (lambda i: i) if exact else (lambda i: pdfium_c.FPDFText_GetCharIndexFromTextIndex(textpage, i))
        # The page's box in the lines' coordinates, for the running header rule; a page turned by
        # 90 degrees has its top at one side of them, and no box.
        _, low, _, high = page.get_bbox()
        upright = page.get_rotation() % 180 == 0
        lines, pos = Page(bottom=low if upright else None, top=high if upright else None), 0
        for raw in re.split(r"\r\n|\r|\n", text):
            start, pos = pos, pos + len(raw) + (2 if text.startswith("\r\n", pos + len(raw)) else 1)
            line = _GARBAGE.sub("", raw).strip()
            if not line:
                continue
            first = [char(start + i) for i in [i for i, ch in enumerate(raw) if not ch.isspace()][:4]]
            size, top, bottom, left = _geometry(textpage, first)
            lines.append(Line(line, size, top, bottom, left, first[0] >= 0 and _bold(textpage, first[0])))
        return lines
    finally:
        textpage.close()
        page.close()


def _arabic(textpage: pdfium.PdfTextPage, text: str) -> str:
    """PDFium reverses right-to-left runs character by character, so a lam-alef ligature, one
    glyph that maps to "لا", comes out as "ال": put such pairs (two characters of one glyph: the
    same box) back in order. And a space between an Arabic word and a Latin one set against it."""
    chars = list(text)
    for m in _ALEF_LAM.finditer(text):
        i = m.start()
        if textpage.get_charbox(i) == textpage.get_charbox(i + 1):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return _MIXED.sub(" ", "".join(chars))


def _geometry(textpage: pdfium.PdfTextPage, chars: list[int]) -> tuple[float, float, float, float]:
    """(font height, top, bottom, left) of a line from its first few visible characters (PDFium's
    indexes; -1 for one PDFium does not place)."""
    size, top, bottom, left = 0.0, float("-inf"), float("inf"), float("inf")
    for i in chars:
        if i >= 0:
            x0, y0, x1, y1 = textpage.get_charbox(i, loose=True)
            size, top, bottom, left = max(size, y1 - y0), max(top, y1), min(bottom, y0), min(left, x0)
    return size, top, bottom, left


def _bold(textpage: pdfium.PdfTextPage, index: int) -> bool:
    name = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    pdfium_c.FPDFText_GetFontInfo(textpage, index, name, len(name), ctypes.byref(flags))
    return (any(w in name.value.lower() for w in (b"bold", b"black", b"heavy", b"semibold"))
            or pdfium_c.FPDFText_GetFontWeight(textpage, index) >= 600)


def _has_image(page: pdfium.PdfPage) -> bool:
    return any(obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE for obj in page.get_objects(max_depth=2))
