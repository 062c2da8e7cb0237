"""`input.paths_from`: a file listing one input path a line, the way Common Crawl publishes each
dump's `warc.paths.gz` and `wet.paths.gz` (~90k relative lines, `crawl-data/CC-MAIN-.../...`).

The list is read as a stream, line by line through gzip when its name ends in .gz, so a list of any
length costs one line of memory while it is read. Blank lines and `#` comments are skipped; relative
lines are joined to `input.paths_base`.

The list is an input file like any other (issue 39 point 11): a local one must be a regular file
(io/entries.py: a FIFO would wait forever for a writer, /dev/zero never ends, a folder or a dangling
link holds no list), and what it holds is bounded: a line of at most `MAX_LINE_BYTES` (a path is at
most 4,096 bytes, a signed URL a few thousand) and at most `MAX_LIST_BYTES` in all (a Common Crawl
dump's list is 10 MB unpacked), so that no list, unpacked or not, grows a run's memory without end.
Every refusal is one line naming the list, and the line.
"""
from __future__ import annotations

import gzip
import io
import os
from typing import IO, Iterator

import fsspec.spec

from ylink_data.core.errors import InputError
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import filesystem, is_local, join
from ylink_data.io.entries import classify

MAX_LINE_BYTES = 64 << 10
MAX_LIST_BYTES = 256 << 20


def listed_paths(list_url: str, base: str | None, storage_options_for) -> Iterator[tuple[int, str]]:
    """(line number, path) of every path `list_url` lists, relative lines joined to `base`."""
    fs, path = filesystem(list_url, storage_options_for(list_url))
    shown = redact_url(list_url)
    if is_local(fs):
        try:
            skipped = classify(path)
        except InputError as exc:  # a dangling link, a loop, no permission, a name that is not UTF-8
            raise InputError(f"input.paths_from: {exc}") from None
        if skipped is not None:
            raise InputError(f"input.paths_from: {shown} is {skipped.what()}, not a file listing paths; name a "
                             "regular file (plain or .gz), one path or URL a line")
    with fs.open(path, "rb") as opened:
        # remote files lack readline(limit): a standard buffered reader gives it
        raw = io.BufferedReader(opened) if isinstance(opened, fsspec.spec.AbstractBufferedFile) else opened
        stream = gzip.GzipFile(fileobj=raw) if list_url.split("?")[0].endswith(".gz") else raw
        for number, entry in _lines(stream, shown):
            if entry and not entry.startswith("#"):
                yield number, with_base(entry, base)


def _lines(stream: IO[bytes], shown: str) -> Iterator[tuple[int, str]]:
    """(number, stripped text) of each line, each read with a bound, and the whole list bounded."""
    total = 0
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        total += len(line)
        if len(line) > MAX_LINE_BYTES:
            raise InputError(f"input.paths_from: {shown} line {number} is longer than {MAX_LINE_BYTES:,} bytes, "
                             "which no path or URL is: is it a list of paths, one a line?")
        if total > MAX_LIST_BYTES:
            raise InputError(f"input.paths_from: {shown} holds more than {MAX_LIST_BYTES >> 20} MiB of paths "
                             f"(at line {number}); split it into lists for several runs")
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"input.paths_from: {shown} line {number} is not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start}): is it a list of paths, one a line?") from None
        yield number, text.strip()


def with_base(entry: str, base: str | None) -> str:
    """`entry` joined to `base` when it is relative (no scheme, no leading /): a URL prefix is joined
    with one "/", a local folder as a path."""
    if base is None or "://" in entry or entry.startswith("/"):
        return entry
    return join(base, entry) if "://" in base else os.path.join(base, entry)
