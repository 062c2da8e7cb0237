"""Bytes of a web page to text: a byte order mark, else the HTTP header's charset, then the page's
own <meta> declaration, then detection. Labels are read as browsers read them: the WHATWG Encoding
standard's label table (from `webencodings`, which html5lib uses too), so `latin1` is windows-1252,
`gb2312` is GBK and an unknown label is ignored. In a <meta>, a UTF-16 label means UTF-8 (a page
that finds its own declaration by reading ASCII is not UTF-16) and x-user-defined means
windows-1252. Declarations are tried strictly, because Chinese pages often declare gb2312 while
being UTF-8 (or the reverse); the first one that decodes cleanly wins.

Before any of that, `sniff_text` tells what is no text at all, for every reader of text (plain
text, HTML, Markdown, JSON Lines, WARC records): binary content (`Binary`: a PNG named .html, a
gzip file named .txt), quarantined as `binary` rather than decoded into mojibake, and UTF-16 (with
or without a byte order mark), decoded rather than published with a NUL between its letters."""
from __future__ import annotations

import codecs
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

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


# ----------------------------------------------------------------------------- binary and UTF-16
SNIFF_BYTES = 8192  # of a file's start, looked at by `sniff_text` (git looks at 8,000 to call a file binary)
# Bytes that no text holds (C0 controls but tab, line feed, vertical tab, form feed, carriage return
# and escape, which logs with colours hold), and the share of them above which bytes are binary: a
# compressed or encrypted stream has about 10% of them. NUL bytes, which binary formats are full
# of, decide at one per KiB (a stray NUL in a web page does not).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\v\f\r\x1b")
_CONTROL_SHARE = 0.05
_NUL_PER_BYTES = 1024
# BOM-less UTF-16 is told by its NUL bytes: in bytes that are UTF-8, only ASCII text in UTF-16 (a NUL
# in every other byte, at least half the units, and nearly none in the other parity: UTF-8 text
# with stray NULs is no UTF-16); in bytes that are not UTF-8, any: Chinese has them in its digits,
# spaces and line ends, and in the characters U+xx00 (一, 最, 开), 1-2% of a news text's units (with
# none, UTF-16 Chinese looks like binary bytes, and is quarantined so). Both byte orders are then
# decoded: the wrong one of Chinese text breaks (its swapped bytes fall on surrogates, private use
# and unassigned code points, `_junk`), the wrong one of ASCII-heavy text does not (its swapped
# letters are CJK ideographs) but has its NUL bytes in the other parity. A reading with U+0000 or
# more than _UTF16_JUNK of junk is none (binary arrays of 16-bit numbers). So is one whose letters
# are not of one script (CJK ideographs and kana counted as one): 16-bit units from random bytes fall
# all over the Basic Multilingual Plane (Hangul, CJK, Lao, maths), text keeps to its script and
# ASCII; a short pattern (a hash repeated) can miss the junk code points, not the script mix.
_UTF16_JUNK = 0.01
_UTF16_ONE_SCRIPT = 0.9
_SCRIPT_FAMILY = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "BOPOMOFO": "CJK", "HALFWIDTH": "CJK",
                  "FULLWIDTH": "CJK", "IDEOGRAPHIC": "CJK"}
# Signatures of binary formats, at the file's start (offset, bytes, what it is): they name what a
# file is; those that hold a byte no text does decide by themselves, the others (pure ASCII, which
# a text may start with) only name binary content found by its bytes. %PDF- decides too: a PDF may
# be all ASCII.
_SIGNATURES = (
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"), (0, b"\xff\xd8\xff", "a JPEG image"), (0, b"GIF8", "a GIF image"),
    (0, b"%PDF-", "a PDF document (name it .pdf or set input.format: pdf)"),
    (0, b"PK\x03\x04", "a ZIP archive: DOCX, PPTX, XLSX, EPUB, JAR... (name a .docx or .pptx so)"),
    (0, b"PK\x05\x06", "an empty ZIP archive"), (0, b"\x1f\x8b", "gzip-compressed data (name it .gz)"),
    (0, b"\x28\xb5\x2f\xfd", "zstd-compressed data (name it .zst)"), (0, b"BZh", "bzip2-compressed data"),
    (0, b"\xfd7zXZ\x00", "xz-compressed data"), (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (0, b"Rar!\x1a\x07", "a RAR archive"), (0, b"\x04\x22\x4d\x18", "lz4-compressed data"),
    (0, b"\x7fELF", "an ELF executable or library"), (0, b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (0, b"\xca\xfe\xba\xbe", "a Java class or Mach-O file"), (0, b"\x00asm", "WebAssembly"),
    (0, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an OLE2 document (DOC, XLS, PPT)"),
    (0, b"SQLite format 3\x00", "an SQLite database"), (0, b"PAR1", "a Parquet file (name it .parquet)"),
    (0, b"II*\x00", "a TIFF image"), (0, b"MM\x00*", "a TIFF image"), (0, b"RIFF", "a RIFF file (WebP, WAV, AVI)"),
    (0, b"OggS", "Ogg media"), (0, b"fLaC", "FLAC audio"), (0, b"ID3", "MP3 audio"), (0, b"wOF", "a WOFF font"),
    (0, b"\x00\x01\x00\x00\x00", "a TrueType font"), (4, b"ftyp", "MP4 or QuickTime media"),
    (257, b"ustar", "a tar archive"), (0, b"\x80\x04\x95", "a Python pickle"))


@dataclass(frozen=True)
class Binary:
    """Bytes that are no text: `what` they are, as an error's words."""

    what: str

    def error(self, read_as: str) -> str:
        return f"binary content ({self.what}), not {read_as}: leave the file out of the input, or give it its format"


def sniff_text(data: bytes) -> Binary | tuple[str, str] | None:
    """What the bytes of a text file (or a record) are, from their first SNIFF_BYTES: `Binary`
    (a binary format's signature that no text starts with, NUL bytes, or more than 5% control
    bytes); UTF-16, with a byte order mark or told by its NUL bytes, as (its text, "utf-16-le" or
    "utf-16-be"); or None: bytes to decode as text usually is (UTF-8, a declared encoding)."""
    head = data[:SNIFF_BYTES]
    magic, signature = _signature(head)
    if signature and (magic == b"%PDF-" or any(b >= 0x80 or b < 0x20 and b not in b"\t\n\r" for b in magic)):
        return Binary(signature)
    has_nul = b"\x00" in head
    utf16 = _utf16(data, head) if has_nul or head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) else None
    if utf16 is not None:
        return utf16
    nuls = head.count(0) if has_nul else 0
    if nuls and nuls * _NUL_PER_BYTES >= len(head):
        return Binary(signature or f"{nuls} NUL bytes in its first {len(head):,}")
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if controls > _CONTROL_SHARE * len(head):
        return Binary(signature or f"{controls / len(head):.0%} of its first bytes are control characters")
    return None


_AT_START: dict[bytes, list[tuple[bytes, str]]] = {}  # the signatures at offset 0, by their first byte
for _at, _magic, _what in _SIGNATURES:
    if _at == 0:
        _AT_START.setdefault(_magic[:1], []).append((_magic, _what))
_FURTHER_IN = [(at, magic, what) for at, magic, what in _SIGNATURES if at]


def _signature(head: bytes) -> tuple[bytes, str | None]:
    """(the bytes, what) of the signature `head` starts with (or all of `head`, at least 3 bytes of
    a signature: the first line of a file, which a signature's own line feed cuts), else (b"", None)."""
    for magic, what in _AT_START.get(head[:1], ()):
        seen = magic[:len(head)]
        if len(seen) >= min(3, len(magic)) and head.startswith(seen):
            return seen, what
    for at, magic, what in _FURTHER_IN:
        if head.startswith(magic, at):
            return magic, what
    return b"", None


def _utf16(data: bytes, head: bytes) -> tuple[str, str] | None:
    for bom, name in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom) and not data.startswith(codecs.BOM_UTF32_LE):
            return _plain(data[2:].decode(name, "replace"), name)
    units = len(head) // 2
    even, odd = head[0:2 * units:2].count(0), head[1:2 * units:2].count(0)
    if not even + odd:
        return None
    ascii_utf16 = max(even, odd) * 2 >= units and min(even, odd) * 20 <= max(even, odd)
    if not ascii_utf16 and is_utf8(data):
        return None
    readings = []
    for name, nuls in (("utf-16-le", odd), ("utf-16-be", even)):
        try:
            text = data.decode(name)
        except UnicodeDecodeError:
            continue
        sample = text[:units]
        junk = _junk(sample)
        if "\x00" not in sample and junk <= _UTF16_JUNK * len(sample) \
                and _one_script_share(sample) >= _UTF16_ONE_SCRIPT:
            readings.append((junk, -nuls, name, text))
    if not readings:
        return None
    _, _, name, text = min(readings)
    return text, name


def _plain(text: str, name: str) -> tuple[str, str] | None:
    """(text, name), unless the decoded text holds NUL or too much junk (binary bytes that decode)."""
    head = text[:SNIFF_BYTES // 2]
    return None if "\x00" in head or _junk(head) > _CONTROL_SHARE * len(head) else (text, name)


def _one_script_share(text: str) -> float:
    """The share of `text` in ASCII, punctuation, digits, spaces and symbols, or letters and marks of
    its most common script (the first word of a character's Unicode name: LATIN, CYRILLIC, CJK...)."""
    neutral, scripts = 0, Counter()
    for c in text:
        if c < "\x80" or unicodedata.category(c)[0] in "PNZS":  # symbols: emoji, arrows, maths
            neutral += 1
        else:
            word = unicodedata.name(c, "?").split(" ", 1)[0]
            scripts[_SCRIPT_FAMILY.get(word, word)] += 1
    return (neutral + max(scripts.values(), default=0)) / max(1, len(text))


def _junk(text: str) -> int:
    """Characters no text holds: controls (but tab, line ends, form feed, escape), surrogates,
    private use, unassigned code points."""
    return sum(1 for c in text if (c < " " and c not in "\t\n\v\f\r\x1b")
               or (c >= "\x7f" and unicodedata.category(c) in ("Cc", "Cs", "Co", "Cn")))
