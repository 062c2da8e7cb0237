"""`write_report(run_dir)`: a finished run as one self-contained HTML page with plots.

gather.py reads the run out of core (stats, shards, rejected/, quarantine/), plots.py draws inline
SVG with matplotlib, html.py lays out the page. The page loads nothing from anywhere.
"""
from __future__ import annotations

from typing import Any

from ylink_data.core.storage import atomic_write, filesystem, join
from ylink_data.io.runs import Run, open_run


def write_report(run_dir: str | Run, output: str | None = None, *, samples_per_reason: int = 3,
                 max_rows: int = 100_000, storage_options: dict[str, Any] | None = None) -> str:
    """Write the report of the finished run `run_dir` (a path, URL or `open_run` result) to `output`
    (default `RUN_DIR/report.html`) and return its path. Distributions use at most `max_rows` kept
    and `max_rows` dropped documents; each drop reason shows `samples_per_reason` documents."""
    from ylink_data.report.gather import gather
    from ylink_data.report.html import render

    run = run_dir if isinstance(run_dir, Run) else open_run(str(run_dir), storage_options)
    page = render(gather(run, samples_per_reason=samples_per_reason, max_rows=max_rows))
    if output is None:
        fs, path, output = run.fs, join(run.root, "report.html"), join(run.url.rstrip("/"), "report.html")
    else:
        fs, path = filesystem(output, storage_options)
    with atomic_write(fs, path) as f:
        f.write(page.encode("utf-8"))
    return output


__all__ = ["write_report"]
