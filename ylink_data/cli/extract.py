"""`ylink extract [FILE or -] [--url URL] [--extractor NAME]`: one page's main text on stdout, decoded
and extracted exactly as a pipeline's `extract` op would, to see what a page will contribute."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError, InputError
from ..io.charset import decode_html
from ..transform.extract import DEFAULT_EXTRACTOR, EXTRACTOR_NAMES, extract_text


def run_extract(args: argparse.Namespace) -> int:
    extractor = args.extractor or DEFAULT_EXTRACTOR
    if extractor not in EXTRACTOR_NAMES:
        raise ConfigError(f"--extractor: unknown extractor {extractor!r} (known: {', '.join(EXTRACTOR_NAMES)})")
    body = _read(args.file)
    html, _ = decode_html(body)
    text = extract_text(html, args.url, extractor)
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
