"""io/charset.py `sniff_text` at its edges: the binary bytes that decode as BOM-less UTF-16 (a hash
repeated, with a NUL byte in it: every 16-bit unit assigned, no junk code point) and the short
UTF-8 JSON line that a padding NUL made binary. Real UTF-16 text still decodes to its text."""
from __future__ import annotations

import hashlib
import json
import re

import pytest

from ylink_data.io.charset import Binary, sniff_text
from ylink_data.io.readers.base import Bad
from ylink_data.io.readers.jsonl import _not_text


def _patterns_with_a_nul(count: int) -> list[bytes]:
    """Hash digests (32 bytes) and pairs of them (64) that hold a NUL byte, as binary files hold."""
    found, seed = [], 0
    while len(found) < count:
        digest = hashlib.sha256(str(seed).encode()).digest()
        seed += 1
        if 0 in digest:
            found.append(digest if len(found) % 2 else digest + hashlib.sha256(digest).digest())
    return found


@pytest.mark.parametrize("pattern", _patterns_with_a_nul(200), ids=lambda p: p[:4].hex())
def test_a_repeated_binary_pattern_is_never_utf16_text(pattern):
    sniffed = sniff_text(pattern * 4096)
    assert sniffed is None or isinstance(sniffed, Binary), sniffed[0][:40]


@pytest.mark.parametrize("name", ["utf-16-le", "utf-16-be"])
def test_real_utf16_text_still_decodes(shared_data, name):
    news = (shared_data / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    emma = (shared_data / "en_gutenberg_nltk_raw" / "austen-emma.txt").read_text(encoding="utf-8")
    # A chat log: short Chinese lines, three emoji each (a fifth of its characters; before symbols
    # counted as neutral, a reading of it was no text).
    chat = "".join(f"{line}😀👍🎉\n" for line in re.split("[，。]", news[1].partition("\t")[2]) if line)
    for text in (news[0].partition("\t")[2], news[-1].partition("\t")[2], emma[:3000], emma[100_000:103_000], chat):
        assert sniff_text(text.encode(name)) == (text, name)


def test_an_odd_length_json_line_is_not_binary():
    """A JSON object without the text field, of odd length: the reader's "no text field" line, not
    "binary content (1 NUL bytes ...)" from the NUL that pads a UTF-16LE line."""
    for pad in range(40):
        line = (json.dumps({"body": "x" * (850 + pad)}) + "\n").encode()
        assert _not_text(line, 0) is None
    utf16 = (json.dumps({"text": "Emma Woodhouse, handsome, clever, and rich"}) + "\n").encode("utf-16-le")[:-1]
    bad = _not_text(utf16, 0)
    assert isinstance(bad, Bad) and "UTF-16-LE text" in bad.error
