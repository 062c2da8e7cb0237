"""The work one Ray task does: read a task's splits (phase 0) or its previous phase's parts, apply
the phase's ops batch by batch with bounded memory, write the kept documents, the rejected ones and
the quarantine, then record completion atomically. The marker is the only proof of completion, so
a task killed half-way leaves nothing that a rerun would trust."""
from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ylink_data.engine.config import PipelineConfig
from ylink_data.engine.files_read import Expected, checked_load
from ylink_data.engine import executors
from ylink_data.core.errors import InputError, YlinkError
from ylink_data.core.storage import HashingWriter, atomic_write, read_json, write_json
from ylink_data.io.parquet import ParquetFileWriter, RollingParquetWriter
from ylink_data.io.readers import Bad, Record, Skip, Split, open_split, read_split
from ylink_data.io.readers.base import describe_error, is_io_failure
from ylink_data.core.file_errors import file_problem
from ylink_data.core.redaction import redact_url
from ylink_data.core.startup import startup, startup_seconds
from ylink_data.core.schema import DOCUMENT_SCHEMA, INTERNAL_PREFIX, document_id
from ylink_data.ops import GlobalOp, MapOp, build_op, op_class
from ylink_data.ops.context import OpContext, no_storage_options
from ylink_data.engine.executors.ray import assigned_cpus
from ylink_data.ops.workspace import read_decisions
from ylink_data.io.layout import RunLayout
from ylink_data.engine.plan import Phase, StageRef
from ylink_data.engine.stats import StageStats, TaskStats

BATCH_DOCS = 2048
BATCH_TEXT_BYTES = 8 * 1024 * 1024
CRASH_TASK_ENV, CRASH_TIMES_ENV, CRASH_EXIT_CODE = "YLINK_TEST_CRASH_TASK", "YLINK_TEST_CRASH_TIMES", 137  # see _crash_if_asked


@dataclass
class TaskSpec:
    cfg: PipelineConfig  # storage options (credentials) travel to the worker here, never to disk
    phase: Phase
    task: int
    splits: list[Split] = field(default_factory=list)  # phase 0
    parts: list[str] = field(default_factory=list)  # later phases: the previous phase's parts
    decisions: list[str] = field(default_factory=list)  # the incoming global op's decision files
    inline: dict[str, Any] = field(default_factory=dict)  # memory:// inputs shipped by the driver
    tiers: tuple[str, list[str]] | None = None  # final phase: (column, tier names) to route output by
    # Phase 0 with input.sample: the (priority, id) of the last document kept (`sample_priority`);
    # documents above it are dropped as `not_sampled`. None: every document is read on.
    sample_cut: tuple[int, str] | None = None
    # What the files the ops read must be, as the driver fingerprinted them (engine/files_read.py)
    files_read: Expected = field(default_factory=dict)


# The `metadata` column's JSON: json.dumps(..., ensure_ascii=False, default=str), with the encoder
# made once (json.dumps makes one per call when given options: 4 us of a document's 25 in phase 0).
_METADATA_JSON = json.JSONEncoder(ensure_ascii=False, default=str)

# Ops are built once per worker process and reused by every task it runs (models load once), as long
# as the files they read are the same (a run after a model changed loads it again).
_OPS: dict[str, Any] = {}


def cached_op(name: str, params: dict[str, Any], cfg: PipelineConfig | None = None, stage: int = 0,
              expected: Expected | None = None):
    """The op of stage `stage` (1 + its position in `stages`), built and set up once per process;
    in a run (`expected`: the driver's digests of the files ops read), only once the files it reads
    are checked to be those (`checked_load`)."""
    expected = {k: v for k, v in (expected or {}).items() if k.startswith(f"stages[{stage - 1}].{name}.")}
    key = json.dumps([name, params, expected], sort_keys=True, default=str)
    if key not in _OPS:
        def load():
            with startup():
                op = build_op(name, params)
                op.setup(OpContext(storage_options=cfg.storage_options if cfg is not None else no_storage_options,
                                   task_cpus=assigned_cpus()))
            return op
        _OPS[key] = checked_load(cfg, stage - 1, name, params, expected, load) if expected else load()
    return _OPS[key]


class TaskOutput:
    """Everything a task writes besides its marker: its parts, and the files it makes for the run
    folder's rejected/ and quarantine/, staged in _work/ (`RunLayout.staged`) until publish."""

    def __init__(self, layout: RunLayout, spec: TaskSpec):
        self.layout, self.spec = layout, spec
        phase, task = spec.phase.index, spec.task
        output = spec.cfg.output
        compression = output.compression if spec.phase.final else "lz4"

        def writer(tier: str | None) -> RollingParquetWriter:
            return RollingParquetWriter(layout.fs, lambda k: layout.part(phase, task, k, tier), output.shard_bytes,
                                        compression)
        self.tiers = spec.tiers if spec.phase.final else None
        self.kept = {tier: writer(tier) for tier in (self.tiers[1] if self.tiers else [None])}
        self.rejected: dict[int, ParquetFileWriter] = {}
        self.quarantined = 0
        # The row counts of the tables written, in order: a phase's parts remade with another global
        # op's keys (engine/reuse.py) are written table by table as the phase wrote them.
        self.batches: list[int] = []
        self._quarantine = contextlib.ExitStack()
        self._quarantine_file: HashingWriter | None = None

    def quarantine(self, entry: dict[str, Any]) -> None:
        """Streamed to its file as it comes, so a file of bad records costs no memory."""
        if self._quarantine_file is None:
            path = self.layout.staged(self.spec.phase.index, self.layout.quarantine(self.spec.phase.index, self.spec.task))
            self._quarantine_file = HashingWriter(self._quarantine.enter_context(atomic_write(self.layout.fs, path)))
        entry = self.spec.cfg.redact(entry)  # an error may quote a URL or a credential
        self._quarantine_file.write(json.dumps(entry, ensure_ascii=False).encode() + b"\n")
        self.quarantined += 1

    def reject(self, stage: int, table: pa.Table, reasons: list[str]) -> None:
        if not self.spec.cfg.output.keep_rejected or table.num_rows == 0:
            return
        table = table.drop_columns([c for c in table.column_names if c.startswith(INTERNAL_PREFIX)])
        table = table.append_column("reason", pa.array(reasons, pa.string()))
        if stage not in self.rejected:
            path = self.layout.staged(self.spec.phase.index,
                                      self.layout.rejected(self.spec.phase.index, self.spec.task, stage))
            self.rejected[stage] = ParquetFileWriter(self.layout.fs, path, self.spec.cfg.output.compression)
        self.rejected[stage].write(table)

    def write(self, table: pa.Table) -> None:
        """Kept documents into the task's parts (one set of parts per output tier when routing)."""
        if self.tiers is None:
            if table.num_rows:
                self.batches.append(table.num_rows)
            self.kept[None].write(table)
            return
        if table.num_rows == 0:  # a batch an op dropped whole: it may lack the column ops add
            return
        column = table.column(self.tiers[0])
        for tier, writer in self.kept.items():
            writer.write(table.filter(pc.equal(column, tier)))

    def close(self) -> dict[str, list[dict[str, Any]]]:
        """The marker's lists: "parts", and "rejected" and "quarantine", the entries of the files
        the task made for those folders ({"path" in the run folder, "rows", "bytes", "sha256"})."""
        phase, task = self.spec.phase.index, self.spec.task
        parts = [{**p.to_json(), **({"tier": tier} if tier else {})}
                 for tier, w in self.kept.items() for p in w.close()]
        rejected = [{**w.close().to_json(), "path": self.layout.rejected(phase, task, stage)}
                    for stage, w in sorted(self.rejected.items())]
        self._quarantine.close()
        quarantine = []
        if self._quarantine_file is not None:
            out = self._quarantine_file
            quarantine.append({"path": self.layout.quarantine(phase, task), "rows": self.quarantined,
                               "bytes": out.bytes, "sha256": out.sha256.hexdigest()})
        return {"parts": parts, "rejected": rejected, "quarantine": quarantine,
                **({"batches": self.batches} if not self.spec.phase.final else {})}

    def abort(self) -> None:
        self._quarantine.__exit__(RuntimeError, RuntimeError("aborted"), None)
        for w in (*self.kept.values(), *self.rejected.values()):
            w.abort()


def current_marker(marker: dict[str, Any]) -> bool:
    """Whether a task's marker is one this ylink writes (it lists the task's quarantine file): an
    older one's task runs again, as its rejected/ and quarantine/ files were not staged."""
    return isinstance(marker.get("quarantine"), list)


def execute_task(spec: TaskSpec) -> dict[str, Any]:
    """Run one task to completion and return (and persist) its completion marker."""
    _crash_if_asked(spec)
    layout = RunLayout.for_url(spec.cfg.output.path, spec.cfg.storage_options(spec.cfg.output.path))
    with layout.writing():
        return _execute(spec, layout)


def _execute(spec: TaskSpec, layout: RunLayout) -> dict[str, Any]:
    stats = TaskStats()
    out = TaskOutput(layout, spec)
    phase = spec.phase
    ops = [(idx, name, _set_up(stats, idx, name, params, spec)) for idx, name, params in phase.ops]
    keyer = cached_op(phase.outgoing[1], phase.outgoing[2], spec.cfg, phase.outgoing[0], spec.files_read) \
        if phase.outgoing else None
    reads: list[dict[str, Any]] = []  # phase 0: what each split read was (io/input_versions.py)
    try:
        stream = _read_input(spec, stats, out, reads) if phase.index == 0 else _read_parts(spec, layout, stats, out)
        for idx, name, op in ops:  # batches flow through the ops lazily, one at a time
            stream = _applied(op, idx, name, stream, stats, out)
        for table in stream:
            if table.num_rows and keyer is not None:
                table = add_keys(keyer, phase.outgoing, table)
            out.write(table)
        files = out.close()
    except BaseException:
        out.abort()
        raise
    marker = {"phase": phase.index, "task": spec.task, "stats": stats.to_json(), **files,
              "quarantined": out.quarantined, **({"inputs": reads} if phase.index == 0 else {})}
    write_json(layout.fs, layout.task_marker(phase.index, spec.task), marker)
    return marker


def _set_up(stats: TaskStats, idx: int, name: str, params: dict[str, Any], spec: TaskSpec):
    """The stage's op (`cached_op`), the time its setup took in this worker counted as the stage's start-up."""
    before = startup_seconds()
    op = cached_op(name, params, spec.cfg, idx, spec.files_read)
    if startup_seconds() > before:
        stats.stage(idx, name).startup_seconds += startup_seconds() - before
    return op


def _now() -> tuple[float, float]:
    return time.perf_counter(), startup_seconds()


def _charge(stage: StageStats, started: tuple[float, float]) -> None:
    """The time since `started` (`_now()`) to the stage: one-time start-up work done meanwhile
    (`core/startup.py`) to its `startup_seconds`, the rest to its `seconds`."""
    once = startup_seconds() - started[1]
    stage.startup_seconds += once
    stage.seconds += time.perf_counter() - started[0] - once


def _crash_if_asked(spec: TaskSpec) -> None:
    """Fault injection for tests (DEVELOPERS.md): with YLINK_TEST_CRASH_TASK=N in the environment,
    the worker process that runs phase 0's task N dies on the spot, as one the kernel's OOM killer
    took would, and so does every retry; with YLINK_TEST_CRASH_TIMES=K:FILE as well, only its first
    K attempts die (each adds a byte to FILE), and the next runs the task."""
    if spec.phase.index != 0 or os.environ.get(CRASH_TASK_ENV) != str(spec.task):
        return
    times = os.environ.get(CRASH_TIMES_ENV)
    if times:
        limit, path = times.split(":", 1)
        with open(path, "a+") as f:
            f.seek(0)
            if len(f.read()) >= int(limit):
                return
            f.write("x")
    os._exit(CRASH_EXIT_CODE)


# ----------------------------------------------------------------------------- sources


def _read_input(spec: TaskSpec, stats: TaskStats, out: TaskOutput,
                reads: list[dict[str, Any]]) -> Iterator[pa.Table]:
    """Phase 0: records of the task's splits, as batches of the document schema; what was read of each
    split is appended to `reads`."""
    read = stats.stage(0, "read")
    cut, seed = spec.sample_cut, spec.cfg.input.sample_seed
    cols: dict[str, list] = {name: [] for name in DOCUMENT_SCHEMA.names}
    text_bytes = 0
    for split in spec.splits:
        size = split_bytes(split)
        stats.input_bytes += size
        read.bytes_in += size
        started = _now()
        # The `source` column, the quarantine and the ids name the file without the credentials
        # its URL may carry (user:password@, sig=...). A URL without any is kept as it is, and so
        # are the ids made from it; URLs that differ only in credentials name one file, which
        # the input list holds once (expand_paths), so ids stay unique.
        source = redact_url(split.url)
        for item in _split_items(spec, split, reads):
            # every item is one record in, kept, dropped or quarantined: the read stage's books
            # balance as every other stage's (an unreadable record is counted in, then quarantined)
            stats.input_records += 1
            read.docs_in += 1
            if isinstance(item, Record):
                doc_id = document_id(source, item.offset)
                if cut is not None and (sample_priority(seed, doc_id), doc_id) > cut:
                    read.dropped[NOT_SAMPLED] += 1  # counted, never written to rejected/
                    continue
                read.docs_out += 1
                if item.counters:
                    read.counters.update(item.counters)  # parts of a document its reader left out
                cols["id"].append(doc_id)
                cols["text"].append(item.text)
                cols["url"].append(item.url)
                cols["source"].append(source)
                cols["lang"].append(item.lang)  # set when the input is a previous run's shards
                cols["lang_score"].append(item.lang_score)
                cols["metadata"].append(_METADATA_JSON.encode(item.metadata) if item.metadata else None)
                text_bytes += len(item.text)
                if len(cols["id"]) >= BATCH_DOCS or text_bytes >= BATCH_TEXT_BYTES:
                    _charge(read, started)
                    table = _document_table(cols)
                    read.bytes_out += text_bytes_of(table)
                    yield table
                    started = _now()
                    cols = {name: [] for name in DOCUMENT_SCHEMA.names}
                    text_bytes = 0
            elif isinstance(item, Skip):
                read.dropped[item.reason] += 1
            elif isinstance(item, Bad):
                read.quarantined += 1
                out.quarantine({"file": source, "offset": item.offset, "stage": "read",
                                "reason": item.reason, "error": item.error})
        _charge(read, started)
    if cols["id"]:
        table = _document_table(cols)
        read.bytes_out += text_bytes_of(table)
        yield table


def split_bytes(split: Split) -> int:
    """The input bytes a split stands for (a Parquet split: its file's size)."""
    if split.format == "parquet":
        return split.size or 0
    return (split.end if split.end is not None else split.size or 0) - split.start


# input.sample: the read stage's drop reason of the documents outside the sample.
NOT_SAMPLED = "not_sampled"


def sample_priority(seed: int, doc_id: str) -> int:
    """A document's rank in input.sample's bottom-k sample: a 64-bit hash of the seed and its id,
    uniform over documents and independent of where the document lies or which task reads it."""
    return int.from_bytes(hashlib.blake2b(f"{seed}\x00{doc_id}".encode(), digest_size=8).digest(), "big")


def sample_scan(spec: TaskSpec) -> dict[str, Any]:
    """The pass before phase 0 with input.sample = N: the N lowest (priority, id) of the documents of
    the task's splits (Records only: what phase 0 would read on; skipped and unreadable records are
    no documents), the number of documents, and the bytes read. The driver merges the tasks' lists."""
    n, seed = spec.cfg.input.sample, spec.cfg.input.sample_seed
    counted = {"documents": 0, "bytes": 0}
    reads: list[dict[str, Any]] = []

    def keys() -> Iterator[tuple[int, str]]:
        for split in spec.splits:
            counted["bytes"] += split_bytes(split)
            source = redact_url(split.url)
            for item in _split_items(spec, split, reads):
                if isinstance(item, Record):
                    counted["documents"] += 1
                    doc_id = document_id(source, item.offset)
                    yield sample_priority(seed, doc_id), doc_id

    lowest = heapq.nsmallest(n, keys())  # streams: holds n keys, not the task's documents
    return {"lowest": [list(key) for key in lowest], **counted, "inputs": reads}


def _split_items(spec: TaskSpec, split: Split, reads: list[dict[str, Any]]) -> Iterator[Record | Skip | Bad]:
    """The split's items. Bad records are items; an error that escapes the reader fails the task,
    naming the file it came from (a task reads many small files: its own name says too little). The
    file is checked to be the version the plan listed, before and after (`open_split`)."""
    inline = executors.get(spec.inline.get(split.url))  # put by the driver's executor
    try:
        with open_split(split, spec.cfg.storage_options(split.url), inline, reads) as f:
            yield from read_split(split, f, spec.cfg.input)
    except YlinkError:
        raise
    except Exception as exc:
        cause = file_problem(exc, split.url) if is_io_failure(exc) else describe_error(exc)
        raise InputError(f"reading {split.describe()} failed: {cause}") from exc


def text_bytes_of(table: pa.Table) -> int:
    """UTF-8 bytes of a batch's text column."""
    return int(pc.sum(pc.binary_length(table.column("text"))).as_py() or 0) if table.num_rows else 0


def _document_table(cols: dict[str, list]) -> pa.Table:
    texts = cols["text"]
    if any(isinstance(t, bytes) for t in texts):
        # Readers hand UTF-8 pages over as validated bytes: build the column from them directly.
        raw = pa.array([t if isinstance(t, bytes) else t.encode() for t in texts], pa.large_binary())
        cols = {**cols, "text": raw.view(pa.large_string())}
    return pa.Table.from_pydict(cols, schema=DOCUMENT_SCHEMA)


def _read_parts(spec: TaskSpec, layout: RunLayout, stats: TaskStats, out: TaskOutput) -> Iterator[pa.Table]:
    """Later phases: the previous phase's kept documents, minus what the global op decided to drop."""
    idx, name, params = spec.phase.incoming
    stage = stats.stage(idx, name)
    # Only an op that counts something here is built (quality_classifier's would load its models).
    counts = op_class(name).decision_breakdowns is not GlobalOp.decision_breakdowns
    op = cached_op(name, params, spec.cfg, idx, spec.files_read) if counts else None
    decisions = read_decisions(layout.fs, spec.decisions, spec.task)
    row = 0
    for path in spec.parts:
        with layout.fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            # the global op's keys (internal columns) are not read: they can be large (shingle sets)
            columns = [c for c in pf.schema_arrow.names if not c.startswith(INTERNAL_PREFIX)]
            for batch in pf.iter_batches(batch_size=BATCH_DOCS, columns=columns):
                started = _now()
                table = pa.Table.from_batches([batch])
                n = table.num_rows
                rows = range(row, row + n)
                row += n
                stage.docs_in += n
                stage.bytes_in += text_bytes_of(table)
                reasons = [decisions.reasons.get(r) for r in rows]
                evidence = table
                for column, values in decisions.columns.items():
                    values = pa.array([values.get(r) for r in rows], decisions.types[column])
                    evidence = evidence.append_column(column, values)
                    if column not in decisions.rejected_only:
                        table = table.append_column(column, values)
                dropped = np.array([r is not None for r in reasons], bool)
                for key, counted in (op.decision_breakdowns(evidence, dropped) if op else {}).items():
                    stage.breakdowns[key].update(counted)
                if dropped.any():
                    keep = pa.array(~dropped)
                    gone = [r for r in reasons if r is not None]
                    stage.dropped.update(gone)
                    out.reject(idx, evidence.filter(pa.array(dropped)), gone)
                    table = table.filter(keep)
                stage.docs_out += table.num_rows
                stage.bytes_out += text_bytes_of(table)
                _charge(stage, started)
                if table.num_rows:
                    yield table


# ----------------------------------------------------------------------------- ops


# An op's error that starts with one of these is quarantined with its reason (ops/base.py
# BatchResult), any other with `error`: `timeout` (a time limit, a model server that never answered
# in time), `unusable_response` (a model server's answer that is no chat completion, io/llm/client.py,
# or whose content cannot be read or stored, "unusable answer: ...", io/llm/answer.py), `truncated`
# (an answer the server cut off at max_tokens, "truncated answer: ...", io/llm/answer.py).
ERROR_REASONS = {"timeout": "timeout", "unusable_response": "unusable_response", "unusable answer": "unusable_response",
                 "truncated answer": "truncated"}


def _apply(op: MapOp, idx: int, name: str, table: pa.Table, stats: TaskStats, out: TaskOutput) -> pa.Table:
    stage = stats.stage(idx, name)
    started = _now()
    stage.bytes_in += text_bytes_of(table)
    n_in = table.num_rows
    result = op.process(table)
    table = result.table
    n = table.num_rows
    stage.docs_in += n_in
    if result.parents is not None:
        _check_parents(name, result.parents, n_in, n)
        stage.created += n - n_in  # every input row has at least one row: the rest are new
    elif n != n_in:
        raise RuntimeError(f"op {name} returned {n} rows for {n_in} without `parents`: a bug in the op")
    stage.counters.update(result.counters)
    keep = [True] * n
    if result.errors:
        ids, sources = table.column("id").to_pylist(), table.column("source").to_pylist()
        for i, error in enumerate(result.errors):
            if error is not None:
                keep[i] = False
                stage.quarantined += 1
                reason = next((r for prefix, r in ERROR_REASONS.items() if error.startswith(prefix)), "error")
                stage.counters[f"quarantined_{reason}"] += 1
                out.quarantine({"file": sources[i], "id": ids[i], "stage": name, "reason": reason, "error": error})
    if result.dropped:
        dropped_rows = [i for i, r in enumerate(result.dropped) if r is not None and keep[i]]
        if dropped_rows:
            reasons = [result.dropped[i] for i in dropped_rows]
            stage.dropped.update(reasons)
            out.reject(idx, table.take(dropped_rows), reasons)
            for i in dropped_rows:
                keep[i] = False
    if not all(keep):
        table = table.filter(pa.array(keep))
    stage.docs_out += table.num_rows
    stage.bytes_out += text_bytes_of(table)
    _charge(stage, started)
    return table


def _applied(op: MapOp, idx: int, name: str, stream: Iterator[pa.Table], stats: TaskStats,
             out: TaskOutput) -> Iterator[pa.Table]:
    """`op` over each batch of `stream`; a batch left empty by an earlier op passes by untouched.
    An op with a `group_column` gets whole groups (`whole_groups`)."""
    if op.group_column is not None:
        stream = whole_groups(stream, op.group_column)
    for table in stream:
        yield _apply(op, idx, name, table, stats, out) if table.num_rows else table


def whole_groups(stream: Iterator[pa.Table], column: str) -> Iterator[pa.Table]:
    """The rows of `stream` in the same order, in batches that never end inside a group (a run of
    adjacent rows with one value of `column`): each batch's last group is held back and put in
    front of the next batch, the very last one yielded at the end. Memory: one batch plus one
    group. Batches without the column pass as they are (the op says what is missing)."""
    held: pa.Table | None = None
    for table in stream:
        if column not in table.column_names or table.num_rows == 0:
            yield table
            continue
        if held is not None:
            table = pa.concat_tables([held, table], promote_options="permissive")
            held = None
        keys = table.column(column).to_pylist()
        last, start = keys[-1], len(keys) - 1
        while start > 0 and keys[start - 1] == last:
            start -= 1
        if start:
            yield table.slice(0, start)
        held = table.slice(start)
    if held is not None:
        yield held


def _check_parents(name: str, parents: list[int], n_in: int, n: int) -> None:
    """A fan-out op's rows must name their input rows in order and leave none out (BatchResult):
    otherwise a document would leave the books without a reason."""
    if len(parents) != n:
        raise RuntimeError(f"op {name}: {len(parents)} parents for {n} rows: a bug in the op")
    expected = 0
    for p in parents:
        if p not in (expected - 1, expected):
            raise RuntimeError(f"op {name}: parents must cover input rows 0..{n_in - 1} in order, each at least "
                               f"once; got row {p} after {expected - 1}: a bug in the op")
        expected = p + 1
    if expected != n_in:
        raise RuntimeError(f"op {name}: input rows {expected}..{n_in - 1} have no row: a bug in the op "
                           "(a document with nothing to give keeps one row, dropped with a reason)")


def add_keys(op: GlobalOp, ref: StageRef, table: pa.Table) -> pa.Table:
    """The table with the global op's keys of each row as internal columns (`internal_column`)."""
    for column, values in op.keys(table).items():
        table = table.append_column(internal_column(ref, column), values)
    return table


def internal_column(ref: StageRef, column: str) -> str:
    return f"{INTERNAL_PREFIX}{ref[0]}_{column}"


def load_marker(layout: RunLayout, path: str) -> dict[str, Any] | None:
    try:
        return read_json(layout.fs, path)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
