"""Publishing: what a run's tasks left in _work/ becomes the files of its folder, each by one publish
job that puts its files in place whole and records its manifest entry in a marker
(`_work/publish/<kind>-NNNNN.json`):

- `shards`: the final phase's parts as shards of about `shard_bytes` in data/ (each tier's in its
  folder), packed in task order, so shard contents depend on the input only (a part of 4 MiB or more
  is never rewritten: LINKED_PART_BYTES). The job writes the shard through every sink the run has
  (`ylink_data.io.sinks`: the Parquet shard, then its Megatron pair, its JSONL files...), and its
  marker records each sink's entry. A run or tier that keeps nothing gets one shard without rows,
  so that every reader of data/ (the dataset card, pandas, DuckDB) finds a table with its columns;
- `rejected`, `quarantine`: each file a task staged for those folders (`RunLayout.staged`).

Every Parquet file of one kind has one schema, the union of its files' (`publish_plan`): the stages'
rejected rows each carry their own evidence (minhash_dedup's `dup_of`), and `datasets` reads a
config of one schema. A file that has it already is linked; one that lacks columns is rewritten
with them null.

Nothing is written where readers list files but by a rename (core/storage.py: the run's files take
shape in `_work/staging/`), the driver sweeps what killed writers left before it publishes
(`RunLayout.sweep`), and the staged files stay until the manifest is written: a crash mid-publish
simply redoes a job, and a published run's folder holds exactly what its manifest lists
(`RunLayout.listing_problems`, checked at the end of every run)."""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.schema import DOCUMENT_SCHEMA
from ylink_data.core.storage import publish_copy, read_json, write_json
from ylink_data.io.layout import RunLayout
from ylink_data.io.manifest import SHARDS, TASK_FILES
from ylink_data.io.parquet import file_schema, rewrite, union_schema
from ylink_data.io.sinks import ShardOutput, Sink


# Merging parts into one shard rewrites them (inflate, re-encode, compress again: about what writing
# them cost) in one task, which runs while every other core waits: a part of this size or more is a
# shard of its own (hard-linked, no byte copied). Only smaller parts are merged, to spare readers a
# crowd of tiny files; a filter that keeps little leaves little to rewrite.
LINKED_PART_BYTES = 4 * 1024 * 1024
_FOOTER_READERS = 16  # footers read at once by the driver (an object store: one request each)


def pack_shards(parts: list[dict[str, Any]], shard_bytes: int) -> list[list[dict[str, Any]]]:
    """Consecutive parts into shards of at most `shard_bytes`; a part of min(shard_bytes,
    LINKED_PART_BYTES) or more alone."""
    alone = min(shard_bytes, LINKED_PART_BYTES)
    groups: list[list[dict[str, Any]]] = []
    size = 0
    for part in parts:
        if part["rows"] == 0:
            continue
        big = part["bytes"] >= alone
        if not groups or big or size + part["bytes"] > shard_bytes or groups[-1][-1]["bytes"] >= alone:
            groups.append([])
            size = 0
        groups[-1].append(part)
        size += part["bytes"]
    return groups


@dataclass(frozen=True)
class PublishJob:
    """One job of the publish phase: the `index`-th of its `kind` (a manifest section: "shards",
    "rejected", "quarantine"). A shard job has its `parts`, `sinks`, `tier` and `number` within the
    tier; a file job its task's `entry` ({"path" in the run folder, "rows", "bytes", "sha256"}) and
    `phase`. `schema`: what every Parquet file of its kind holds (None: a file that is not Parquet)."""

    layout: RunLayout
    kind: str
    index: int
    schema: pa.Schema | None = None
    compression: str = "zstd"
    parts: list[dict[str, Any]] = field(default_factory=list)
    sinks: list[Sink] = field(default_factory=list)
    tier: str | None = None
    number: int = 0
    entry: dict[str, Any] = field(default_factory=dict)
    phase: int = 0

    @property
    def marker(self) -> str:
        return self.layout.publish_marker("part" if self.kind == SHARDS else self.kind, self.index)


def publish_plan(layout: RunLayout, markers: dict[int, dict[int, dict]], sinks: list[Sink],
                 tiers: list[str | None], shard_bytes: int, compression: str) -> list[PublishJob]:
    """Every job of the publish phase, from the tasks' markers by phase (the last is the final
    phase's): the shards of each tier in turn, then the rejected/ and quarantine/ files in phase and
    task order. Deterministic: a resumed run plans the same jobs."""
    final = markers[max(markers)]
    parts = [p for _, m in sorted(final.items()) for p in m["parts"]]
    dropped = {c for sink in sinks for c in sink.dropped_columns()}
    schemas = _schemas(layout, [p["path"] for p in parts])
    kept = union_schema(schemas, "the run's kept parts") if schemas else DOCUMENT_SCHEMA
    kept = pa.schema([f for f in kept if f.name not in dropped])
    jobs = []
    for tier in tiers:
        groups = pack_shards([p for p in parts if p.get("tier") == tier], shard_bytes) or [[]]
        jobs += [PublishJob(layout, SHARDS, len(jobs) + k, kept, compression, group, sinks, tier, k)
                 for k, group in enumerate(groups)]
    for kind in TASK_FILES:
        entries = [(phase, entry) for phase in sorted(markers) for _, m in sorted(markers[phase].items())
                   for entry in m[kind]]
        schema = None
        if kind == "rejected" and entries:
            schema = union_schema(_schemas(layout, [layout.staged(phase, e["path"]) for phase, e in entries]),
                                  "the run's rejected files")
        jobs += [PublishJob(layout, kind, i, schema, compression, entry=entry, phase=phase)
                 for i, (phase, entry) in enumerate(entries)]
    return jobs


def recorded(layout: RunLayout, jobs: list[PublishJob]) -> dict[str, dict[str, Any]]:
    """{marker: entry} of the jobs a previous attempt did (one listing of the markers' folder)."""
    folder = layout.work("publish")
    present = {p.rstrip("/").rsplit("/", 1)[-1] for p in layout.fs.ls(folder, detail=False)} \
        if layout.fs.exists(folder) else set()
    done = {}
    for job in jobs:
        if job.marker.rsplit("/", 1)[-1] in present:
            with contextlib.suppress(FileNotFoundError, ValueError):  # an unreadable marker: the job is redone
                done[job.marker] = read_json(layout.fs, job.marker)
    return done


def _schemas(layout: RunLayout, paths: list[str]) -> list[pa.Schema]:
    with ThreadPoolExecutor(_FOOTER_READERS) as pool:
        return list(pool.map(lambda path: file_schema(layout.fs, path), paths))


def publish(job: PublishJob) -> dict[str, Any]:
    """Do one publish job (in a task) and record its entry in its marker; returns the entry."""
    with job.layout.writing():
        entry = _publish_shard(job) if job.kind == SHARDS else _publish_file(job)
        write_json(job.layout.fs, job.marker, entry)
    return entry


def _publish_shard(job: PublishJob) -> dict[str, Any]:
    """Shard `job.index` of the run, or with a tier, shard `job.number` of that tier: its Parquet file
    and every other sink's files of it (Parquet first). Its entry is the Parquet shard's, with each
    other sink's entry under its name. A shard without rows is a Parquet file only."""
    layout, sinks = job.layout, job.sinks if job.parts else [s for s in job.sinks if s.name == SHARDS]
    shard = ShardOutput(layout.fs, layout.root, job.tier, job.index if job.tier is None else job.number, job.parts,
                        _companion_tables(layout, job.parts, sinks),
                        tuple(c for sink in sinks for c in sink.dropped_columns()), job.schema)
    entry: dict[str, Any] = {}
    for sink in sinks:
        written = sink.write(shard)
        if sink.name == SHARDS:
            entry.update(written)
        else:
            entry[sink.name] = written
    return entry


def _publish_file(job: PublishJob) -> dict[str, Any]:
    """A file a task staged, in place: linked as it is, or (a Parquet file without every column of
    `job.schema`) rewritten with them."""
    layout, rel = job.layout, job.entry["path"]
    staged, target = layout.staged(job.phase, rel), layout.path(rel)
    if job.schema is None or file_schema(layout.fs, staged) == job.schema:
        publish_copy(layout.fs, staged, target)
        return dict(job.entry)
    written = rewrite(layout.fs, [staged], target, job.schema, job.compression)
    return {"path": rel, "rows": written.rows, "bytes": written.bytes, "sha256": written.sha256}


def _companion_tables(layout: RunLayout, parts: list[dict[str, Any]], sinks: list[Sink]) -> list[pa.Table]:
    """The shard's rows in order, each part with the columns the sinks other than Parquet are made of
    (those it has); none when there are no such sinks."""
    if not any(sink.name != SHARDS for sink in sinks):
        return []
    tables = []
    for part in parts:
        with layout.fs.open(part["path"], "rb") as f:
            pf = pq.ParquetFile(f)
            wanted: list[str] = []
            for sink in sinks:
                wanted += [c for c in sink.columns(pf.schema_arrow) if c not in wanted]
            tables.append(pf.read(columns=wanted))
    return tables
