"""Issue 13, point 11: `<meta charset="utf-16">` on an ASCII page was decoded as UTF-16 and kept as
CJK mojibake (tagged `zh` downstream). Browsers follow the WHATWG Encoding standard: a UTF-16 label in
a page's own <meta> means UTF-8 (the page could not have been read as UTF-16 to find it), and
x-user-defined there means windows-1252; a byte order mark still wins over every declaration, and
an HTTP header's UTF-16 label is honoured.

Real pages from the trafilatura evaluation set, read through the pipeline's own readers.
"""
from __future__ import annotations

import io
import re

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from ylink_data.io.input_config import InputConfig
from ylink_data.io.listing import expand_paths
from ylink_data.io.readers import Record, open_split, plan_splits, read_split

EVAL = "trafilatura_eval/tests/eval"
ASCII_PAGE = "wiki.python.org.Download.html"  # English, pure ASCII, <meta charset="utf-8">
LATIN_PAGE = "archive.org-travaillent.html"  # French, declares iso-8859-1 and uses its accents
CJK = re.compile(r"[\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
META = re.compile(rb"""(<meta[^>]+charset\s*=\s*["']?\s*)([a-zA-Z0-9_:.\-]+)""", re.I)


def read_file(path) -> list:
    cfg = InputConfig(paths=[str(path)])
    items = []
    for split in plan_splits(expand_paths([str(path)], lambda _: {}), cfg, lambda _: {}):
        with open_split(split, {}) as f:
            items.extend(read_split(split, f, cfg))
    return items


def page_text(path) -> tuple[str, str]:
    """(text, charset) of the one document an .html file gives."""
    items = read_file(path)
    assert len(items) == 1 and isinstance(items[0], Record)
    return items[0].decoded(), items[0].metadata["charset"]


def relabel(page: bytes, label: bytes) -> bytes:
    assert META.search(page[:8192]), "the page declares its charset in a <meta>"
    return META.sub(lambda m: m.group(1) + label, page, count=1)


@pytest.fixture
def ascii_page(shared_data) -> bytes:
    page = (shared_data / EVAL / ASCII_PAGE).read_bytes()
    assert page.isascii()
    return page


@pytest.mark.parametrize("label", [b"utf-16", b"UTF-16LE", b"utf-16be", b"unicode"])
@pytest.mark.parametrize("pad", [b"", b"\n"], ids=["as-is", "one-more-byte"])  # both parities: odd
def test_a_meta_utf16_label_on_an_ascii_page_means_utf8(tmp_path, ascii_page, label, pad):  # lengths never decode
    page = relabel(ascii_page, label) + pad
    path = tmp_path / "page.html"
    path.write_bytes(page)
    text, charset = page_text(path)
    assert text == page.decode("utf-8") and not CJK.search(text)
    assert charset == "utf-8"


def test_a_meta_x_user_defined_label_means_windows_1252(tmp_path, shared_data):
    page = (shared_data / EVAL / LATIN_PAGE).read_bytes()
    assert not page.isascii()
    path = tmp_path / "page.html"
    path.write_bytes(relabel(page, b"x-user-defined"))
    text, charset = page_text(path)
    assert charset == "cp1252"
    assert text == relabel(page, b"x-user-defined").decode("cp1252")
    # the x-user-defined decoder itself would have made its accents private-use characters
    assert not text.isascii() and not re.search("[\uf780-\uf7ff]", text)


@pytest.mark.parametrize("bom, codec", [(b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")])
@pytest.mark.parametrize("label", [b"utf-16", b"utf-8", b"windows-1252"])
def test_a_real_utf16_page_with_a_bom_still_decodes(tmp_path, ascii_page, bom, codec, label):
    """The page saved as UTF-16 with a byte order mark: the BOM wins over whatever <meta> says."""
    page = relabel(ascii_page, label).decode("ascii")
    path = tmp_path / "page.html"
    path.write_bytes(bom + page.encode(codec))
    text, charset = page_text(path)
    assert (text, charset) == (page, codec)


def _warc_with_response(payload: bytes, content_type: str) -> bytes:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    http = StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record("https://wiki.python.org/moin/BeginnersGuide/Download",
                                                  "response", payload=io.BytesIO(payload), http_headers=http))
    return out.getvalue()


def test_an_http_utf16_charset_is_honoured_and_a_meta_one_is_not(tmp_path, ascii_page):
    """In a WARC response: the HTTP header's utf-16 (the transport's word) decodes a BOM-less UTF-16
    body; on a UTF-8 body whose only UTF-16 label is in its <meta>, the page is read as UTF-8."""
    page = relabel(ascii_page, b"utf-16").decode("ascii")
    path = tmp_path / "crawl.warc.gz"
    path.write_bytes(_warc_with_response(page.encode("utf-16-le"), "text/html; charset=utf-16"))
    [record] = [i for i in read_file(path) if isinstance(i, Record)]
    assert record.decoded() == page
    path.write_bytes(_warc_with_response(page.encode("ascii") + b"\n", "text/html"))
    [record] = [i for i in read_file(path) if isinstance(i, Record)]
    assert record.decoded() == page + "\n" and not CJK.search(record.decoded())
