"""The JSONL files written beside the shards, on the run's side: `output.sft_format` (fine-tuning
pairs, io/sft.py), `output.preference_format` (preference pairs) and `output.prompts_format`
(prompt-only sets), both in TRL's layout (io/preference.py). Each publish task writes its shard's
rows as one file per kind (publish.py, `<kind>/part-NNNNN.jsonl`); the driver lists the files in a
manifest section per kind, which the one manifest reader checks (manifest.py)."""
from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from ylink_data.io.preference import preference_needed, prompts_needed, write_preference_jsonl, write_prompts_jsonl
from ylink_data.io.sft import needed_columns, write_sft_jsonl

# kind (manifest section and folder) -> (output key, the columns its records need, its writer)
KINDS: dict[str, tuple[str, Callable[[pa.Schema], list[str]], Callable[..., dict[str, Any]]]] = {
    "sft": ("sft_format", needed_columns, write_sft_jsonl),
    "preference": ("preference_format", preference_needed, write_preference_jsonl),
    "prompts": ("prompts_format", prompts_needed, write_prompts_jsonl),
}


def jsonl_formats(output: Any) -> dict[str, str]:
    """{kind: format} of the JSONL outputs an `output:` block asks for."""
    return {kind: getattr(output, key) for kind, (key, _, _) in KINDS.items() if getattr(output, key) is not None}


def jsonl_columns(schema: pa.Schema, formats: dict[str, str]) -> list[str]:
    """The columns of `schema` the asked-for JSONL files are made of."""
    wanted: list[str] = []
    for kind in formats:
        wanted += [c for c in KINDS[kind][1](schema) if c not in wanted]
    return wanted


def sft_section(fmt: str, files: list[dict[str, Any]], folder: str = "") -> dict[str, Any]:
    """A manifest section of one JSONL kind: {"format", "rows", "files": [{"path", "rows", "bytes",
    "sha256"}]}. With `folder` (a tier's), only its files, their paths relative to it."""
    if folder:
        files = [{**f, "path": f["path"][len(folder) + 1:]} for f in files if f["path"].startswith(folder + "/")]
    return {"format": fmt, "rows": sum(f["rows"] for f in files), "files": files}
