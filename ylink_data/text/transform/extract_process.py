"""Main-text extraction with a hard time limit: the extractor runs in a child process
(`core/deadline.py`), which is killed when a page holds it too long.

The parsers and renderers are C++ and C (lexbor in Resiliparse, libxml2 in trafilatura): a 1.1 MB
page of 100,000 nested <div>s held Resiliparse for 483 s under a 5 s SIGALRM (time grows with the
square of the depth), and a <div> with 100,000 attributes takes 32 s, so no cheap check of a page's
shape bounds every page (bench/RESULTS.md, "Bounding extract's time per page").

One child per `ExtractorProcess` (the extract op keeps one per worker process), reused for every
page; a child killed at a page's limit is replaced by a new one (about 0.7 s, outside the next
page's limit). The child is this module run as `python -m ylink_data.text.transform.extract_process
EXTRACTOR`; a request is the page's URL (pickled) and its HTML as UTF-8, the reply its main text and
engine.
"""
from __future__ import annotations

import functools
import sys

from ylink_data.core.deadline import ChildFailed, DeadlineProcess, serve
from ylink_data.text.transform.extract import extract_with_engine, load_extractor

DEFAULT_TIME_LIMIT_S = 5.0  # per page; the slowest of the 990 evaluation pages: 0.07 s (hybrid), 0.3 s (trafilatura)


class ExtractorFailed(ChildFailed):
    """The extractor raised on a page (the message is its error as in-process extraction would write
    it: "ValueError: ..."), or its process died on it."""


class ExtractorProcess(DeadlineProcess):
    """Extracts pages with `extractor` in a child process started on first use and reused.
    `extract(html, url, time_limit_s)` raises DocumentTimeout (message "timeout: ...") when the
    page takes longer than `time_limit_s`, and returns or raises by `time_limit_s + GRACE_S`."""

    failure = ExtractorFailed

    def __init__(self, extractor: str):
        super().__init__(__name__, extractor, name=f"the {extractor} extractor process")
        self.extractor = extractor

    def extract(self, html: str, url: str | None, time_limit_s: float) -> tuple[str, str]:
        """(main text, engine), as `extract_with_engine` gives them."""
        return self.call(url, html.encode("utf-8", "surrogatepass"), time_limit_s)


def _load(extractor: str):
    load_extractor(extractor)
    return functools.partial(_extract, extractor)


def _extract(extractor: str, url: str | None, html: bytes) -> tuple[str, str]:
    return extract_with_engine(html.decode("utf-8", "surrogatepass"), url, extractor)


if __name__ == "__main__":
    serve(functools.partial(_load, sys.argv[1]))
