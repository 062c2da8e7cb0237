"""A finished run, for notebooks and scripts: `open_run(path)`.

Every file of the run is read through `Run.open`, which checks it against its manifest's entry (its
size and sha256) before a byte of it is read, as a pipeline checks a run's shard it reads as input:
a shard swapped, damaged or truncated after the run was written is refused in one line, never read
as if it were the run's. The consumers of a run (`ylink inspect`, the report, the notebook helpers,
the training commands) read its files through it."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cached_property
from typing import IO, Any, Iterator

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from ylink_data.core.storage import join, read_json
from ylink_data.core.parquet import read_table
from ylink_data.io.manifest import ManifestError, RunManifest, ShardRef, read_manifest
from ylink_data.io.run_files import verify
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

    @property
    def rejected_paths(self) -> list[str]:
        """The run's rejected/ files (runs with `keep_rejected: true`), as its manifest lists them."""
        return self._task_files("rejected", "*.parquet")

    @property
    def quarantine_paths(self) -> list[str]:
        """The run's quarantine/ files, as its manifest lists them."""
        return self._task_files("quarantine", "*.jsonl")

    def _task_files(self, kind: str, pattern: str) -> list[str]:
        if kind in self.checked.task_files:
            return [join(self.root, f.path) for f in self.checked.task_files[kind]]
        # A run of an older ylink, whose manifest lists neither: its files as the folder holds them,
        # read unchecked (there is nothing to check them against).
        folder = join(self.root, kind)
        return sorted(self.fs.glob(join(folder, pattern))) if self.fs.exists(folder) else []

    @cached_property
    def _refs(self) -> dict[str, ShardRef]:
        """What the manifest says of each file it lists, by its path on the run's filesystem."""
        listed = [*self.checked.files(), *(f for files in self.checked.task_files.values() for f in files)]
        return {join(self.root, f.path): f.ref for f in listed}

    @contextlib.contextmanager
    def open(self, path: str) -> Iterator[IO[bytes]]:
        """A file of the run (`shard_paths`, `rejected_paths`, `quarantine_paths`), checked against the
        size and sha256 its manifest lists before it is read; a ManifestError in one line names a
        file that is not what the manifest lists, or that it does not list."""
        self._check(path)
        with self.fs.open(path, "rb") as f:
            yield f

    def _check(self, path: str) -> None:
        """`path` is a file the manifest lists, of the size and sha256 it lists (an older ylink's
        manifest listed no rejected/ nor quarantine/ files: those are read unchecked)."""
        ref = self._refs.get(path)
        if ref is None:
            older = not self.checked.lists_task_files and path in (*self.rejected_paths, *self.quarantine_paths)
            if not older:
                raise ManifestError(f"{path}: not a file the manifest of {self.url} lists; refusing to read it")
        else:
            verify(self.fs, path, ref)

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
        tables = [self._read(p) for p in self.rejected_paths]
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

        entries = []
        for path in self.quarantine_paths:
            with self.open(path) as f:
                entries += [json.loads(line) for line in f if line.strip()]
        return entries

    def _read(self, path: str, columns: list[str] | None = None) -> pa.Table:
        self._check(path)
        return read_table(self.fs, path, columns=columns)
