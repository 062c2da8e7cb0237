"""A finished run, for notebooks and scripts: `open_run(path)`."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from ylink_data.core.storage import join, read_json
from ylink_data.io.manifest import RunManifest, read_manifest
from ylink_data.core.parquet import read_table
from ylink_data.core.schema import DOCUMENT_SCHEMA


def open_run(path: str, storage_options: dict[str, Any] | None = None) -> "Run":
    """The finished run at `path` (a folder or fsspec URL). Its manifest is read and checked as the
    cache checks it (`ylink_data.io.manifest`): a shard outside the run folder or without a sha256 is
    refused before anything of the run is read."""
    return Run(path, read_manifest(path, storage_options))


@dataclass
class Run:
    """A finished run folder (`open_run`): its manifest, stats and configuration, its kept documents
    as Arrow or pandas, the documents it dropped and the records it quarantined."""

    url: str
    """The folder or URL the run was opened at."""
    checked: RunManifest
    """The manifest, read and checked (`ylink_data.io.manifest.RunManifest`)."""

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem the run folder is on."""
        return self.checked.fs

    @property
    def root(self) -> str:
        """The run folder's path on `fs`."""
        return self.checked.root

    @property
    def manifest(self) -> dict[str, Any]:
        """manifest.json: the shards (path, rows, bytes, sha256) and each output format's files."""
        return self.checked.data

    @cached_property
    def stats(self) -> dict[str, Any]:
        """stats.json: input, output, dropped and quarantined counts, per stage and for the run
        (`input_records == output_records + sum of dropped + quarantined`)."""
        return read_json(self.fs, join(self.root, "stats.json"))

    @cached_property
    def info(self) -> dict[str, Any]:
        """run.json: the configuration (without credentials) and the inputs."""
        return read_json(self.fs, join(self.root, "run.json"))

    @property
    def shard_paths(self) -> list[str]:
        """The kept documents' Parquet shards, as paths on `fs`, in the manifest's order."""
        return [join(self.root, s.path) for s in self.checked.shards]

    def to_arrow(self, columns: list[str] | None = None) -> pa.Table:
        """The kept documents as one pyarrow Table (only `columns` when given), shards in order."""
        tables = [self._read(p, columns) for p in self.shard_paths]
        if not tables:
            schema = DOCUMENT_SCHEMA if columns is None else pa.schema([DOCUMENT_SCHEMA.field(c) for c in columns])
            return schema.empty_table()
        return pa.concat_tables(tables, promote_options="default")

    def to_pandas(self, columns: list[str] | None = None):
        """The kept documents as a pandas DataFrame (only `columns` when given)."""
        return self.to_arrow(columns).to_pandas()

    def rejected(self, reason: str | None = None) -> pa.Table:
        """Dropped documents (runs with `keep_rejected: true`). `reason` matches exactly or as the op
        part of `op:rule` reasons, so `rejected("gopher_quality")` gives every Gopher drop."""
        folder = join(self.root, "rejected")
        paths = sorted(self.fs.glob(join(folder, "*.parquet"))) if self.fs.exists(folder) else []
        tables = [self._read(p) for p in paths]
        if not tables:
            return DOCUMENT_SCHEMA.append(pa.field("reason", pa.string())).empty_table()
        table = pa.concat_tables(tables, promote_options="default")
        if reason is not None:
            reasons = table.column("reason")
            table = table.filter(pc.or_(pc.equal(reasons, reason), pc.starts_with(reasons, f"{reason}:")))
        return table

    def quarantine(self) -> list[dict[str, Any]]:
        """The quarantined records, one dict each: the file, its offset (or the document's id), the
        stage, the reason (`unreadable`, `timeout`, `too_large`, ...) and the error."""
        import json

        folder = join(self.root, "quarantine")
        if not self.fs.exists(folder):
            return []
        entries = []
        for path in sorted(self.fs.glob(join(folder, "*.jsonl"))):
            with self.fs.open(path, "rb") as f:
                entries += [json.loads(line) for line in f if line.strip()]
        return entries

    def _read(self, path: str, columns: list[str] | None = None) -> pa.Table:
        return read_table(self.fs, path, columns=columns)
