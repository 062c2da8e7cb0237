"""Global ops resolve against the `Workspace` interface alone (ops/workspace.py), not the engine:
every registered global op runs here on a workspace written for this test, over real Reuters
articles with planted exact copies, and hands back decision files in the documented format."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ylink_data.core.schema import DOCUMENT_SCHEMA
from ylink_data.ops import REGISTRY, GlobalOp, build_op, load_ops
from ylink_data.ops.workspace import DECISION_COLUMNS, Workspace, read_decisions

# Each global op with parameters that make it global (quality_classifier only with top_fraction).
GLOBAL_OPS = {"exact_dedup": {}, "minhash_dedup": {}, "quality_classifier": {"top_fraction": 0.5}}


@dataclass
class FolderWorkspace(Workspace):
    """A workspace over a local folder that runs its tasks in this process, one after the other."""

    root: Path
    parts: dict[int, list[str]]
    rows: dict[int, int]
    cpus: int = 1
    decisions: list[str] = field(default_factory=list)
    fs: Any = field(default_factory=lambda: fsspec.filesystem("file"))
    run_url: str = ""

    def run_tasks(self, fn: Callable, args_list: Sequence[tuple], label: str) -> list[Any]:
        return [fn(*args) for args in args_list]

    def storage_options(self, url: str) -> dict[str, Any]:
        return {}

    def key_column(self, name: str) -> str:
        return f"__key_{name}"

    def work_path(self, *parts: str) -> str:
        return str(self.root.joinpath("work", *parts))


def _articles(shared_data: Path, n: int) -> list[str]:
    with gzip.open(shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    return list(dict.fromkeys(t for t in texts if len(t) > 400))[:n]  # distinct articles only


def _task_tables(texts: list[str], tasks: int) -> list[pa.Table]:
    per = -(-len(texts) // tasks)
    out = []
    for t in range(tasks):
        chunk = texts[t * per:(t + 1) * per]
        columns = {f.name: pa.nulls(len(chunk), f.type) for f in DOCUMENT_SCHEMA}
        columns.update(id=pa.array([f"{t}-{i}" for i in range(len(chunk))]), text=pa.array(chunk, pa.large_string()),
                       lang=pa.array(["en"] * len(chunk)), source=pa.array(["reuters"] * len(chunk)))
        out.append(pa.table(columns, schema=DOCUMENT_SCHEMA))
    return out


def test_every_global_op_is_covered():
    load_ops()
    assert {name for name, cls in REGISTRY.items() if issubclass(cls, GlobalOp)} == set(GLOBAL_OPS)


@pytest.mark.parametrize("name", sorted(GLOBAL_OPS))
def test_a_global_op_resolves_against_any_workspace(name, shared_data, tmp_path):
    articles = _articles(shared_data, 300)
    copies = articles[:40:4]  # 10 articles planted again at the end, in another task
    texts = articles + copies
    op = build_op(name, GLOBAL_OPS[name])
    op.setup()
    tables = _task_tables(texts, 3)
    parts, rows = {}, {}
    for task, table in enumerate(tables):
        keyed = table
        for key, values in op.keys(table).items():
            keyed = keyed.append_column(f"__key_{key}", values)
        path = tmp_path / "parts" / f"task-{task}-0.parquet"
        path.parent.mkdir(exist_ok=True)
        pq.write_table(keyed, path)
        parts[task], rows[task] = [str(path)], table.num_rows
    workspace = FolderWorkspace(tmp_path, parts, rows)
    op.resolve(workspace)

    assert workspace.decisions
    reasons: dict[str, str] = {}
    for path in workspace.decisions:
        assert path.startswith(str(tmp_path / "work" / "decisions")) and path.endswith(".parquet")
        table = pq.read_table(path)
        assert tuple(table.column_names[:3]) == DECISION_COLUMNS
        keys = list(zip(table.column("task").to_pylist(), table.column("row").to_pylist()))
        assert keys == sorted(keys)
    for task, table in enumerate(tables):
        decided = read_decisions(workspace.fs, workspace.decisions, task)
        ids = table.column("id").to_pylist()
        for row, reason in decided.reasons.items():
            assert reason == name or reason.startswith(f"{name}:"), reason
            reasons[ids[row]] = reason
    by_text = dict(zip((i for t in tables for i in t.column("id").to_pylist()), texts))
    dropped_texts = [by_text[i] for i in reasons]
    if name == "quality_classifier":  # the lower half of the scores, ties kept together
        assert 0.3 * len(texts) <= len(reasons) <= 0.7 * len(texts)
    else:  # each planted copy is removed once; the first of each text is kept
        kept_texts = [t for i, t in by_text.items() if i not in reasons]
        assert sorted(copies) == sorted(t for t in dropped_texts if t in copies)
        assert set(copies) <= set(kept_texts)
        if name == "exact_dedup":  # brute force: exactly the repeats, nothing else
            assert sorted(dropped_texts) == sorted(copies)
