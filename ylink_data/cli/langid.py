"""`ylink langid [FILE or -]`: one `LANG<TAB>SCORE` line per input line, as the input arrives.

Input is read with `os.read`, which returns whatever is available: typed or slowly piped lines are
answered at once, while a file or a fast pipe comes in 64 KB chunks whose complete lines go to
fastText in one call (much faster than a call per line). Nothing waits for the end of the input.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Iterator

from ylink_data.core.errors import InputError
from ylink_data.text.transform import langid

CHUNK = 1 << 16


def run_langid(args: argparse.Namespace) -> int:
    langid.load_model()  # a missing model is reported before any input is read
    if args.file == "-":
        return _answer(sys.stdin.fileno())
    try:
        fd = os.open(args.file, os.O_RDONLY)
    except OSError as exc:
        raise InputError(f"{args.file}: {exc.strerror}") from None
    try:
        return _answer(fd)
    except IsADirectoryError:
        raise InputError(f"{args.file}: is a folder; give a file of lines, or - for standard input") from None
    finally:
        os.close(fd)


def _answer(fd: int) -> int:
    try:
        for lines in line_batches(fd):
            codes, scores = langid.predict(lines)
            sys.stdout.write("".join(f"{code}\t{score:.4f}\n" for code, score in zip(codes, scores)))
            sys.stdout.flush()
    except BrokenPipeError:  # `ylink langid big.txt | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def line_batches(fd: int, chunk: int = CHUNK) -> Iterator[list[str]]:
    """The complete lines (UTF-8, bad bytes replaced, line ends removed) of each read from `fd`; a
    last line without a newline comes at the end of the input."""
    pending = bytearray()
    while data := os.read(fd, chunk):
        pending += data
        end = pending.rfind(b"\n")
        if end < 0:
            continue
        lines = bytes(pending[:end]).split(b"\n")
        del pending[:end + 1]
        yield [line.rstrip(b"\r").decode("utf-8", "replace") for line in lines]
    if pending:
        yield [bytes(pending).rstrip(b"\r").decode("utf-8", "replace")]
