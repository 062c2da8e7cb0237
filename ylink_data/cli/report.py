"""`ylink report RUN_DIR [-o FILE.html]`: a finished run as one self-contained HTML page with plots."""
from __future__ import annotations

import argparse

from ylink_data.core.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report of a finished run, with plots")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run's output folder (path or URL)")
    p.add_argument("-o", "--output", metavar="FILE.html", help="where to write it (default RUN_DIR/report.html)")
    p.add_argument("--samples", type=int, default=3, help="dropped documents shown per reason (default 3)")
    p.add_argument("--max-rows", type=int, default=100_000,
                   help="kept and dropped documents read for distributions, each (default 100,000)")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ylink_data.core.storage import filesystem
    from ylink_data.core.redaction import redact_text
    from ylink_data.report import write_report

    fs, root = filesystem(args.run_dir)
    if not fs.exists(root):
        raise InputError(f"{args.run_dir}: no such run folder")
    if args.samples < 0 or args.max_rows < 1:
        raise InputError("--samples must be 0 or more and --max-rows 1 or more")
    written = write_report(args.run_dir, args.output, samples_per_reason=args.samples, max_rows=args.max_rows)
    print(redact_text(written))
    return 0
