"""ylink-data: raw web crawls in, clean, deduplicated, quality-scored training corpora out, on Ray."""
from __future__ import annotations

__version__ = "0.1.0"

from .runs import Run, open_run  # noqa: E402
from .pipeline.runner import RunResult, run  # noqa: E402

__all__ = ["run", "open_run", "Run", "RunResult", "__version__"]
