"""ylink-data: raw web crawls in, clean, deduplicated, quality-scored training corpora out, on Ray."""
from __future__ import annotations

__version__ = "0.1.0"

from .runs import Run, open_run  # noqa: E402
from .pipeline.runner import RunResult, run  # noqa: E402
from .report import write_report  # noqa: E402
from .explore import preview_op, sample_rejected  # noqa: E402

__all__ = ["run", "open_run", "Run", "RunResult", "write_report", "sample_rejected", "preview_op", "__version__"]
