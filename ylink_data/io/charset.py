"""Bytes of a web page to text: a byte order mark, else the HTTP header's charset, then the page's
own <meta> declaration, then detection. Labels are read as browsers read them: the WHATWG Encoding
standard's label table (from `webencodings`, which html5lib uses too), so `latin1` is windows-1252,
`gb2312` is GBK and an unknown label is ignored. In a <meta>, a UTF-16 label means UTF-8 (a page
that finds its own declaration by reading ASCII is not UTF-16) and x-user-defined means
windows-1252. Declarations are tried strictly, because Chinese pages often declare gb2312 while
being UTF-8 (or the reverse); the first one that decodes cleanly wins."""
from __future__ import annotations

import codecs
import re

import webencodings

# A <meta> ends at the next "<" too, and no two quantifiers over spaces meet: linear (issue 39).
_META_CHARSET = re.compile(rb"""<meta[^<>]+charset\s*=\s*(?:["']\s*)?([a-zA-Z0-9_:.\-]+)""", re.I)
_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?([a-zA-Z0-9_:.\-]+)""", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))

# WHATWG decodes GBK with its gb18030 decoder: Python's gbk codec would reject GB18030-only bytes.
_WIDER_DECODER = {"gbk": "gb18030"}
# What a <meta> declaration of these encodings means (WHATWG HTML, "prescan a byte stream").
_META_MEANS = {"utf-16le": "utf-8", "utf-16be": "utf-8", "x-user-defined": "windows-1252"}


def whatwg_encoding(label: str | None, in_meta: bool = False) -> str | None:
    """The Python codec name for a charset label as browsers read it, or None for a label they do
    not know (or the `replacement` encoding, which decodes a page to nothing: better detected)."""
    if not label:
        return None
    encoding = webencodings.lookup(label.strip().strip("\"'"))
    if encoding is None or encoding.name == "replacement":
        return None
    if in_meta and encoding.name in _META_MEANS:
        encoding = webencodings.lookup(_META_MEANS[encoding.name])
    if encoding.name in _WIDER_DECODER:
        return _WIDER_DECODER[encoding.name]
    if encoding.name == "x-user-defined":  # over HTTP: bytes 80-FF are private-use characters
        return "x-user-defined"
    return encoding.codec_info.name


def header_charset(content_type: str | None) -> str | None:
    m = _HEADER_CHARSET.search(content_type or "")
    return whatwg_encoding(m.group(1)) if m else None


def meta_charset(head: bytes) -> str | None:
    m = _META_CHARSET.search(head[:8192])
    return whatwg_encoding(m.group(1).decode("ascii", "ignore"), in_meta=True) if m else None


def decode_html(body: bytes, content_type: str | None = None) -> tuple[str, str]:
    """(text, encoding used). Never fails: the last resort decodes with replacement characters."""
    text, encoding = html_text(body, content_type)
    return (text.decode("utf-8") if isinstance(text, bytes) else text), encoding


def html_text(body: bytes, content_type: str | None = None) -> tuple[str | bytes, str]:
    """As `decode_html`, but a page that is valid UTF-8 comes back as its own bytes: the Arrow
    column is built from them directly, sparing a decode to str and an encode back."""
    if body.startswith(codecs.BOM_UTF8) and is_utf8(body[3:]):
        return body[3:], "utf-8"
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(name, "replace"), name
    declared = [c for c in (header_charset(content_type), meta_charset(body)) if c]
    for name in dict.fromkeys([*declared, "utf-8"]):
        if name == "utf-8":
            if is_utf8(body):
                return body, name
            continue
        try:
            return _decode(body, name, "strict"), name
        except UnicodeDecodeError:
            continue
    detected = _detect(body)
    if detected:
        return _decode(body, detected, "replace"), detected
    fallback = declared[0] if declared else "cp1252"
    return _decode(body, fallback, "replace"), fallback


def _decode(body: bytes, name: str, errors: str) -> str:
    if name == "x-user-defined":  # WHATWG's own single-byte encoding: Python has no codec for it
        return webencodings.lookup(name).codec_info.decode(body, errors)[0]
    return body.decode(name, errors)


def is_utf8(data: bytes) -> bool:
    # CPython's decoder (about 3 GB/s on web pages) beats any per-record call into Arrow here.
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _detect(body: bytes) -> str | None:
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - a core dependency, but decoding must never crash
        return None
    best = from_bytes(body[:65536]).best()
    if best is None:
        return None
    try:
        return codecs.lookup(best.encoding).name
    except LookupError:
        return None
