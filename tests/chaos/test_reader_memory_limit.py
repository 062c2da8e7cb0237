"""Issue 39, point 15: the PDF pre-check (a stream's filters, counted before PDFium decodes it) was
bypassed four ways: more than 4,096 bytes between `obj` and `stream`, a comment inside the stream's
dictionary, an escaped name (`/F#69lter`), and an indirect /Length with `endstream` inside a stored
deflate block. Each 600 KB file drove the reader child to 4 GB. The class: a bomb the checks before
parsing cannot see. Now the reader child runs under a hard memory limit (its address space bounded
to its own size plus input.max_document_memory_bytes), so such a file fails to allocate and is
`too_large`, in any format, and the run goes on.

Generated over formats and bombs that pass the pre-checks: the four PDF shapes (real PDFs written
here byte by byte, their page content real text), and DOCX and PPTX whose part parses far past the
limit or whose member unpacks past it (max_unpacked_bytes raised so that the ZIP directory check lets
it in). Each is one `too_large` naming the key, the reader child's peak memory stays bounded by the
limit (measured by the kernel for every child, the dead ones too), the next file reads as before;
and one real run over them all with real documents loses nothing.
"""
from __future__ import annotations

import functools
import io
import json
import shutil
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from ylink_data.core.timelimit import time_limit
from ylink_data.engine.stats import check_invariant
from ylink_data.io.readers.pdf import _stream_too_large

from ..conftest import TEST_DATA
from .processes import python
from .test_hostile_documents import DOCS, HANG_GUARD_S, member, read, rezip, run_folder

LIMIT = 256 << 20  # input.max_document_memory_bytes here (the default is 2 GiB)
INFLATED = 96 << 20  # a PDF page's content stream inflated: PDFium takes more than 256 MiB to read it
PDF_SHAPES = ("far from obj", "comment in the dict", "escaped name", "indirect length")


@functools.cache
def _words() -> bytes:
    with open(TEST_DATA / "SOURCE.md", encoding="utf-8") as f:
        return "".join(c for c in " ".join(f.read().split()[:12]) if c.isalnum() or c == " ").encode()


def _zlib(total: int, stored: bytes = b"") -> bytes:
    """A zlib stream of `total` bytes of page content (real text shown line after line), starting with
    a stored (uncompressed) deflate block of `stored` when given; made fast: after a full flush,
    deflate gives a repeated piece the same bytes each time."""
    op = b"BT /F1 12 Tf 72 720 Td (" + _words() + b") Tj ET\n"
    block = (op * ((1 << 20) // len(op) + 1))[: 1 << 20]
    out, adler = bytearray(b"\x78\x01"), zlib.adler32(stored)
    if stored:  # BFINAL 0, BTYPE 00, then LEN and NLEN
        out += b"\x00" + struct.pack("<HH", len(stored), 0xFFFF ^ len(stored)) + stored
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    out += piece * (total >> 20) + c.flush()
    for _ in range(total >> 20):
        adler = zlib.adler32(block, adler)
    return bytes(out + struct.pack(">I", adler))


def _pdf(stream_dict: bytes, content: bytes, *extra: bytes) -> bytes:
    """A one-page PDF written byte by byte (pikepdf would rewrite the dictionaries), with its xref."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
               b"/Contents 4 0 R >>",
               stream_dict + b"\nstream\n" + content + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>", *extra]
    out, offsets = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return bytes(out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))


def pdf_bomb(shape: str, total: int = INFLATED) -> bytes:
    """A PDF whose page content inflates to `total` bytes, its /Filter written so that the pre-check
    does not find it (`shape`)."""
    if shape == "indirect length":  # the pre-check cut the stream at the `endstream` inside it
        content = _zlib(total, stored=b"% endstream\n")
        return _pdf(b"<< /Length 6 0 R /Filter /FlateDecode >>", content, b"%d" % len(content))
    content = _zlib(total)
    dicts = {"far from obj": b"<< /Length %d /Filter /FlateDecode /Pad (%s) >>" % (len(content), b"x" * 5000),
             "comment in the dict": b"<< /Length %d /Filter %%c\n/FlateDecode >>" % len(content),
             "escaped name": b"<< /Length %d /F#69lter /FlateDecode >>" % len(content)}
    return _pdf(dicts[shape], content)


def _dense_docx() -> bytes:
    """word_tables.docx whose body is 42 MB of one-word paragraphs (under max_unpacked_bytes):
    python-docx's parse of it takes about 16 times that."""
    src = (DOCS / "word_tables.docx").read_bytes()
    xml = member(src, "word/document.xml")
    head = xml[: xml.index("<w:body>") + len("<w:body>")]
    body = "<w:p><w:r><w:t>x</w:t></w:r></w:p>" * 1_200_000
    return rezip(src, {"word/document.xml": (head + body + "<w:sectPr/></w:body></w:document>").encode()})


def _dense_pptx() -> bytes:
    """powerpoint_sample.pptx whose second slide holds 40 MB of text boxes (under max_unpacked_bytes)."""
    src = (DOCS / "powerpoint_sample.pptx").read_bytes()
    slide = member(src, "ppt/slides/slide2.xml")
    box = ('<p:sp><p:nvSpPr><p:cNvPr id="9" name="B"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:spPr/>'
           '<p:txBody><a:bodyPr/><a:p><a:r><a:t>x</a:t></a:r></a:p></p:txBody></p:sp>')
    return rezip(src, {"ppt/slides/slide2.xml": slide.replace("</p:spTree>", box * 250_000 + "</p:spTree>").encode()})


def _with_huge_member(src: Path, name: str) -> bytes:
    """The package with its part `name` unpacking to 384 MiB more: white space before its closing
    tag (a part the reader loads whole; the file stays small)."""
    out = io.BytesIO()
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as new:
        for info in old.infolist():
            data = old.read(info)
            if info.filename != name:
                new.writestr(info.filename, data)
                continue
            cut = data.rindex(b"</")
            with new.open(name, "w", force_zip64=True) as f:
                f.write(data[:cut])
                for _ in range(384):
                    f.write(b" " * (1 << 20))
                f.write(data[cut:])
    return out.getvalue()


BOMBS = {
    **{f"pdf: {shape}": ("pdf", functools.partial(pdf_bomb, shape), {}) for shape in PDF_SHAPES},
    "docx: a part that parses past the limit": ("docx", _dense_docx, {}),
    "docx: a member that unpacks past it": ("docx", lambda: _with_huge_member(DOCS / "word_tables.docx",
                                                                              "word/document.xml"),
                                            {"max_unpacked_bytes": 1 << 40}),
    "pptx: a part that parses past the limit": ("pptx", _dense_pptx, {}),
    "pptx: a member that unpacks past it": ("pptx", lambda: _with_huge_member(DOCS / "powerpoint_sample.pptx",
                                                                              "ppt/slides/slide2.xml"),
                                            {"max_unpacked_bytes": 1 << 40}),
}
GOOD = {"pdf": DOCS / "multi_page.pdf", "docx": DOCS / "word_tables.docx", "pptx": DOCS / "powerpoint_sample.pptx"}

READ = """
import json, resource, sys
from ylink_data.io.input_config import InputConfig
from ylink_data.io.readers import Split, read_split, split_extension
from ylink_data.io.readers.isolated import reader_process

def read(path):
    cfg = InputConfig(paths=[path], **json.loads(sys.argv[3]))
    with open(path, "rb") as f:
        split = Split(path, split_extension(path)[0])
        return [[type(i).__name__, getattr(i, "reason", None), getattr(i, "error", None)]
                for i in read_split(split, f, cfg)]

good, bomb, after = read(sys.argv[1]), read(sys.argv[2]), read(sys.argv[1])
reader_process().close()
# The peak resident memory of every reader child, the killed ones too: the kernel's, as each is reaped.
print(json.dumps({"good": good, "bomb": bomb, "after": after,
                  "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def test_the_pdf_bombs_pass_the_pre_check_and_a_small_one_is_a_real_pdf(tmp_path):
    """The shapes are what the issue says: the pre-check finds no stream to bound in any, and each,
    small, is a PDF PDFium reads as the page of text it is."""
    for shape in PDF_SHAPES:
        assert _stream_too_large(pdf_bomb(shape), 1 << 20) is None, shape
        path = tmp_path / f"{shape}.pdf"
        path.write_bytes(pdf_bomb(shape, 2 << 20))
        (doc,) = read(path)
        assert doc.text.split()[:len(_words().split())] == _words().decode().split(), shape


@pytest.mark.parametrize("case", BOMBS)
def test_a_bomb_the_pre_checks_miss_is_too_large_in_bounded_memory(case, tmp_path):
    fmt, make, options = BOMBS[case]
    bomb = tmp_path / f"bomb.{fmt}"
    bomb.write_bytes(make())
    assert bomb.stat().st_size < 2 << 20
    done = python(READ, GOOD[fmt], bomb, json.dumps({"max_document_memory_bytes": LIMIT, **options}))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    ((kind, reason, error),) = out["bomb"]
    assert (kind, reason) == ("Bad", "too_large"), out["bomb"]
    assert "input.max_document_memory_bytes (268,435,456 bytes" in error and "\n" not in error
    assert out["good"] == out["after"] and out["good"][0][0] == "Record"  # the next file reads as before
    # Measured (2026-12): 269-307 MB, the child's own size and the limit; without the limit the PDF here
    # is read whole (323 MB; the issue's, of a larger stream, took 4 GB), the dense DOCX took 676 MB.
    assert out["peak"] < LIMIT + (192 << 20), f"{case}: a reader child peaked at {out['peak']:,} bytes"


def test_a_run_over_every_bomb_and_real_documents_loses_nothing(tmp_path):
    folder = tmp_path / "in"
    shutil.copytree(DOCS, folder, ignore=shutil.ignore_patterns("_source"))
    bombs = {}
    for case, (fmt, make, options) in BOMBS.items():
        if not options and f"bomb.{fmt}" not in bombs:  # the first of each format the defaults let in
            bombs[f"bomb.{fmt}"] = case
            (folder / f"bomb.{fmt}").write_bytes(make())
    with time_limit(HANG_GUARD_S * 4):
        run, stats = run_folder(folder, tmp_path / "out", max_document_memory_bytes=LIMIT)
    assert check_invariant(stats) is None
    entries = {Path(e["file"]).name: e for e in run.quarantine()}
    assert set(entries) == set(bombs)
    assert all(e["reason"] == "too_large" and "input.max_document_memory_bytes" in e["error"] for e in entries.values())
    docs = {Path(row["source"]).name for row in run.to_arrow().to_pylist()}
    assert docs == {p.name for p in DOCS.iterdir() if p.is_file()}
