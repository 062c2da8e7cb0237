"""Issue 39, point 9: binary files and UTF-16 text read by the readers of text (every reader that
declares `holds_text`, the HTML records of a WARC, the text records of a WET). Before: a PNG named
.html was published as mojibake, a BOM-less UTF-16LE .txt (or WET record) with a NUL between its
letters, a UTF-16 .txt with a byte order mark quarantined as "invalid UTF-8", and a PNG named .jsonl
made one "invalid JSON" entry per line.

One real pipeline run over a generated sweep: every binary format below, made by the library that
writes it (Pillow, zlib, bz2, lzma, zstandard, zipfile, tarfile, sqlite3, pyarrow, wave, pickle) or
taken as it is (a PNG and a TrueType font of matplotlib, a shared library of the standard library,
the bundled PDF, DOCX and PPTX), under every extension of every text reader; and real Chinese and
English text in UTF-16 LE and BE, with and without a byte order mark, under the same extensions,
beside its UTF-8 original. A binary file is one quarantine entry, `binary`, naming what it is where
it can; UTF-16 text gives exactly what its UTF-8 original gives (JSON Lines, UTF-8 by RFC 8259: one
`unreadable` entry saying UTF-16); nothing of either reaches data/.
"""
from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import pickle
import sqlite3
import tarfile
import wave
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tests.conftest import REPO
from ylink_data import run
from ylink_data.engine.stats import check_invariant
from ylink_data.io.readers.registry import readers

ENCODINGS = (("utf-16-le", b""), ("utf-16-le", codecs.BOM_UTF16_LE), ("utf-16-be", b""), ("utf-16-be", codecs.BOM_UTF16_BE))


def _texts(shared_data: Path) -> dict[str, str]:
    news = (shared_data / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    emma = (shared_data / "en_gutenberg_nltk_raw" / "austen-emma.txt").read_text(encoding="utf-8")
    return {"zh-sport": news[0].partition("\t")[2], "zh-tech": news[500].partition("\t")[2],
            "en-opening": emma[:3000], "en-middle": emma[200_000:203_000]}


def _binaries(tmp_path: Path, text: bytes) -> dict[str, bytes]:
    """{name: bytes} of real binary files, each as its own library writes it."""
    import _ctypes
    import matplotlib
    from PIL import Image

    mpl = Path(matplotlib.get_data_path())
    png = (mpl / "images" / "hand.png").read_bytes()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = {"png": png, "ttf": (mpl / "fonts" / "ttf" / "DejaVuSans-Bold.ttf").read_bytes()[:200_000],
           "so": Path(_ctypes.__file__).read_bytes()}
    for kind in ("JPEG", "GIF", "TIFF", "WEBP", "BMP"):
        buf = io.BytesIO()
        image.save(buf, kind)
        out[kind.lower()] = buf.getvalue()
    out |= {"gzip": gzip.compress(text), "bz2": bz2.compress(text), "xz": lzma.compress(text),
            "zstd": zstandard.ZstdCompressor().compress(text), "pickle": pickle.dumps({"text": text.decode()}, 4)}
    for name in ("multi_page.pdf", "word_tables.docx", "powerpoint_sample.pptx"):
        out[name.rsplit(".", 1)[1]] = (REPO / "samples" / "documents" / name).read_bytes()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("emma.txt", text)
    out["zip"] = buf.getvalue()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("emma.txt")
        info.size = len(text)
        t.addfile(info, io.BytesIO(text))
    out["tar"] = buf.getvalue()
    db = tmp_path / "texts.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("create table t (text)")
        conn.execute("insert into t values (?)", (text.decode(),))
    out["sqlite"] = db.read_bytes()
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": [text.decode()]}), buf)
    out["parquet"] = buf.getvalue()
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(bytes(image.tobytes()[:16000]))
    out["wav"] = buf.getvalue()
    return out


def _in_format(text: str, ext: str) -> str:
    return json.dumps({"text": text}, ensure_ascii=False) + "\n" if ext in _extensions("jsonl") else text


def _extensions(fmt: str | None = None) -> list[str]:
    """The extensions of every reader of text (or of one format of them)."""
    return [e for r in readers() if r.holds_text and (fmt is None or r.format == fmt) for e in r.extensions]


def _warc(records: dict[str, bytes], rtype: str = "response") -> bytes:
    """A WARC of HTML responses, or (`conversion`) a WET of extracted text, one record per item."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for name, body in records.items():
        if rtype == "conversion":
            record = writer.create_warc_record(f"https://example.org/{name}", rtype, payload=io.BytesIO(body),
                                               warc_content_type="text/plain")
        else:
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            record = writer.create_warc_record(f"https://example.org/{name}", rtype, payload=io.BytesIO(body),
                                               http_headers=http)
        writer.write_record(record)
    return out.getvalue()


def test_binary_files_are_quarantined_and_utf16_text_decoded_by_every_text_reader(tmp_path, shared_data):
    texts = _texts(shared_data)
    binaries = _binaries(tmp_path, texts["en-opening"].encode())
    extensions = _extensions()
    assert {".txt", ".html", ".md", ".jsonl"} <= set(extensions)
    folder = tmp_path / "in"
    folder.mkdir()
    binary_files, utf16_files, originals = set(), {}, {}
    for name, data in binaries.items():
        for ext in extensions:
            path = folder / f"{name}{ext}"
            path.write_bytes(data)
            binary_files.add(str(path))
    for name, text in texts.items():
        for ext in extensions:
            original = folder / f"{name}.utf8{ext}"
            original.write_text(_in_format(text, ext), encoding="utf-8")
            originals[str(original)] = (name, ext)
            for codec, bom in ENCODINGS:
                path = folder / f"{name}.{codec}{'-bom' if bom else ''}{ext}"
                path.write_bytes(bom + _in_format(text, ext).encode(codec))
                utf16_files[str(path)] = str(original)
    crawl = folder / "crawl.warc.gz"
    pages = {"png": binaries["png"], "gzip": binaries["gzip"], "jpeg": binaries["jpeg"], "so": binaries["so"][:100_000]}
    pages |= {f"{name}.{codec}": text.encode(codec) for name, text in texts.items() for codec in ("utf-16-le", "utf-16-be")}
    pages |= {f"{name}.utf8": text.encode() for name, text in texts.items()}
    crawl.write_bytes(_warc(pages))
    extracted = folder / "crawl.warc.wet.gz"  # the same bodies as a WET's conversion records (text)
    extracted.write_bytes(_warc(pages, "conversion"))

    out = tmp_path / "out"
    result = run({"input": {"paths": [str(folder)]}, "output": {"path": str(out)}, "stages": []}, progress=False)
    assert check_invariant(result.stats) is None
    rows = [r for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    entries = [json.loads(line) for f in sorted((out / "quarantine").glob("*.jsonl")) for line in f.read_text().splitlines()]
    kept: dict[str, list[str]] = {}
    for r in rows:
        kept.setdefault(r["url"] if r["source"] == str(crawl) else
                        f"wet {r['url']}" if r["source"] == str(extracted) else r["source"], []).append(r["text"])
    quarantined: dict[str, list[dict]] = {}
    for e in entries:
        quarantined.setdefault(e["file"], []).append(e)

    for path in sorted(binary_files):  # one entry each, `binary`, none kept
        assert path not in kept, (path, kept.get(path, [""])[0][:80])
        [entry] = quarantined.get(path, [None])
        assert entry and entry["reason"] == "binary" and entry["error"].startswith("binary content ("), (path, entry)
    named = {p.rsplit("/", 1)[1]: quarantined[p][0]["error"] for p in binary_files}
    for name, what in (("png.html", "PNG image"), ("gzip.txt", "gzip"), ("pdf.md", "PDF document"),
                       ("docx.jsonl", "ZIP archive"), ("sqlite.txt", "SQLite"), ("tar.html", "tar archive")):
        assert what in named[name], (name, named[name])

    for path, original in sorted(utf16_files.items()):  # what its UTF-8 original gives
        assert kept.get(original), (original, quarantined.get(original))
        if path.endswith(tuple(_extensions("jsonl"))):
            [entry] = quarantined[path]
            assert entry["reason"] == "unreadable" and "UTF-16" in entry["error"] and path not in kept, entry
        else:
            assert kept.get(path) == kept[original] and path not in quarantined, (path, quarantined.get(path))
            assert "\x00" not in kept[path][0]

    for warc, prefix in ((crawl, ""), (extracted, "wet ")):  # HTML responses, WET conversion records
        warc_bad = {e["error"] for e in quarantined[str(warc)]}
        assert len(quarantined[str(warc)]) == 4 and all(e["reason"] == "binary" for e in quarantined[str(warc)]), warc_bad
        for name in texts:
            page = kept[f"{prefix}https://example.org/{name}.utf8"]
            assert page == [texts[name]]
            assert kept[f"{prefix}https://example.org/{name}.utf-16-le"] == kept[f"{prefix}https://example.org/{name}.utf-16-be"] == page
