"""Issue 33, point 8 (PDFs): `input.max_unpacked_bytes` did not apply to PDFs, and PDFium inflates a
stream whole: a 712 KB PDF whose content stream inflates to 200 MB took the reader child to 2.5 GB.
Generated over where a Flate stream sits in a file (the page's content, one of a content array, an
embedded font, an object nothing refers to) and how its filter is written (a name, an array): each
file is quarantined as `too_large`, and the reader child's peak memory stays far below the stream."""
from __future__ import annotations

import functools
import itertools
import zlib
from pathlib import Path

import pikepdf
import pytest
from pikepdf import Array, Dictionary, Name

from ylink_data.io.readers.base import Record
from ylink_data.io.readers.isolated import reader_process

from ..conftest import TEST_DATA
from .test_hostile_documents import DOCS, read

INFLATED = 256 << 20  # the stream's size once inflated; max_unpacked_bytes is its default, 64 MiB
PLACES = ("page content", "content array", "font file", "unreferenced object")
FILTERS = {"name": Name.FlateDecode, "array": Array([Name.FlateDecode])}


@functools.cache
def _deflated() -> bytes:
    """INFLATED bytes of a content stream that shows real text, deflated (about 250 KB)."""
    with open(TEST_DATA / "SOURCE.md", encoding="utf-8") as f:
        words = "".join(c for c in " ".join(f.read().split()[:12]) if c.isalnum() or c == " ")
    op = f"BT /F1 12 Tf 72 720 Td ({words}) Tj ET\n".encode()
    d = zlib.compressobj(9)
    block = op * ((1 << 20) // len(op) + 1)
    parts = [d.compress(block[: 1 << 20]) for _ in range(INFLATED >> 20)]
    return b"".join(parts) + d.flush()


def _bomb_pdf(path: Path, place: str, filter_name: str) -> Path:
    pdf = pikepdf.new()
    page = pdf.add_blank_page(page_size=(612, 792))
    font = Dictionary(Type=Name.Font, Subtype=Name.Type1, BaseFont=Name.Helvetica)
    page.Resources = Dictionary(Font=Dictionary(F1=pdf.make_indirect(font)))
    bomb = pikepdf.Stream(pdf, b"")
    bomb.write(_deflated(), filter=FILTERS[filter_name])
    small = pdf.make_stream(b"BT /F1 12 Tf 72 700 Td (A page of text) Tj ET\n")
    if place == "page content":
        page.Contents = pdf.make_indirect(bomb)
    elif place == "content array":
        page.Contents = Array([small, pdf.make_indirect(bomb)])
    elif place == "font file":
        page.Contents = small
        font.FontDescriptor = pdf.make_indirect(Dictionary(Type=Name.FontDescriptor, FontName=Name.Helvetica,
                                                           FontFile2=pdf.make_indirect(bomb)))
    else:
        page.Contents = small
        pdf.Root.Unused = pdf.make_indirect(bomb)
    pdf.save(path, compress_streams=False)  # the bomb stays as written (already deflated)
    return path


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


@pytest.mark.parametrize("place,filter_name", list(itertools.product(PLACES, FILTERS)))
def test_a_pdf_stream_that_inflates_past_the_limit_is_quarantined_in_bounded_memory(place, filter_name, tmp_path):
    path = _bomb_pdf(tmp_path / "bomb.pdf", place, filter_name)
    assert path.stat().st_size < 1 << 20
    reader_process().close()  # a new child: its peak is this file's alone
    (bad,) = read(path)
    assert bad.reason == "too_large", bad
    assert "input.max_unpacked_bytes" in bad.error and "\n" not in bad.error
    # Measured (2026-12): 109 MB, the child with PDFium, python-docx and python-pptx loaded; 776 MB
    # before the fix, PDFium inflating the page content stream whole.
    assert _peak_rss(reader_process().pid) < INFLATED // 2
    (doc,) = read(DOCS / "multi_page.pdf")  # the default limit lets real files through
    assert isinstance(doc, Record)
