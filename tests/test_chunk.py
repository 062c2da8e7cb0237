"""chunk: real English Markdown (docling's reference conversions of real PDFs and DOCX) and real
Chinese news (THUCNews) cut into chunks within the size, with the overlap asked for, never inside a
sentence, the chunks without their overlap joining back into the text; heading paths hand-checked;
then through a real pipeline (chunk, exact_dedup, keep_rejected) stopped and resumed byte-identically."""
from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
import yaml

import ylink_data
from ylink_data.engine.stats import check_invariant
from ylink_data.ops import build_op
from ylink_data.ops.base import Document
from ylink_data.ops.chunk import page_range
from ylink_data.text.tokens.load import load_tokenizer
from ylink_data.text.transform.chunking import chunk_text

from .conftest import REPO
from .test_resume import _ylink_run  # the CLI in a subprocess, YLINK_FAIL_AFTER_TASKS set or not

TOKENIZER = REPO / "samples" / "chat" / "tokenizer.json"  # a real byte-level BPE (samples/chat/SOURCE.md)
SENTENCE_ENDS = tuple(".!?…。！？；")
CHINESE_ENDS = tuple("。！？；")
CLOSERS = "\"'”’」』》）)]"


def _english(shared) -> list[str]:
    docling = shared / "documents" / "pdf" / "docling"
    return [(docling / n).read_text() for n in ("multi_page.md", "redp5110_sampled.md", "code_and_formula.md")]


def _chinese(shared, n: int = 40) -> list[str]:
    """The first n articles of THUCNews' validation file (one per line: category, tab, text)."""
    with open(shared / "zh_thucnews_cnews" / "cnews.val.txt", encoding="utf-8") as f:
        return [next(f).split("\t", 1)[1].rstrip("\n") for _ in range(n)]


def _ends_a_sentence(text: str, end: int) -> bool:
    """Whether `end` is a place a chunk may end (checked here without the chunker's regexes): the
    end of the text, after a line break, or after a sentence's end with its closing quotes (and
    the spaces after it)."""
    if end == len(text) or text[end - 1] == "\n":
        return True
    window = text[max(0, end - 64):end]
    before = window.rstrip(" \t")
    spaced = len(before) < len(window)  # "3.5" and "HR_SCHEMA.MASK" go on: English ends need a space
    return before.rstrip(CLOSERS).endswith(SENTENCE_ENDS if spaced else CHINESE_ENDS)


def _ends_well(text: str, begin: int, end: int, size: int, measure) -> bool:
    """A chunk [begin, end) ends at a sentence's end, or inside a sentence only if that sentence
    alone is larger than the size, and then after a space when its part in the chunk has any."""
    if _ends_a_sentence(text, end):
        return True
    start = next((e for e in range(end - 1, 0, -1) if _ends_a_sentence(text, e)), 0)
    stop = next(e for e in range(end + 1, len(text) + 1) if _ends_a_sentence(text, e))
    sentence = text[start:stop]
    part = text[max(start, begin):end]
    return measure(sentence) > size and (text[end - 1].isspace() or not any(ch.isspace() for ch in part))


def _check(text: str, chunks, size: int, overlap: int, measure=len) -> None:
    assert chunks and [c.index for c in chunks] == list(range(len(chunks)))
    # the chunks without their overlap are the text
    assert "".join(text[c.body_start:c.end] for c in chunks) == text
    for prev, c in zip([None, *chunks], chunks):
        assert measure(text[c.start:c.end]) <= size
        assert _ends_well(text, c.body_start, c.end, size, measure), repr(text[c.end - 40:c.end + 10])
        if prev is None or prev.heading_path != c.heading_path:
            assert c.start == c.body_start  # no overlap across a heading
            continue
        assert c.start >= prev.start and prev.end == c.body_start
        assert measure(text[c.start:c.body_start]) <= overlap
        if c.start < c.body_start:  # the overlap starts where a sentence starts
            assert _ends_a_sentence(text, c.start), repr(text[c.start - 30:c.start + 10])


@pytest.mark.parametrize("size,overlap", [(400, 80), (1000, 200), (3000, 0)])
def test_english_markdown_chunks(shared_data, size, overlap):
    for text in _english(shared_data):
        chunks = chunk_text(text, size, overlap)
        _check(text, chunks, size, overlap)
        if overlap >= 200:  # most chunks inside long sections carry some overlap (English sentences
            # are often longer than 80 characters: then no whole sentence fits and there is none)
            inner = [c for p, c in zip(chunks, chunks[1:]) if p.heading_path == c.heading_path]
            assert sum(c.start < c.body_start for c in inner) >= len(inner) // 2


@pytest.mark.parametrize("size,overlap", [(120, 30), (300, 60)])
def test_chinese_news_chunks(shared_data, size, overlap):
    for text in _chinese(shared_data):
        chunks = chunk_text(text, size, overlap)
        _check(text, chunks, size, overlap)
        assert len(chunks) >= len(text) // size


def test_sizes_in_tokens(shared_data):
    tok = load_tokenizer(str(TOKENIZER)).tokenizer

    def tokens(s: str) -> int:
        return len(tok.encode(s, add_special_tokens=False).ids)

    for text in _english(shared_data) + _chinese(shared_data, 10):
        _check(text, chunk_text(text, 128, 32, tokens), 128, 32, tokens)
    op = build_op("chunk", {"size": 128, "overlap": 32, "unit": "tokens", "tokenizer": str(TOKENIZER)})
    rows = op.split(Document("d", _english(shared_data)[0]))
    assert max(tokens(r["text"]) for r in rows) <= 128 < max(len(r["text"]) for r in rows)


def test_one_long_sentence_is_cut_at_spaces_or_characters(shared_data):
    text = max(_english(shared_data)[0].split("\n\n"), key=len)  # a real paragraph...
    sentence = text.replace(". ", ", ").replace(".\n", ", ").replace("\n", " ").rstrip(".")  # ...made one sentence
    chunks = chunk_text(sentence, 100, 0)
    assert "".join(sentence[c.start:c.end] for c in chunks) == sentence and len(chunks) > 3
    assert all(sentence[c.end - 1] == " " for c in chunks[:-1])  # at a space, every word whole
    zh = "".join(_chinese(shared_data, 1)).replace("。", "，")
    chunks = chunk_text(zh, 50, 0)
    assert all(c.end - c.start <= 50 for c in chunks) and "".join(zh[c.start:c.end] for c in chunks) == zh


def test_heading_paths_hand_checked(shared_data):
    text = (shared_data / "documents" / "docx" / "docling" / "unit_test_headers.docx.md").read_text()
    chunks = chunk_text(text, 60, 0)
    got = [(c.heading_path, text[c.start:c.end].strip().split("\n")[0]) for c in chunks]
    doc, s1, s2 = "Test Document", "Section 1", "Section 2"
    assert got == [
        ((doc, s1), "# Test Document"),  # the title has no text of its own: it opens the first section
        ((doc, s1), "Paragraph 1.2"),  # 61 characters with Paragraph 1.2: cut at the paragraph
        ((doc, s1, "Section 1.1"), "### Section 1.1"),
        ((doc, s1, "Section 1.2"), "### Section 1.2"),
        ((doc, s1, "Section 1.2", "Section 1.2.3"), "#### Section 1.2.3"),
        ((doc, s2), "## Section 2"),
        ((doc, s2, "Section 2.1.1"), "#### Section 2.1.1"),  # a level skipped
        ((doc, s2, "Section 2.1"), "### Section 2.1"),  # a higher level closes the deeper one
    ]
    assert text[chunks[0].start:chunks[0].end] == "# Test Document\n\n## Section 1\n\nParagraph 1.1\n\n"


def test_page_ranges_from_page_offsets():
    offsets = [0, 100, 250]  # pages 1, 2, 3 begin at these characters
    assert page_range(offsets, 0, 100) == (1, 1)
    assert page_range(offsets, 90, 101) == (1, 2)
    assert page_range(offsets, 100, 400) == (2, 3)
    op = build_op("chunk", {"size": 60, "overlap": 0})
    text = "First page. It ends here.\n\nSecond page starts. More of it. And more.\n"
    rows = op.split(Document("d", text, metadata={"page_offsets": [0, 27], "title": "T"}))
    assert [(r["page_start"], r["page_end"]) for r in rows] == [(1, 2), (2, 2)]
    assert rows[0]["metadata"] == {"title": "T"}  # the offsets are the document's, not the chunk's
    assert op.split(Document("e", "no pages")) [0]["page_start"] is None
    assert op.split(Document("f", " \n\n ")) == "empty"


def test_bad_parameters_name_the_key():
    from ylink_data.core.errors import ConfigError
    from ylink_data.ops import validate_stages

    with pytest.raises(ConfigError, match="overlap"):
        validate_stages([{"chunk": {"size": 100, "overlap": 100}}])
    with pytest.raises(ConfigError, match="tokenizer"):
        validate_stages([{"chunk": {"unit": "tokens"}}])
    with pytest.raises(ConfigError, match="size"):
        validate_stages([{"chunk": {"size": 0}}])


# ----------------------------------------------------------------------------- in a pipeline


def _documents(shared, folder) -> list[str]:
    """Real Markdown documents copied as .txt (the text reader: one document per file), one twice."""
    folder.mkdir()
    names = []
    for kind in ("pdf", "docx", "pptx"):
        for md in sorted((shared / "documents" / kind / "docling").glob("*.md")):
            shutil.copy(md, folder / f"{kind}-{md.name}.txt")
            names.append(f"{kind}-{md.name}.txt")
    shutil.copy(folder / "pdf-multi_page.md.txt", folder / "zz-copy-of-multi_page.md.txt")
    return names


def _config(inputs, out) -> dict:
    return {"name": "chunks", "input": {"paths": [str(inputs)], "format": "text", "split_bytes": 2048},
            "output": {"path": str(out), "keep_rejected": True},
            "stages": [{"chunk": {"size": 500, "overlap": 100}}, {"exact_dedup": {}}]}


def test_chunks_then_exact_dedup_resumed_byte_identically(shared_data, ray_session, tmp_path):
    inputs = tmp_path / "docs"
    names = _documents(shared_data, inputs)
    reference = ylink_data.run(_config(inputs, tmp_path / "reference"))
    stats = reference.stats
    chunk, dedup = stats["stages"][1], stats["stages"][2]

    # expected chunks, computed from the files with the chunker alone
    texts = {n: (inputs / n).read_text() for n in [*names, "zz-copy-of-multi_page.md.txt"]}
    expected = {n: chunk_text(t, 500, 100) for n, t in texts.items() if t.strip()}
    total = sum(map(len, expected.values()))
    assert chunk["in"] == len(expected) and chunk["out"] == total
    assert chunk["created"] == total - len(expected) > 0
    copy = len(expected["zz-copy-of-multi_page.md.txt"])
    # duplicates: every chunk of the copy, and chunks repeated in the documents themselves (an
    # `<!-- image -->` alone...): texts seen before, whitespace collapsed as exact_dedup does
    seen, dup, first = set(), 0, {}
    for name in sorted(expected):
        for c in expected[name]:
            key = " ".join(texts[name][c.start:c.end].split())
            dup += key in seen
            if key not in seen:
                first.setdefault(name, []).append(c)
            seen.add(key)
    assert dup > copy
    assert dedup["dropped"] == {"exact_dedup": dup}
    assert stats["created"] == chunk["created"] and stats["output_records"] == total - dup
    assert check_invariant(stats) is None
    assert stats["input_records"] + stats["created"] == stats["output_records"] + sum(
        sum(s["dropped"].values()) for s in stats["stages"]) + stats["quarantined"]

    run = ylink_data.open_run(reference.path)
    kept = run.to_arrow()
    rows = kept.to_pylist()
    assert len({r["id"] for r in rows}) == len(rows)
    by_file = {}
    for r in rows:
        by_file.setdefault(r["source"].rsplit("/", 1)[-1], []).append(r)
    assert "zz-copy-of-multi_page.md.txt" not in by_file and set(by_file) == set(first)
    for name, chunks in first.items():
        got = by_file[name]
        assert [r["text"] for r in got] == [texts[name][c.start:c.end] for c in chunks]
        assert [r["chunk_index"] for r in got] == [c.index for c in chunks]
        assert [r["heading_path"] for r in got] == [list(c.heading_path) for c in chunks]
        assert [r["id"] for r in got] == [f"{got[0]['id'].rsplit('#', 1)[0]}#{c.index}" for c in chunks]
    rejected = run.rejected("exact_dedup")
    assert rejected.num_rows == dup
    assert rejected.column("source").to_pylist().count(str(inputs / "zz-copy-of-multi_page.md.txt")) == copy

    # the report's books and funnel say how many rows the chunker made
    from ylink_data.report import write_report

    page = (tmp_path / "reference" / "report.html")
    write_report(run)
    report = page.read_text()
    assert f"{stats['created']:,} created by ops that make several rows of one document" in report
    assert '<th class="">in</th><th class="">created</th>' in report  # the funnel's column

    # stopped after 3 tasks, then resumed: the same bytes
    out = tmp_path / "resumed"
    config_path = tmp_path / "chunks.yaml"
    config_path.write_text(yaml.safe_dump(_config(inputs, out)))
    tasks = json.loads((tmp_path / "reference" / "run.json").read_text())["tasks"]
    assert tasks >= 10
    first = _ylink_run(config_path, fail_after=3)
    assert first.returncode == 75, first.stderr
    assert not (out / "manifest.json").exists()
    second = _ylink_run(config_path, fail_after=None)
    assert second.returncode == 0, second.stderr
    assert "resuming" in second.stderr
    resumed = ylink_data.open_run(str(out))
    assert [s["sha256"] for s in resumed.manifest["shards"]] == [s["sha256"] for s in run.manifest["shards"]]
    assert resumed.to_arrow().equals(kept)
    assert resumed.rejected().sort_by("id").equals(run.rejected().sort_by("id"))
    drop_seconds = lambda s: {**{k: v for k, v in s.items() if k != "timing"},  # noqa: E731
                              "stages": [{k: v for k, v in x.items() if not k.endswith("seconds")} for x in s["stages"]]}
    assert drop_seconds(resumed.stats) == drop_seconds(stats)
    assert pq.read_table(out / resumed.manifest["shards"][0]["path"]).schema.field("heading_path").type.value_type == "string"
