"""Main-text extraction with a hard time limit: the extractor runs in a child process, which is
killed when a page holds it too long.

A signal in the extracting process cannot bound extraction: the parsers and renderers are C++ and C
(lexbor in Resiliparse, libxml2 in trafilatura) and Python runs a SIGALRM handler only once they
return. A 1.1 MB page of 100,000 nested <div>s held Resiliparse for 483 s under a 5 s limit (time
grows with the square of the depth), and a <div> with 100,000 attributes takes 32 s, so no cheap
check of a page's shape bounds every page (bench/RESULTS.md, "Bounding extract's time per page").
A process can be killed at any instruction.

One child per `ExtractorProcess` (the extract op keeps one per worker process), reused for every
page: a page costs one round trip through two pipes. The child stops a page at the limit itself
with SIGALRM when the extractor is in Python code, and carries on with the next page; the parent
kills it `GRACE_S` later when it is stuck in C, and starts a new one (about 0.7 s, outside the next
page's limit).

The child is this module run as `python -m ylink_data.transform.extract_process EXTRACTOR`. Each
message is length-prefixed fields: requests `(url and limit pickled, html as UTF-8)`, replies
`((status, text or error, engine) pickled)` (unpickling a page's str cost more than the rest of the
round trip).
"""
from __future__ import annotations

import pickle
import subprocess
import sys
from multiprocessing.connection import wait  # poll(2): a worker may hold fds past select()'s 1024
from typing import BinaryIO

from ..errors import DocumentError
from ..io.pipes import receive, send, serve_stdio, start_child
from ..timelimit import DocumentTimeout, time_limit, timeout_message
from .extract import extract_with_engine, load_extractor

DEFAULT_TIME_LIMIT_S = 5.0  # per page; the slowest of the 990 evaluation pages: 0.07 s (hybrid), 0.3 s (trafilatura)
GRACE_S = 0.5  # after the limit, for the child's own alarm to answer before it is killed
_START_LIMIT_S = 120.0  # imports and warm-up, on a machine busy with other work


class ExtractorFailed(DocumentError):
    """The extractor raised on a page (the message is its error as in-process extraction would write
    it: "ValueError: ..."), or its process died on it."""


class ExtractorProcess:
    """Extracts pages with `extractor` in a child process started on first use and reused.
    `extract(html, url, time_limit_s)` raises DocumentTimeout (message "timeout: ...") when the
    page takes longer than `time_limit_s`, and returns or raises by `time_limit_s + GRACE_S`."""

    def __init__(self, extractor: str):
        self.extractor = extractor
        self._child: subprocess.Popen | None = None
        self._ready = False  # the child said it loaded its extractor

    def spawn(self) -> None:
        """Start the child without waiting for it: it loads its extractor (half a second) while
        this process reads the first pages."""
        if self._child is not None and self._child.poll() is None:
            return
        self.close()
        self._child = start_child(__name__, self.extractor)
        self._ready = False

    def start(self) -> None:
        """Start the child (unless `spawn` did) and wait until its extractor is loaded (also done by
        the first `extract`)."""
        self.spawn()
        if self._ready:
            return
        reply = self._reply(_START_LIMIT_S)
        if reply is None or reply[0] != "ready":
            self.close()
            why = f"did not start in {_START_LIMIT_S:g} s" if reply is None else f"failed to start: {reply[1]}"
            raise ExtractorFailed(f"the {self.extractor} extractor process {why}")
        self._ready = True

    def extract(self, html: str, url: str | None, time_limit_s: float) -> tuple[str, str]:
        """(main text, engine), as `extract_with_engine` gives them."""
        self.start()  # outside the limit: starting a child is not the page's time
        try:
            send(self._child.stdin, pickle.dumps((url, time_limit_s)), html.encode("utf-8", "surrogatepass"))
            reply = self._reply(time_limit_s + GRACE_S)
        except BrokenPipeError:  # the child died before it read the page
            reply = ("error", self._died(), None)
        except BaseException:  # interrupted mid-request (Ctrl-C, a signal's exception): the child's
            self.close()       # state is unknown, so the next page gets a new one
            raise
        if reply is None:  # stuck where its own alarm cannot reach (C code)
            self.close()
            raise DocumentTimeout(timeout_message(time_limit_s))
        status, message, engine = reply
        if status == "timeout":
            raise DocumentTimeout(message)
        if status != "ok":
            raise ExtractorFailed(message)
        return message, engine

    def _reply(self, timeout: float) -> tuple | None:
        """The child's next reply, or None if none came within `timeout` seconds."""
        out = self._child.stdout
        if not wait([out], timeout):
            return None
        try:
            (reply,) = receive(out, 1)
        except EOFError:
            return ("error", self._died(), None)
        return pickle.loads(reply)

    def _died(self) -> str:
        code = self._child.wait()
        self.close()
        return f"the {self.extractor} extractor process died (exit code {code})"

    def close(self) -> None:
        """Kill the child (a new one starts on the next `extract`)."""
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.wait()
            child.stdin.close()
            child.stdout.close()

    def __enter__(self) -> ExtractorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def _serve(extractor: str, requests: BinaryIO, replies: BinaryIO) -> None:
    """The child: extract each page sent until the parent closes the pipe."""
    load_extractor(extractor)
    send(replies, pickle.dumps(("ready", None, None)))
    while True:
        try:
            header, html = receive(requests, 2)
        except EOFError:  # the parent closed the pipe or exited
            return
        url, seconds = pickle.loads(header)
        try:
            with time_limit(seconds):
                text, engine = extract_with_engine(html.decode("utf-8", "surrogatepass"), url, extractor)
            reply = ("ok", text, engine)
        except DocumentTimeout as exc:
            reply = ("timeout", str(exc), None)
        except Exception as exc:  # reported for this page; the child carries on with the next
            reply = ("error", f"{type(exc).__name__}: {exc}", None)
        send(replies, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))


def _main() -> None:
    requests, replies = serve_stdio()
    _serve(sys.argv[1], requests, replies)


if __name__ == "__main__":
    _main()
