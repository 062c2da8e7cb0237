"""`input.paths_from`: a file listing one input path a line, the way Common Crawl publishes each
dump's `warc.paths.gz` and `wet.paths.gz` (~90k relative lines, `crawl-data/CC-MAIN-.../...`).

The list is read as a stream, line by line through gzip when its name ends in .gz, so a list of any
length costs one line of memory while it is read. Blank lines and `#` comments are skipped; relative
lines are joined to `input.paths_base`.
"""
from __future__ import annotations

import gzip
import io
import os
from typing import Iterator

from ylink_data.core.storage import filesystem, join


def listed_paths(list_url: str, base: str | None, storage_options_for) -> Iterator[tuple[int, str]]:
    """(line number, path) of every path `list_url` lists, relative lines joined to `base`."""
    fs, path = filesystem(list_url, storage_options_for(list_url))
    with fs.open(path, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw) if list_url.split("?")[0].endswith(".gz") else raw
        for number, line in enumerate(io.TextIOWrapper(stream, encoding="utf-8"), 1):
            entry = line.strip()
            if entry and not entry.startswith("#"):
                yield number, with_base(entry, base)


def with_base(entry: str, base: str | None) -> str:
    """`entry` joined to `base` when it is relative (no scheme, no leading /): a URL prefix is joined
    with one "/", a local folder as a path."""
    if base is None or "://" in entry or entry.startswith("/"):
        return entry
    return join(base, entry) if "://" in base else os.path.join(base, entry)
