"""`output.sft_format` on the run's side: each publish task writes its shard's question-answer rows
as fine-tuning JSONL (publish.py, io/sft.py); the driver lists the files in the manifests."""
from __future__ import annotations

from typing import Any


def sft_section(fmt: str, files: list[dict[str, Any]], folder: str = "") -> dict[str, Any]:
    """The manifest's `sft` section: {"format", "rows", "files": [{"path", "rows", "bytes", "sha256"}]}.
    With `folder` (a tier's), only its files, their paths relative to it."""
    if folder:
        files = [{**f, "path": f["path"][len(folder) + 1:]} for f in files if f["path"].startswith(folder + "/")]
    return {"format": fmt, "rows": sum(f["rows"] for f in files), "files": files}
