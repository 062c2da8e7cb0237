"""ylink-data: raw web crawls in, clean, deduplicated, quality-scored training corpora out, on Ray."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ylink_data.core.version import __version__

# The public names load on first use (PEP 562): `import ylink_data` stays light for a child process
# that imports one module of the package (extract's), a notebook and every `ylink` command.
_PUBLIC = {"run": ".engine.runner", "RunResult": ".engine.runner", "open_run": ".io.runs", "Run": ".io.runs",
           "write_report": ".report", "preview_op": ".explore", "sample_rejected": ".explore"}

if TYPE_CHECKING:
    from ylink_data.explore import preview_op, sample_rejected
    from ylink_data.engine.runner import RunResult, run
    from ylink_data.report import write_report
    from ylink_data.io.runs import Run, open_run


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'ylink_data' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


__all__ = ["run", "open_run", "Run", "RunResult", "write_report", "sample_rejected", "preview_op", "__version__"]
