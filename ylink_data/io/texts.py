"""The texts of whatever a command trains on (`ylink quality train`, `ylink tokenizer train`), streamed
one document at a time: run folders (a folder holding manifest.json: its kept shards' `text`, read
through `open_run`, so the manifest is checked first) and input files, globs or URLs in any format
the pipeline reads (the same readers). HTML pages are reduced to their main text by the default
extractor, as the `extract` op does it: in a child process killed at its time limit, so a hostile page
is skipped, and counted, instead of holding training for minutes."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from ylink_data.io.input_config import InputConfig
from ylink_data.core.errors import InputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.timelimit import DocumentTimeout
from ylink_data.text.transform.extract import DEFAULT_EXTRACTOR
from ylink_data.text.transform.extract_process import DEFAULT_TIME_LIMIT_S, ExtractorFailed, ExtractorProcess
from ylink_data.core.storage import filesystem, join
from ylink_data.io.listing import expand_paths
from ylink_data.io.readers import Bad, Record, Skip, open_split, plan_splits, read_split

RUN_BATCH_ROWS = 1024  # rows of a run's shard read at a time: memory stays flat on any shard size


@dataclass
class Skipped:
    """What the training commands left out of their input and why, as a run's quarantine and drop
    counts would say it: records a reader could not read (a file over input.max_record_bytes, bytes
    that are not UTF-8, a corrupt document), records that are not documents (an empty file), HTML
    pages the extractor could not read (timeout, error). Counted by why, with the first of each."""

    counts: Counter = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)  # why -> "file@offset: error" of the first one

    def add(self, why: str, where: str, error: str = "") -> None:
        self.counts[why] += 1
        self.first.setdefault(why, f"{where}: {error}" if error else where)

    def describe(self, what: str) -> str:
        total = sum(self.counts.values())
        kinds = ", ".join(f"{n} {why} (first at {self.first[why]})" for why, n in self.counts.most_common(_KINDS_SHOWN))
        more = len(self.counts) - _KINDS_SHOWN
        return f"{what}: skipped {total} record(s): {kinds}" + (f", and {more} more kind(s)" if more > 0 else "")


_KINDS_SHOWN = 5
# A reader's error names offsets and sizes: "invalid UTF-8 at byte 17" and "... at byte 4" are one
# kind of problem, counted together.
_NUMBER = re.compile(r"(?<![\w-])\d+(?![\w-])")  # not the 8 of UTF-8


def _kind(item: Bad | Skip) -> str:
    if isinstance(item, Skip):
        return f"not a document ({item.reason})"
    return f"{item.reason}: {_NUMBER.sub('N', item.error)}"


def iter_texts(paths: list[str], *, storage_options: dict[str, Any] | None = None, what: str = "input",
               skipped: Skipped | None = None) -> Iterator[tuple[str, str]]:
    """(document key, text) of every document of `paths`, in order, one at a time. The key is
    `url@offset` for input records and `url#row` for a run's rows. Unreadable records are left out
    (a run would quarantine them), and so are records that are not documents; both, and HTML pages
    the extractor fails on, are counted in `skipped`. A
    path that names nothing is an InputError naming `what[i]`."""
    options = storage_options or {}
    skipped = skipped if skipped is not None else Skipped()
    with ExtractorProcess(DEFAULT_EXTRACTOR) as extractor:  # its process starts with the first HTML page
        for i, path in enumerate(paths):
            if _is_run(path, options):
                yield from _run_texts(path, options)
                continue
            try:
                files = expand_paths([path], lambda _: options)
            except InputError as exc:
                message = str(exc).split(": ", 1)[-1]  # drop expand_paths' "input.paths[0]" prefix
                raise InputError(f"{what}[{i}]: {message}") from None
            cfg = InputConfig(paths=[path])
            for split in plan_splits(files, cfg, lambda _: options):
                with open_split(split, options) as f:
                    for item in read_split(split, f, cfg):
                        where = f"{redact_url(split.url)}@{item.offset}"
                        if not isinstance(item, Record):
                            skipped.add(_kind(item), where)
                            continue
                        try:
                            text = _main_text(item, extractor)
                        except (DocumentTimeout, ExtractorFailed) as exc:
                            why = "timeout" if isinstance(exc, DocumentTimeout) else "error"
                            skipped.add(f"HTML page the extractor could not read ({why})", where, str(exc))
                            continue
                        yield f"{split.url}@{item.offset}", text


def _is_run(path: str, options: dict[str, Any]) -> bool:
    if any(c in path for c in "*?["):
        return False
    try:
        fs, root = filesystem(path, options)
        return fs.isdir(root) and fs.exists(join(root, "manifest.json"))
    except Exception:  # noqa: BLE001 -- not a folder we can look into: expand_paths says why
        return False


def _run_texts(path: str, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
    import pyarrow.parquet as pq

    from ylink_data.io.runs import open_run

    run = open_run(path, options)
    for shard in run.shard_paths:
        row = 0
        with run.open(shard) as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=RUN_BATCH_ROWS, columns=["text"]):
                for text in batch.column(0).to_pylist():
                    if text is not None:
                        yield f"{redact_url(shard)}#{row}", text
                    row += 1


def _main_text(record: Record, extractor: ExtractorProcess) -> str:
    """The record's text; an HTML page's main text, extracted within the extract op's time limit."""
    text = record.decoded()
    if "html" in str(record.metadata.get("content_type") or "").lower():
        return extractor.extract(text, record.url, DEFAULT_TIME_LIMIT_S)[0]
    return text
