"""decontaminate: drop (or mark) documents that share a long n-gram with an evaluation set, so a model
is not trained on the test it is scored on. For pre-training corpora and instruction data alike.

```yaml
- decontaminate:
    benchmarks:
      - {path: s3://evals/gsm8k/test.jsonl, fields: [question, answer]}
      - {path: evals/HumanEval.jsonl.gz, fields: [prompt], id_field: task_id, name: humaneval}
    mode: drop          # or annotate
    column: text        # the documents' text to check (instruction data: instruction)
    # cache_dir: /mnt/local-ssd/ylink-decontaminate   # where each machine keeps the index file
```

Each benchmark is a JSONL, Parquet or CSV file (`.gz` and other compressions by extension), by path
or fsspec URL (the pipeline's `storage:` options apply), with the `fields` whose text is searched
for (`transform.ngram_index`: 13-word n-grams, 13 characters for Chinese and Japanese items, items
shorter than that matched whole from 8 tokens; text normalised as `transform.ngrams` says: NFKC,
lowercase, punctuation and whitespace ignored, digits kept).

- `mode: drop`: a document with a match is dropped with reason `decontaminate:<name>` (`name`: the
  benchmark's file name unless given), and the match is in its row of rejected/ (`keep_rejected`).
- `mode: annotate`: every document is kept; the counters `matched:<name>` count matches.
Both write `decontaminate_benchmark`, `decontaminate_item` (the item's `id_field`, else its position
in the file from 0) and `decontaminate_ngram` (the first matching n-gram, normalised), null where
nothing matched: in drop mode they are null on every kept document.

The index is built once per machine and shared (`cache_dir`, default `$YLINK_DECONTAMINATE_CACHE`
or `~/.cache/ylink/decontaminate`): one file of flat arrays (`transform.ngram_index`) named by a hash
of everything that decides its bytes: the SHA-256 of each benchmark file's bytes, the benchmarks'
names, fields, id fields and formats in config order, `ngram`, `ngram_zh`, `min_item_tokens`, the
source of the modules that normalise, hash and read, and pyarrow's version (its Unicode tables
normalise the text). Each worker's `setup` fingerprints the files (0.12 s for 220 MB) and maps the
file when it is there (0.16 s CPU in all for that benchmark); otherwise it takes the name's lock
file (`flock`), and the first to hold it builds the index into a temporary file and renames it
into place (atomic: a reader sees the whole file or none) while the others wait, then map what it
wrote. So:
- the workers of one machine build it once and share its pages. A million items of 30 words: built
  in 15-16 s into a 510 MB file (the builder's peak RSS 660-700 MB), and each worker holds about
  135 MB of its own besides the file's pages it maps, where every worker built its own index in
  35 s, with a peak RSS of 6.8 GB and 3.6 GB held (bench/RESULTS.md, "Decontaminate index at 1M
  items");
- a rerun, a resumed run or another run with the same benchmarks and parameters maps the same file
  and builds nothing; a changed benchmark file has another fingerprint, so another file is built
  (a file that changes while it is read is read again);
- the run folder is never involved, so it may be on S3, and each node of a Ray cluster builds its own
  copy once, on its own disk (or shares one folder on a shared file system that has `flock`);
- a worker killed while building leaves a temporary file that the next builder removes; a file that
  is not a whole index (truncated, an older layout) is built again.
Old files are not removed: delete the folder's files whenever no run is using them. Where the
default folder cannot be written, each worker builds the index in its own memory instead (the same
arrays, unshared); an explicit `cache_dir` that cannot be written stops the run in one line.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import io
import json
import os
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa
from pydantic import Field

from ylink_data.core.errors import did_you_mean
from ylink_data.core.errors import InputError
from ylink_data.io import benchmarks as benchmark_files
from ylink_data.io.benchmarks import FORMATS, file_name, fingerprint, iter_benchmark, resolve_format
from ylink_data.io.locks import flock, unlock
from ylink_data.text.transform import ngram_index, ngrams, script
from ylink_data.text.transform.ngram_index import CHAR_NGRAM, MIN_TOKENS, WORD_NGRAM, IndexWriter, NgramIndex, NotAnIndex
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, MapOp
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext

COLUMNS = {"decontaminate_benchmark": pa.string(), "decontaminate_item": pa.string(),
           "decontaminate_ngram": pa.string()}
_KEYS = ("path", "fields", "id_field", "name", "format")
NgramSize = Annotated[int, Field(ge=2, le=1000)]
CACHE_ENV = "YLINK_DECONTAMINATE_CACHE"
# The modules whose code decides an index file's bytes: a change to any of them names new files.
_INDEX_CODE = (ngrams, ngram_index, script, benchmark_files)
_READ_ATTEMPTS = 3  # a benchmark file that changes while it is read is read again, this many times in all


def cache_folder(cache_dir: str | None = None) -> Path:
    """Where index files are kept on this machine (`cache_dir`, else the environment's, else home's)."""
    return Path(os.path.expanduser(cache_dir or os.environ.get(CACHE_ENV) or "~/.cache/ylink/decontaminate"))


def _code_fingerprint() -> str:
    digest = hashlib.sha256()
    for module in _INDEX_CODE:
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def _benchmark(i: int, entry: Any) -> dict[str, Any]:
    """One `benchmarks` entry, checked (the constructor's errors name the key)."""
    where = f"benchmarks[{i}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected {{path: URL, fields: [..]}}, got {entry!r}")
    for key in entry:
        if key not in _KEYS:
            hint = did_you_mean(key, _KEYS) or f" (keys: {', '.join(_KEYS)})"
            raise ValueError(f"{where}.{key}: unknown key{hint}")
    path, fields = entry.get("path"), entry.get("fields")
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{where}.path: give the path or URL of a JSONL, Parquet or CSV file")
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"{where}.fields: give a list of the fields whose text is searched for, e.g. [question]")
    for key in ("id_field", "name"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise ValueError(f"{where}.{key}: give a string, got {entry[key]!r}")
    fmt = entry.get("format", "auto")
    if fmt not in ("auto", *FORMATS):
        raise ValueError(f"{where}.format: give auto, {', '.join(FORMATS)}; got {fmt!r}")
    return {"path": path, "fields": fields, "id_field": entry.get("id_field"), "name": entry.get("name"),
            "fmt": fmt}


def _open(path: Path, key: str) -> NgramIndex | None:
    """The index file at `path` when it is a whole one built for `key`; None when there is none (or
    none that can be read: the caller then builds one, or finds it cannot write one either)."""
    try:
        index = NgramIndex.open(path)
    except (OSError, NotAnIndex):
        return None
    return index if index.meta.get("key") == key else None


def _release_freed_memory() -> None:
    """Gives the memory the build freed back to the system: the worker that built the index goes on
    checking documents for hours, and glibc and Arrow's allocator keep freed memory for reuse (a
    million items: 380 MB of its own after the build without this, 130 MB with it, as the workers
    that only mapped the file)."""
    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass


def _fsync_folder(folder: Path) -> None:
    """Makes a rename in `folder` durable (a crash after it must not bring the old name back)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@register
class Decontaminate(MapOp):
    """Drops or marks documents that share an n-gram with an evaluation set; see the module docstring."""

    name = "decontaminate"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return [(f"benchmarks[{i}].path", b["path"]) for i, b in enumerate(params.get("benchmarks") or [])
                if isinstance(b, dict) and isinstance(b.get("path"), str)]

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return [("column", params["column"])]

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return dict(COLUMNS)

    def __init__(self, benchmarks: Annotated[list[Any], Field(min_length=1)],
                 mode: Literal["drop", "annotate"] = "drop", column: str = "text",
                 ngram: NgramSize = WORD_NGRAM, ngram_zh: NgramSize = CHAR_NGRAM,
                 min_item_tokens: Annotated[int, Field(ge=1, le=1000)] = MIN_TOKENS,
                 cache_dir: str | None = None):
        self.benchmarks = [_benchmark(i, entry) for i, entry in enumerate(benchmarks)]
        names = [b["name"] or b["path"] for b in self.benchmarks]
        self.mode, self.column = mode, column
        self.ngram, self.ngram_zh, self.min_item_tokens = ngram, ngram_zh, min_item_tokens
        if len(set(names)) != len(names):
            raise ValueError("benchmarks: the same benchmark is listed twice")
        if cache_dir is not None and (not cache_dir.strip() or "://" in cache_dir):
            raise ValueError("cache_dir: give a folder on this machine's disk (the index file is memory-mapped)")
        self.cache_dir = cache_dir
        self.index: NgramIndex | None = None
        self.index_built = False  # whether this process's setup built the index (False: mapped one)

    @classmethod
    def fingerprint_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The op's parameters as the run's fingerprint holds them: not `cache_dir`, as where a machine
        keeps the index changes no output (a run resumed with another folder resumes)."""
        return {key: value for key, value in params.items() if key != "cache_dir"}

    def __getstate__(self) -> dict[str, Any]:
        # A memory map does not travel: a copy of the op in another process maps the file itself.
        return {**self.__dict__, "index": None, "index_built": False}

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        sources = []
        for i, b in enumerate(self.benchmarks):
            where = f"{self.name}.benchmarks[{i}]"
            sources.append({**b, "fmt": resolve_format(b["path"], b["fmt"], where),
                            "name": b["name"] or file_name(b["path"]), "where": where,
                            "storage_options": ctx.storage_options(b["path"])})
        names = [src["name"] for src in sources]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError(f"{self.name}.benchmarks: two benchmarks are named {twice[0]!r} (their file name): "
                             "give each a `name`")
        for _ in range(_READ_ATTEMPTS):
            prints = self._fingerprints(sources)
            index = self._cached_index(sources, prints)
            if index is not None:
                self.index = index
                return
        raise InputError(f"{self.name}.benchmarks: a benchmark file changed each time it was read "
                         f"({_READ_ATTEMPTS} times); run again once it is written")

    def _fingerprints(self, sources: list[dict[str, Any]]) -> list[str]:
        return [fingerprint(src["path"], storage_options=src["storage_options"], where=src["where"])
                for src in sources]

    def _key(self, sources: list[dict[str, Any]], prints: list[str]) -> str:
        """The index file's name: a hash of everything that decides its bytes (module docstring)."""
        spec = {"code": _code_fingerprint(), "pyarrow": pa.__version__, "magic": ngram_index.MAGIC.decode(),
                "ngram": self.ngram, "ngram_zh": self.ngram_zh, "min_item_tokens": self.min_item_tokens,
                "benchmarks": [{"name": src["name"], "fields": src["fields"], "id_field": src["id_field"],
                                "format": src["fmt"], "sha256": sha} for src, sha in zip(sources, prints)]}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:40]

    def _write_index(self, out, sources: list[dict[str, Any]], key: str) -> None:
        writer = IndexWriter(out, word_ngram=self.ngram, char_ngram=self.ngram_zh, min_tokens=self.min_item_tokens)
        for src in sources:
            writer.add(src["name"], iter_benchmark(src["path"], src["fields"], id_field=src["id_field"],
                                                   fmt=src["fmt"], storage_options=src["storage_options"],
                                                   where=src["where"]))
        writer.finish({"key": key})

    def _cached_index(self, sources: list[dict[str, Any]], prints: list[str]) -> NgramIndex | None:
        """The index of these files: mapped from the cache folder, built there first when missing; None
        when a file changed while it was read (its fingerprint then differs from `prints`)."""
        key = self._key(sources, prints)
        folder = cache_folder(self.cache_dir)
        path = folder / f"{key}.ngrams"
        index = _open(path, key)
        if index is not None:
            self.index_built = False
            return index
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock = flock(folder / f"{key}.lock", fcntl.LOCK_EX)
        except OSError as exc:
            return self._unshared_index(sources, prints, key, folder, exc)
        try:
            index = _open(path, key)  # built by the worker that held the lock before this one
            if index is None:
                built = self._build_file(sources, prints, key, folder, path)
                if built is not True:
                    return built  # None: a file changed while read; or the index built in memory
                self.index_built = True
                index = NgramIndex.open(path)
            else:
                self.index_built = False
            return index
        finally:
            # The lock file goes with its holder, built or not: a worker still waiting on it then finds
            # it gone and takes the path's new lock (io/locks.py), so none is left behind.
            (folder / f"{key}.lock").unlink(missing_ok=True)
            unlock(lock)

    def _build_file(self, sources: list[dict[str, Any]], prints: list[str], key: str, folder: Path,
                    path: Path) -> "bool | NgramIndex | None":
        """Builds the index into a temporary file and renames it to `path` (the caller holds the lock):
        True when done; None when a benchmark file changed while it was read; an index built in memory
        when the folder cannot be written (`_unshared_index`)."""
        for stale in folder.glob(f"{key}.*.tmp"):  # a builder killed half-way (only the lock holder writes)
            stale.unlink(missing_ok=True)
        tmp = folder / f"{key}.{os.getpid()}.tmp"
        try:
            try:
                with open(tmp, "wb") as out:
                    self._write_index(out, sources, key)
                    out.flush()
                    os.fsync(out.fileno())
            except OSError as exc:  # the folder is read-only or full (errors reading a benchmark are InputErrors)
                return self._unshared_index(sources, prints, key, folder, exc)
            if self._fingerprints(sources) != prints:
                return None
            os.replace(tmp, path)
            _fsync_folder(folder)
            _release_freed_memory()
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def _unshared_index(self, sources: list[dict[str, Any]], prints: list[str], key: str, folder: Path,
                        exc: OSError) -> NgramIndex | None:
        """The index built in this process's memory, when the default cache folder cannot be written."""
        if self.cache_dir is not None:
            raise InputError(f"{self.name}.cache_dir: cannot write the n-gram index into {folder}: "
                             f"{type(exc).__name__}: {exc.strerror or exc}") from None
        out = io.BytesIO()
        self._write_index(out, sources, key)
        if self._fingerprints(sources) != prints:
            return None
        self.index_built = True
        return NgramIndex(out.getvalue())

    def process(self, table: pa.Table) -> BatchResult:
        if self.index is None:
            self.setup()
        if self.column not in table.column_names:
            raise InputError(f"{self.name}.column: the documents have no column {self.column!r} "
                             f"(columns: {', '.join(table.column_names)}); name the column to check")
        matches = self.index.find(table.column(self.column))
        for name, dtype in COLUMNS.items():  # a second decontaminate replaces the first's columns
            values = [getattr(m, name.removeprefix("decontaminate_")) if m else None for m in matches]
            if name in table.column_names:
                table = table.drop_columns([name])
            table = table.append_column(name, pa.array(values, dtype))
        found = Counter(m.benchmark for m in matches if m)
        if self.mode == "annotate":
            return BatchResult(table, counters={f"matched:{name}": n for name, n in found.items()})
        dropped = [f"{self.name}:{m.benchmark}" if m else None for m in matches]
        return BatchResult(table, dropped=dropped if found else None)
