"""Issue 13, point 4: one bad file or record is quarantined, named with its offset, and the run goes on.

A zero-byte or garbage .parquet among other inputs ended the run with `phase 0 task 0
(first.warc.gz, ...) failed: ArrowInvalid`, naming another file; a JSONL line holding a lone
surrogate escape ("\\ud83d", valid JSON) stopped every rerun with UnicodeEncodeError. `ylink
inspect` crashed on both.
"""
from __future__ import annotations

import errno
import gzip
import io
import json
import os
import subprocess
import sys

import fsspec
import fsspec.implementations.memory
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.io.input_config import InputConfig
from ylink_data.core.errors import InputError
from ylink_data.io.readers import Bad, Record, Split, read_split
from ylink_data.io.readers import jsonl as jsonl_reader
from ylink_data.engine.runner import Runner
from ylink_data.engine.stats import check_invariant
from ylink_data.engine.tasks import TaskSpec, execute_task
from ylink_data.core.schema import document_id

from ..conftest import REPO, SAMPLES, TEST_DATA
from .test_readers_everywhere import first_html_page

SPLIT_BYTES = 20_000  # the garbage Parquet file is larger: planning reads its footer


def real_lines() -> list[bytes]:
    return gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes()).splitlines(keepends=True)


def real_parquet(lines: list[bytes]) -> bytes:
    rows = [json.loads(line) for line in lines]
    out = io.BytesIO()
    pq.write_table(pa.table({"text": [r["text"] for r in rows], "url": [r["metadata"]["url"] for r in rows]}),
                   out, row_group_size=4)
    return out.getvalue()


def parquet_with_invalid_utf8(lines: list[bytes], bad_rows: dict[int, str]) -> bytes:
    """A Parquet file of real rows, where each row of `bad_rows` holds a byte that is not UTF-8 in
    the named column. Arrow writes and reads such strings without checking them."""
    rows = [json.loads(line) for line in lines]
    columns = {"text": [r["text"] for r in rows], "url": [r["metadata"]["url"] for r in rows]}
    raw = {name: [v.encode() for v in values] for name, values in columns.items()}
    for row, name in bad_rows.items():
        raw[name][row] = raw[name][row][:5] + b"\xff" + raw[name][row][5:]
    table = pa.table({name: pa.array(values, pa.binary()).view(pa.string()) for name, values in raw.items()})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=4)
    return out.getvalue()


def with_escape(line: bytes, field: str, escape: bytes) -> bytes:
    """The line with a JSON escape inserted at the start of a string field's value."""
    key = f'"{field}":"'.encode()
    at = line.index(key) + len(key)
    return line[:at] + escape + line[at:]


@pytest.fixture
def bad_crawl(crawl_copy):
    """The sample crawl plus a zero-byte and a garbage (cut short) Parquet file, a good Parquet
    file, a .txt.gz cut short, an HTML page declaring Python's unicode-escape codec, a JSONL file
    of real lines, two of them holding a lone surrogate escape (in the text, in a nested metadata
    field) and one a valid surrogate pair, and a Parquet file two of whose rows hold a string that
    is not UTF-8. Returns the folder and what each added file must give."""
    lines = real_lines()
    parquet = real_parquet(lines)
    (crawl_copy / "good.parquet").write_bytes(parquet)
    (crawl_copy / "empty.parquet").write_bytes(b"")
    garbage = parquet[: len(parquet) * 2 // 3]  # a real file cut short: no footer
    assert len(garbage) > SPLIT_BYTES
    (crawl_copy / "garbage.parquet").write_bytes(garbage)
    lines[2] = with_escape(lines[2], "text", rb"\ud83d")
    lines[5] = with_escape(lines[5], "url", rb"\udc00")  # dolma keeps the url under metadata
    lines[7] = with_escape(lines[7], "text", rb"\ud83d\ude00")  # a pair: one valid character
    (crawl_copy / "surrogates.jsonl").write_bytes(b"".join(lines))
    text = gzip.compress(json.loads(lines[0])["text"].encode())
    (crawl_copy / "cut.txt.gz").write_bytes(text[: len(text) // 2])
    # A page whose <meta> names Python's unicode-escape codec (no browser knows it) decoded "\ud83d"
    # in its text to a lone surrogate: it is read as UTF-8, as browsers do.
    page = first_html_page()
    page = page.replace(b"<head>", b'<head><meta charset="unicode-escape">', 1).replace(b"<body", rb"\ud83d<body", 1)
    (crawl_copy / "escape.html").write_bytes(page)
    # A Parquet string that is not UTF-8 stopped the run with UnicodeDecodeError on every rerun.
    bad_rows = {3: "text", 6: "url"}
    (crawl_copy / "bad-utf8.parquet").write_bytes(parquet_with_invalid_utf8(real_lines(), bad_rows))
    offsets = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    bad_lines = {offsets[2], offsets[5]}
    return crawl_copy, {
        "bad": {(str(crawl_copy / "empty.parquet"), 0), (str(crawl_copy / "garbage.parquet"), 0),
                (str(crawl_copy / "cut.txt.gz"), 0),
                *((str(crawl_copy / "surrogates.jsonl"), o) for o in bad_lines),
                *((str(crawl_copy / "bad-utf8.parquet"), row) for row in bad_rows)},
        "kept": {document_id(str(crawl_copy / "surrogates.jsonl"), o) for o in offsets if o not in bad_lines}
        | {document_id(str(crawl_copy / "good.parquet"), row) for row in range(len(lines))}
        | {document_id(str(crawl_copy / "bad-utf8.parquet"), row) for row in range(len(lines)) if row not in bad_rows}
        | {document_id(str(crawl_copy / "escape.html"), 0)},
        "bad_columns": {row: column for row, column in bad_rows.items()},
    }


def _config(paths, out) -> dict:
    return {"name": "bad-inputs", "input": {"paths": paths, "split_bytes": SPLIT_BYTES},
            "output": {"path": str(out)}, "stages": []}


def test_bad_files_and_records_are_quarantined_and_the_run_goes_on(ray_session, bad_crawl, tmp_path):
    crawl, expected = bad_crawl
    added = {"good.parquet", "empty.parquet", "garbage.parquet", "surrogates.jsonl", "cut.txt.gz", "escape.html",
             "bad-utf8.parquet"}
    clean_inputs = [str(p) for p in sorted(crawl.iterdir()) if p.name not in added]
    _, clean = ylink_data.run(_config(clean_inputs, tmp_path / "clean"))

    out = tmp_path / "run"
    _, stats = ylink_data.run(_config([str(crawl)], out))
    assert (out / "manifest.json").exists()
    assert check_invariant(stats) is None
    dropped = sum(sum(s["dropped"].values()) for s in stats["stages"])
    assert stats["input_records"] == stats["output_records"] + dropped + stats["quarantined"]

    entries = [json.loads(line) for q in sorted((out / "quarantine").glob("*.jsonl"))
               for line in q.read_text().splitlines() if line.strip()]
    assert {(e["file"], e["offset"]) for e in entries} == expected["bad"] and len(entries) == len(expected["bad"])
    assert stats["quarantined"] == len(expected["bad"])
    by_file = {e["file"].rsplit("/", 1)[-1]: e["error"] for e in entries}
    assert "Parquet" in by_file["empty.parquet"] and "Parquet" in by_file["garbage.parquet"]
    assert "truncated or corrupt" in by_file["cut.txt.gz"]
    assert all("surrogate" in e["error"] for e in entries if e["file"].endswith(".jsonl"))
    utf8 = {e["offset"]: e["error"] for e in entries if e["file"].endswith("bad-utf8.parquet")}
    assert all(f"column {expected['bad_columns'][row]!r} of row {row}" in error and "UTF8" in error
               for row, error in utf8.items()), utf8

    # everything else is kept: the clean crawl's documents and every good row and line
    kept = set(ylink_data.open_run(str(out)).to_arrow(columns=["id"]).column("id").to_pylist())
    clean_ids = set(ylink_data.open_run(str(tmp_path / "clean")).to_arrow(columns=["id"]).column("id").to_pylist())
    assert len(clean_ids) == clean["output_records"] > 0
    assert kept == clean_ids | expected["kept"]


def _inspect(path) -> subprocess.CompletedProcess:
    # notes are printed unwrapped; a fixed width keeps the panels the same in any terminal
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", "inspect", str(path), "--limit", "100"],
                          capture_output=True, text=True, cwd=REPO, timeout=120, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize("name", ["empty.parquet", "garbage.parquet"])
def test_inspect_notes_an_unreadable_parquet_file(bad_crawl, name):
    crawl, _ = bad_crawl
    proc = _inspect(crawl / name)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if name in line]
    assert len(notes) == 1 and "Parquet" in notes[0], proc.stdout


def test_inspect_shows_the_good_lines_and_notes_the_bad_ones(bad_crawl):
    crawl, expected = bad_crawl
    proc = _inspect(crawl / "surrogates.jsonl")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if "lone surrogate" in line]
    offsets = sorted(o for f, o in expected["bad"] if f.endswith(".jsonl"))
    assert len(notes) == 2 and all(f"offset {o}" in n for o, n in zip(offsets, notes)), proc.stdout
    assert proc.stdout.count(" chars") == len(real_lines()) - 2  # one panel per good line


# ----------------------------------------------------------------------------- storage errors
# A read that fails in the storage (EIO from a disk; s3fs reports the errors it does not know as
# OSError(EIO)) was caught with the decompression and Parquet errors and quarantined the file as
# "corrupt" or "unreadable" for good: the task's marker kept the entry, and the rerun that would
# have read the file did not happen. It must fail the task instead, in one line, quarantining nothing.


class FailingFile(io.RawIOBase):
    """A file whose reads fail with EIO past `fail_at` bytes, as a disk's or s3fs's do."""

    def __init__(self, data: bytes, fail_at: int | None):
        self._data, self._fail_at, self._pos = data, fail_at, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        self._pos = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._data)}[whence] + pos
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        n = min(len(b), max(len(self._data) - self._pos, 0))
        if self._fail_at is not None and self._pos + n > self._fail_at:
            raise OSError(errno.EIO, "Input/output error")
        b[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        return n


class FailingFileSystem(fsspec.implementations.memory.MemoryFileSystem):
    """Files held in memory whose reads fail half-way while `failing` is set."""

    protocol = "failing"
    store: dict = {}  # its own files, not memory://'s
    pseudo_dirs = [""]
    failing = True

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(path.removeprefix("failing://"))

    def _open(self, path, mode="rb", **kwargs):
        if mode != "rb":
            return super()._open(path, mode, **kwargs)
        data = self.cat_file(path)
        return io.BufferedReader(FailingFile(data, len(data) // 2 if self.failing else None), 4096)


@pytest.fixture
def failing_fs():
    fsspec.register_implementation("failing", FailingFileSystem, clobber=True)
    FailingFileSystem.failing = True
    yield FailingFileSystem()
    FailingFileSystem.store.clear()


@pytest.mark.parametrize("name", ["docs.parquet", "docs.jsonl.gz", "doc.txt.gz", "crawl.warc.gz"])
def test_a_storage_error_fails_the_task_and_quarantines_nothing(failing_fs, tmp_path, name):
    lines = real_lines()
    data = {"docs.parquet": lambda: real_parquet(lines), "docs.jsonl.gz": lambda: gzip.compress(b"".join(lines)),
            "doc.txt.gz": lambda: gzip.compress(json.loads(lines[0])["text"].encode()),
            "crawl.warc.gz": lambda: (SAMPLES / "CC-MAIN-2020-34-excerpt.warc.gz").read_bytes()}[name]()
    failing_fs.pipe(f"/in/{name}", data)
    url = f"failing:///in/{name}"
    out = tmp_path / "out"
    cfg = load_config({"input": {"paths": [url]}, "output": {"path": str(out)}, "stages": []})
    plan = Runner(cfg).plan()
    spec = TaskSpec(cfg, plan.phases[0], 0, splits=plan.tasks[0])
    with pytest.raises(InputError) as failed:
        execute_task(spec)
    message = str(failed.value)
    assert "\n" not in message and url in message and "Errno 5" in message, message
    assert not (out / "quarantine").exists() or not any((out / "quarantine").iterdir())
    assert not out.joinpath("_work").exists() or not list(out.joinpath("_work").rglob("task-*.json"))

    FailingFileSystem.failing = False  # the storage is back: the rerun reads the file whole
    marker = execute_task(spec)
    assert marker["quarantined"] == 0 and sum(p["rows"] for p in marker["parts"]) > 0


# ----------------------------------------------------------------------------- surrogate pairs
# JSON written with ensure_ascii holds a valid surrogate pair for every emoji; each such line was
# parsed and then walked, every string of it encoded, to look for a lone surrogate. Only a line
# with an unpaired surrogate escape is walked now; what it finds still decides.


def _read_line(line: bytes) -> list:
    return list(read_split(Split("mem.jsonl", "jsonl", len(line)), io.BytesIO(line), InputConfig(paths=["unused"])))


def test_a_line_of_surrogate_pairs_is_kept_unchanged_without_the_walk(monkeypatch):
    obj = json.loads(real_lines()[0])
    obj["text"] += " 😀 naïve 👍🏽 𝄞"
    line = json.dumps(obj, ensure_ascii=True).encode() + b"\n"
    assert rb"\ud83d\ude00" in line and line.isascii()
    walked = []
    walk = jsonl_reader._lone_surrogate
    monkeypatch.setattr(jsonl_reader, "_lone_surrogate", lambda *args: walked.append(args) or walk(*args))
    items = _read_line(line)
    assert [type(i) for i in items] == [Record] and items[0].text == obj["text"]
    assert walked == []


@pytest.mark.parametrize("escapes, lone", [
    (rb"\\ud83d\ude00", True),  # an escaped backslash, "ud83d", then a lone low half
    (rb"\ud83d\\ude00", True),  # a lone high half, then an escaped backslash
    (rb"\ud83d\ud83d\ude00", True),
    (rb"\ud83d\ude00\ude00", True),
    (rb"\\\ud83d\ude00", False),  # an escaped backslash, then a pair
    (rb"\uD83D\uDE00", False),
])
def test_only_unpaired_surrogate_escapes_are_quarantined(escapes, lone):
    line = with_escape(real_lines()[0], "text", escapes)
    items = _read_line(line)
    assert len(items) == 1 and isinstance(items[0], Bad) == lone
    if lone:
        assert "lone surrogate" in items[0].error
    else:
        assert items[0].text.startswith(json.loads(b'"' + escapes + b'"'))
