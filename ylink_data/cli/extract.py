"""`ylink extract [FILE or -] [--url URL] [--extractor NAME] [--time-limit S]`: one page's main text on
stdout, decoded and extracted exactly as a pipeline's `extract` op would (in a child process killed
at the op's time limit), to see what a page will contribute."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ylink_data.core.errors import ConfigError, InputError, YlinkError
from ylink_data.io.charset import decode_html
from ylink_data.core.timelimit import DocumentTimeout
from ylink_data.text.transform.extract import DEFAULT_EXTRACTOR, EXTRACTOR_NAMES
from ylink_data.text.transform.extract_process import DEFAULT_TIME_LIMIT_S, ExtractorFailed, ExtractorProcess


def run_extract(args: argparse.Namespace) -> int:
    extractor = args.extractor or DEFAULT_EXTRACTOR
    if extractor not in EXTRACTOR_NAMES:
        raise ConfigError(f"--extractor: unknown extractor {extractor!r} (known: {', '.join(EXTRACTOR_NAMES)})")
    time_limit = DEFAULT_TIME_LIMIT_S if args.time_limit is None else args.time_limit
    if not time_limit > 0:
        raise ConfigError(f"--time-limit: give a number of seconds above 0, got {time_limit:g}")
    body = _read(args.file)
    html, _ = decode_html(body)
    with ExtractorProcess(extractor) as process:
        try:
            text, _ = process.extract(html, args.url, time_limit)
        except DocumentTimeout as exc:
            raise YlinkError(f"{_name(args.file)}: {exc} (--time-limit S allows more)") from None
        except ExtractorFailed as exc:
            raise YlinkError(f"{_name(args.file)}: the {extractor} extractor failed: {exc}") from None
    if not text:
        print(f"ylink: no main text found in {_name(args.file)} ({extractor})", file=sys.stderr)
        return 0
    # UTF-8 whatever the terminal's locale: a Chinese page must not fail on a latin-1 console.
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        print(text)
    else:
        sys.stdout.flush()
        out.write(text.encode("utf-8") + b"\n")
        out.flush()
    return 0


def _read(file: str) -> bytes:
    if file == "-":
        return sys.stdin.buffer.read()
    path = Path(file)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{file}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{file}: is a folder, not an HTML file") from None
    except PermissionError:
        raise InputError(f"{file}: permission denied") from None


def _name(file: str) -> str:
    return "stdin" if file == "-" else file
