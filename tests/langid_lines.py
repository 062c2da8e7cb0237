"""Short real lines (15-100 characters, the length of a review or a chat message) for language ID,
cut from the real corpora in ../shared/data (read there, never copied: most are research-only):

- Chinese: sentences of THUCNews news articles and of ChineseWebText Common Crawl pages (cut at
  。！？；!?; and line breaks); a line counts as Chinese when Han characters are at least half of
  its letters, which leaves out the English menus, numbers and URLs of the web pages.
- English: sentences of Reuters-21578 newswire articles (the headline a line of its own) and of
  the Project Gutenberg books (cut after
  . ! ? before a capital), kept by C4's line rule (Raffel et al. 2020, section 2.2: at least three
  words, ending in terminal punctuation), which leaves out Reuters' ticker headlines, tables and
  datelines.
- Japanese: the sentences of the one Japanese page of the trafilatura evaluation set (NHK News Web
  Easy), main text by the default extractor.

Used by tests/chaos/test_langid_short_chinese.py and bench/bench_langid_short.py.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

MIN_CHARS, MAX_CHARS = 15, 100
_ZH_END = re.compile(r"(?<=[。！？；!?;])|\n")
_EN_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z])")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z]+")
_TERMINAL = re.compile(r"[.!?][\"')\]]*$")


def _flat(text: str) -> str:
    return " ".join(text.split())


def chinese_lines(text: str) -> list[str]:
    out = []
    for piece in _ZH_END.split(text):
        line = _flat(piece)
        letters = sum(map(str.isalpha, line))
        if MIN_CHARS <= len(line) <= MAX_CHARS and letters and 2 * len(_HAN.findall(line)) >= letters:
            out.append(line)
    return out


def english_lines(text: str) -> list[str]:
    out = []
    for paragraph in re.split(r"\n\s*\n", text):
        for piece in _EN_END.split(paragraph):
            line = _flat(piece)
            if MIN_CHARS <= len(line) <= MAX_CHARS and len(_WORD.findall(line)) >= 3 and _TERMINAL.search(line):
                out.append(line)
    return out


def japanese_lines(text: str) -> list[str]:
    return [line for piece in _ZH_END.split(text) if MIN_CHARS <= len(line := _flat(piece)) <= MAX_CHARS]


def short_lines(shared: Path) -> dict[str, list[str]]:
    """{"<lang> <source>": lines} for zh (thucnews, chinesewebtext), en (reuters, gutenberg), ja (nhk)."""
    sets: dict[str, list[str]] = {}
    with open(shared / "zh_thucnews_cnews" / "cnews.val.txt", encoding="utf-8") as f:
        sets["zh thucnews"] = [line for row in f for line in chinese_lines(row.split("\t", 1)[1])]
    web = shared / "zh_chinesewebtext_quality"
    pages = [web / "2021-43" / "cleared1.jsonl", *sorted((web / "fasttext" / "data").glob("*.jsonl"))]
    docs = [json.loads(row) for path in pages for row in path.read_text(encoding="utf-8").splitlines()]
    sets["zh chinesewebtext"] = [line for d in docs for line in chinese_lines(d.get("raw_content") or d["text"])]
    with gzip.open(shared / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        articles = [json.loads(row)["text"].partition("\n") for row in f]  # (headline, "\n", body)
    sets["en reuters"] = [line for head, _, body in articles for line in english_lines(head) + english_lines(body)]
    books = sorted((shared / "en_gutenberg_nltk_raw").glob("*.txt"))
    sets["en gutenberg"] = [line for book in books
                            for line in english_lines(book.read_text(encoding="utf-8", errors="replace"))]
    sets["ja nhk"] = japanese_lines(_main_text(shared / "trafilatura_eval" / "tests" / "eval" / "nhk.or.jp.k100.html"))
    return sets


def _main_text(page: Path) -> str:
    from ylink_data.io.charset import decode_html
    from ylink_data.text.transform.extract import extract_text

    return extract_text(decode_html(page.read_bytes())[0])
