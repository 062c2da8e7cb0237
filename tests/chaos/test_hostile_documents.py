"""Issue 23, points 1-3: no document file can kill, hang or blow up a run.

Found by reading the bundled documents' XML as a hostile user would: a DOCX whose
word/document.xml has another root element stopped the run with AttributeError; a PPTX with a shape
python-pptx has no class for (p:contentPart, a p:sp without geometry that is not a text box) with
`NotImplementedError: Shape instance of unrecognized shape type`; a DOCX list level numbered
`lowerRoman` from `w:start="900000000000000"` held the run for ever (a label of one "m" per
thousand); a 430 KB DOCX of 4 million paragraphs took 2.25 GB; OCR of a one-page PDF of 14400 x
14400 pt rendered 3.6 billion pixels. Each file here is a real sample with that one change.
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import struct
import zipfile
from pathlib import Path

import pypdfium2 as pdfium
import pytest

import ylink_data
from ylink_data.engine.config import validate_config
from ylink_data.io.input_config import InputConfig
from ylink_data.core.errors import ConfigError
from ylink_data.io.readers import Record, Split, read_split, split_extension
from ylink_data.io.readers.isolated import reader_process
from ylink_data.io.readers.ocr import MAX_PIXELS, render_scale
from ylink_data.io.readers.wordlists import _format
from ylink_data.engine.stats import check_invariant
from ylink_data.core.timelimit import time_limit

from ..conftest import REPO

DOCS = REPO / "samples" / "documents"
HANG_GUARD_S = 300  # not a timing assertion: a regression that hangs fails instead of holding the suite
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"


def rezip(data: bytes, changes: dict[str, bytes | None]) -> bytes:
    """The ZIP package with members replaced (None: removed), as an Office application writes it."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            member = changes.get(info.filename, src.read(info))
            if member is not None:
                dst.writestr(info.filename, member)
    return out.getvalue()


def member(data: bytes, name: str) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.read(name).decode("utf-8")


def docx_of_paragraphs(n: int) -> bytes:
    """samples/documents/word_tables.docx with a body of `n` one-word paragraphs (35 bytes of XML each)."""
    src = (DOCS / "word_tables.docx").read_bytes()
    xml = member(src, "word/document.xml")
    head = xml[: xml.index("<w:body>") + len("<w:body>")]
    body = "<w:p><w:r><w:t>x</w:t></w:r></w:p>" * n
    return rezip(src, {"word/document.xml": (head + body + "<w:sectPr/></w:body></w:document>").encode()})


def unknown_shapes_pptx() -> bytes:
    """samples/documents/powerpoint_sample.pptx with, on slide 2: a p:contentPart (ink, no class in
    python-pptx), a p:sp without geometry that is not a text box, a text box inside
    mc:AlternateContent (python-pptx leaves those out) and an element PresentationML does not have."""
    src = (DOCS / "powerpoint_sample.pptx").read_bytes()
    slide = member(src, "ppt/slides/slide2.xml")
    added = (
        f'<p:contentPart xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="rId99"/>'
        '<p:sp><p:nvSpPr><p:cNvPr id="90" name="No geometry"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr/>'
        '<p:txBody><a:bodyPr/><a:p><a:r><a:t>Text of a shape without geometry</a:t></a:r></a:p></p:txBody></p:sp>'
        '<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
        '<mc:Choice Requires="p14"><p:sp><p:nvSpPr><p:cNvPr id="91" name="Alternate"/><p:cNvSpPr txBox="1"/>'
        '<p:nvPr/></p:nvSpPr><p:spPr><a:prstGeom prst="rect"/></p:spPr><p:txBody><a:bodyPr/><a:p><a:r>'
        '<a:t>Text inside AlternateContent</a:t></a:r></a:p></p:txBody></p:sp></mc:Choice>'
        '<mc:Fallback><p:pic/></mc:Fallback></mc:AlternateContent>'
        f'<p:inkling xmlns:p="{_P}"/>')
    return rezip(src, {"ppt/slides/slide2.xml": slide.replace("</p:spTree>", added + "</p:spTree>").encode()})


def roman_docx(shared_data: Path) -> bytes:
    """docx_lists.docx (docling's tests) with every list level numbered in lower roman numerals
    from 900,000,000,000,000."""
    src = (shared_data / "documents/docx/docling/docx_lists.docx").read_bytes()
    numbering = member(src, "word/numbering.xml")
    numbering = re.sub(r'<w:numFmt w:val="\w+"/>', '<w:numFmt w:val="lowerRoman"/>', numbering)
    numbering = re.sub(r'<w:start w:val="\d+"/>', '<w:start w:val="900000000000000"/>', numbering)
    assert numbering.count("900000000000000") > 10
    return rezip(src, {"word/numbering.xml": numbering.encode()})


def read(path: Path, **input_options) -> list:
    """The reader's items for one local file, without a pipeline."""
    cfg = InputConfig(paths=[str(path)], **input_options)
    with open(path, "rb") as f:
        return list(read_split(Split(str(path), split_extension(str(path))[0]), f, cfg))


def run_folder(folder: Path, out: Path, **input_options) -> tuple[ylink_data.Run, dict]:
    cfg = {"name": "hostile", "input": {"paths": [str(folder)], **input_options}, "output": {"path": str(out)},
           "stages": []}
    _, stats = ylink_data.run(cfg)
    return ylink_data.open_run(str(out)), stats


def test_a_reader_error_quarantines_its_file_and_an_unknown_shape_only_itself(ray_session, shared_data, tmp_path):
    """One run over the sample documents, a DOCX whose main part is another XML vocabulary, a deck
    with shapes python-pptx cannot read and the roman-numbered lists: the DOCX is quarantined with
    a one-line message, the deck kept whole but for the two unknown shapes (counted), the lists
    read, and the books balance."""
    folder = tmp_path / "in"
    shutil.copytree(DOCS, folder, ignore=shutil.ignore_patterns("_source"))
    (folder / "other-root.docx").write_bytes(rezip((DOCS / "word_tables.docx").read_bytes(),
                                                   {"word/document.xml": b'<foo xmlns="http://x"/>'}))
    (folder / "unknown-shapes.pptx").write_bytes(unknown_shapes_pptx())
    (folder / "roman.docx").write_bytes(roman_docx(shared_data))

    with time_limit(HANG_GUARD_S):
        run, stats = run_folder(folder, tmp_path / "out")

    assert check_invariant(stats) is None
    entries = {Path(e["file"]).name: e for e in run.quarantine()}
    assert list(entries) == ["other-root.docx"]
    entry = entries["other-root.docx"]
    assert entry["reason"] == "unreadable" and entry["stage"] == "read" and "\n" not in entry["error"]
    assert entry["error"].startswith("not a readable .docx file (ValueError: word/document.xml holds <foo>"), entry
    docs = {Path(row["source"]).name: row for row in run.to_arrow().to_pylist()}
    assert set(docs) == {p.name for p in DOCS.iterdir() if p.is_file()} | {"unknown-shapes.pptx", "roman.docx"}

    deck = docs["unknown-shapes.pptx"]
    original = docs["powerpoint_sample.pptx"]["text"]
    assert "Text of a shape without geometry" in deck["text"] and "Text inside AlternateContent" in deck["text"]
    # Every line of the untouched deck is still there: only the two unknown shapes were left out.
    assert set(original.splitlines()) <= set(deck["text"].splitlines())
    assert json.loads(deck["metadata"])["skipped_parts"] == {"pptx_shape": 2}
    assert stats["stages"][0]["counters"] == {"skipped_part_pptx_shape": 2}

    # Labels past Word's roman numerals are decimal, as Word writes them.
    assert "900000000000000. " in docs["roman.docx"]["text"] and "mmmmmmmmmm" not in docs["roman.docx"]["text"]


def test_list_labels_are_roman_and_letters_up_to_words_limits_then_decimal():
    """Word's roman numerals end at 3999, letter labels at 780; past them the number is decimal."""
    assert _format(3999, "upperRoman") == "MMMCMXCIX" and _format(14, "lowerRoman") == "xiv"
    assert _format(4000, "lowerRoman") == "4000" and _format(10**6, "upperRoman") == "1000000"
    assert _format(0, "lowerRoman") == "0" and _format(-3, "lowerLetter") == "-3"
    assert _format(28, "lowerLetter") == "ab" and _format(780, "upperLetter") == "ACZ"  # 1*26**2 + 3*26 + 26
    assert _format(781, "lowerLetter") == "781"


def test_a_table_spanning_a_million_columns_is_skipped_and_counted_and_the_rest_kept(tmp_path):
    """python-docx gives a row one cell per column a cell spans: `w:gridSpan` of a million built a
    million cells (and read the cell's text a million times)."""
    src = (DOCS / "word_tables.docx").read_bytes()
    xml = member(src, "word/document.xml")
    tables = xml.count("<w:tbl>")
    path = tmp_path / "wide.docx"
    path.write_bytes(rezip(src, {"word/document.xml": xml.replace("<w:tcPr>", '<w:tcPr><w:gridSpan w:val="1000000"/>', 1).encode()}))
    (whole,) = read(DOCS / "word_tables.docx")
    with time_limit(HANG_GUARD_S):
        (doc,) = read(path)
    assert isinstance(doc, Record) and doc.metadata["skipped_parts"] == {"docx_table": 1}
    assert doc.counters == {"skipped_part_docx_table": 1}
    blocks = whole.text.split("\n\n")
    first_table = next(i for i, b in enumerate(blocks) if b.startswith("| "))
    assert tables > 1 and doc.text == "\n\n".join(blocks[:first_table] + blocks[first_table + 1:])


def test_a_docx_that_unpacks_past_the_limit_is_quarantined_before_it_is_parsed(tmp_path):
    """The issue's file: 4 million paragraphs, 140 MB of XML in 0.4 MB, which took 2.25 GB to read;
    the check reads only the ZIP directory's sizes. A smaller one with the key lowered, and read
    once the key is raised, shows the key is what decides."""
    bomb = tmp_path / "bomb.docx"
    bomb.write_bytes(docx_of_paragraphs(4_000_000))
    assert bomb.stat().st_size < 1_000_000
    (bad,) = read(bomb)
    unpacked = sum(i.file_size for i in zipfile.ZipFile(bomb).infolist())
    assert bad.reason == "too_large" and "\n" not in bad.error
    assert bad.error == (f"unpacks to {unpacked:,} bytes ({unpacked / 2**20:,.0f} MiB), over input.max_unpacked_bytes "
                         f"({64 * 2**20:,}); raise it to read this file")

    small = tmp_path / "small.docx"
    small.write_bytes(docx_of_paragraphs(10_000))
    unpacked = sum(i.file_size for i in zipfile.ZipFile(small).infolist())
    (bad,) = read(small, max_unpacked_bytes=unpacked - 1)
    assert bad.reason == "too_large"
    (doc,) = read(small, max_unpacked_bytes=unpacked)
    assert isinstance(doc, Record) and doc.text.count("x") == 10_000


def test_a_zip_directory_that_understates_a_member_cannot_unpack_more(tmp_path):
    """The limit trusts the sizes the ZIP directory declares: a member that holds more than its
    declared size (here 3.4 MB declared as 1,000 bytes) fails its CRC check at that size, it is
    never unpacked further."""
    data = bytearray(docx_of_paragraphs(100_000))
    at = understate(data, "word/document.xml", 1000)
    assert struct.unpack_from("<I", data, at + 24)[0] == 1000
    path = tmp_path / "understated.docx"
    path.write_bytes(bytes(data))
    (bad,) = read(path)
    assert bad.reason == "unreadable" and "Bad CRC-32 for file 'word/document.xml'" in bad.error, bad


def understate(data: bytearray, name: str, size: int) -> int:
    """Set the uncompressed size of `name` in the ZIP's central directory; its entry's offset."""
    at = data.index(b"PK\x01\x02")
    while True:
        length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + length] == name.encode():
            struct.pack_into("<I", data, at + 24, size)
            return at
        at = data.index(b"PK\x01\x02", at + 46)


def test_a_file_past_input_time_limit_s_is_quarantined_as_timeout_and_the_next_file_is_read(tmp_path):
    """A million paragraphs (34 MB of XML, under the default max_unpacked_bytes) take 9.4 s to read
    here, lxml parsing the XML in one C call that no signal interrupts: 0.05 s is short of that on
    any machine, so the child stops itself or is killed at the limit, and the next file is read."""
    slow = tmp_path / "slow.docx"
    slow.write_bytes(docx_of_paragraphs(1_000_000))
    with time_limit(HANG_GUARD_S):
        (bad,) = read(slow, time_limit_s=0.05)
    assert bad.reason == "timeout"
    assert bad.error == ("timeout: reading it took over input.time_limit_s (0.05 s); raise that limit to read "
                         "such files")
    (doc,) = read(DOCS / "word_tables.docx")
    assert isinstance(doc, Record)


def test_a_reader_process_killed_between_files_costs_no_file():
    """A reader child killed while it waits for the next file (by the OOM killer, for another
    process's sake) is replaced: the next file is read by a new child (issue 33, point 4; a child
    killed in the middle of a file: test_killed_reader.py)."""
    process = reader_process()
    process.start()
    os.kill(process.pid, signal.SIGKILL)
    (doc,) = read(DOCS / "multi_page.pdf")
    assert isinstance(doc, Record) and doc.metadata["pages"] == 5


def test_document_input_limits_are_checked_with_their_key(tmp_path):
    base = {"input": {"paths": [str(DOCS)]}, "output": {"path": str(tmp_path / "o")}}
    for key, value in (("time_limit_s", 0), ("time_limit_s", -1), ("time_limit_s", 10**6), ("max_unpacked_bytes", 0)):
        with pytest.raises(ConfigError, match=rf"input.{key}: Input should be"):
            validate_config({**base, "input": {"paths": [str(DOCS)], key: value}})
    cfg = validate_config(base).input
    assert cfg.time_limit_s == 60 and cfg.max_unpacked_bytes == 64 * 2**20


def test_ocr_renders_a_page_to_at_most_max_pixels():
    for width, height in [(612, 792), (14400, 14400), (14400, 10), (2000, 3000), (1, 1)]:
        scale = render_scale(width, height)
        pixels = width * scale * height * scale
        assert scale <= 300 / 72 and pixels <= MAX_PIXELS * 1.000001
        assert scale == 300 / 72 or pixels >= MAX_PIXELS * 0.999999  # lowered only as far as needed
    assert render_scale(612, 792) == 300 / 72  # a letter page: 300 dpi, 8.4 million pixels


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs the tesseract binary (CI installs it)")
def test_ocr_reads_a_scanned_page_of_14400_points_within_the_pixel_budget(tmp_path):
    """A one-page scan of 200 x 200 inches (PDF's largest page): at 300 dpi 3.6 billion pixels,
    over 10 GB, where the run died with MemoryError; rendered to MAX_PIXELS, its words are read."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1800, 1800), 255)
    ImageDraw.Draw(image).text((100, 800), "HOSTILE POSTER", fill=0, font=ImageFont.load_default(size=150))
    path = tmp_path / "poster.pdf"
    image.save(path, format="PDF", resolution=9)  # 1800 px at 9 dpi: 200 inches, 14400 pt
    page = pdfium.PdfDocument(str(path))[0]
    assert page.get_size() == (14400, 14400)
    (doc,) = read(path, ocr=True, ocr_languages="eng", time_limit_s=600)
    assert isinstance(doc, Record), doc
    assert "HOSTILE POSTER" in doc.text
