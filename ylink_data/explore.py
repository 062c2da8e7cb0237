"""Looking at a finished run from a notebook, to choose thresholds before a full run.

- `sample_rejected(run, "gopher_quality", n=10)`: a reproducible sample of dropped documents.
- `preview_op(run, "gopher_quality", {"min_doc_words": 100})`: reruns one op, with other
  parameters, on a sample of the run's documents and compares its verdicts with the run's.

Samples are the documents with the smallest hash of (seed, id): the same run and seed give the same
sample, and the run is read batch by batch (memory for `n` documents only).

What a preview can say: kept documents carry their final text (after every op of the run), and a
document in `rejected/` its text when it was dropped. A document the run dropped at an earlier stage
than the op never reached it; it is counted as `not reached` and left out of the comparison. An op
that is not in the run is compared as if it came last. Ops that need the whole corpus (dedup, a
`top_fraction` classifier) cannot be previewed on a sample: use `ylink_data.text.dedup.near_duplicates`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

import pyarrow as pa
import pyarrow.compute as pc

from ylink_data.core.errors import YlinkError
from ylink_data.report.sampling import iter_batches, reason_mask, rejected_files, sample_tables
from ylink_data.io.runs import Run, open_run
from ylink_data.core.schema import DOCUMENT_SCHEMA

# "auto" (preview_op's default): kept and rejected documents when the run kept its rejected/ (what a
# loosened threshold brings back is there), kept ones only otherwise, said in the result. "all" is
# "both" by the name people try first.
Source = Literal["auto", "kept", "rejected", "both", "all"]
SOURCES = ("auto", "kept", "rejected", "both", "all")
NO_REJECTED = ("the run kept no rejected/ documents, so what a looser setting brings back cannot be shown: "
               "rerun it with output.keep_rejected: true")
_STAGE = "__stage"
_REASON = "reason"


def sample_rejected(run: Run | str, reason: str | None = None, n: int = 10, seed: int = 0) -> pa.Table:
    """`n` documents the run dropped (needs `keep_rejected: true`), with their `reason`; `reason`
    matches exactly or as a prefix (`gopher_quality` matches `gopher_quality:word_count`)."""
    run = _open(run)
    table = sample_tables(_rejected_batches(run, reason), n, seed)
    if table is None:
        return DOCUMENT_SCHEMA.append(pa.field(_REASON, pa.string())).empty_table()
    return table.drop_columns([_STAGE])


def sample_documents(run: Run | str, n: int = 1000, seed: int = 0, source: Source = "kept") -> pa.Table:
    """`n` documents of the run: kept ones, dropped ones (`reason` set), or both (`all`, or `auto`
    when the run has rejected/ documents)."""
    run = _open(run)
    source = _resolve_source(run, source)
    batches: list[Iterator[pa.Table]] = []
    if source in ("kept", "both"):
        batches.append(_kept_batches(run))
    if source in ("rejected", "both"):
        batches.append(_rejected_batches(run, None))
    table = sample_tables((t for it in batches for t in it), n, seed)
    return table if table is not None else DOCUMENT_SCHEMA.empty_table()


@dataclass
class PreviewResult:
    """One op rerun on a sample. `table` has a row per sampled document: its id, url, lang, text,
    `run_reason` (what the run did to it: None if kept), `run_verdict` (`passed`, `dropped` by this
    op, or `not reached`: dropped before it), `preview_reason` (None if the preview keeps it) and
    any columns the op added (measures in annotate mode, scores)."""

    op: str
    """The op rerun (its name in the pipeline)."""
    params: dict[str, Any]
    """Its parameters in the preview: the run's, with `changed` applied."""
    changed: dict[str, Any]
    """The parameters given to `preview_op`, those that differ from the run's."""
    table: pa.Table
    """One row per sampled document (see the class docstring)."""
    errors: int = 0
    """Sampled documents the op failed on in the preview (each would be quarantined in a run)."""
    counts: dict[str, int] = field(default_factory=dict)
    """How many sampled documents passed this op in the run, were dropped by it, or never reached it."""
    note: str | None = None
    """What the preview could not look at (a run without rejected/: kept documents only), or None."""

    @property
    def sampled(self) -> int:
        """Documents in the sample."""
        return self.table.num_rows

    def _where(self, verdict: str | None = None, preview_dropped: bool | None = None) -> pa.Table:
        mask = pa.array([True] * self.table.num_rows)
        if verdict is not None:
            mask = pc.and_(mask, pc.equal(self.table.column("run_verdict"), verdict))
        if preview_dropped is not None:
            valid = pc.is_valid(self.table.column("preview_reason"))
            mask = pc.and_(mask, valid if preview_dropped else pc.invert(valid))
        return self.table.filter(mask)

    @property
    def newly_dropped(self) -> pa.Table:
        """Documents that passed this op in the run and that the preview drops."""
        return self._where("passed", True)

    @property
    def newly_kept(self) -> pa.Table:
        """Documents the run dropped with this op's reasons and that the preview keeps."""
        return self._where("dropped", False)

    @property
    def run_reasons(self) -> Counter:
        """The run's drop reasons of this op among the sampled documents, counted."""
        return Counter(r for r, v in zip(self.table.column("run_reason").to_pylist(),
                                         self.table.column("run_verdict").to_pylist()) if v == "dropped")

    @property
    def preview_reasons(self) -> Counter:
        """The preview's drop reasons among the documents the op saw in the run, counted."""
        compared = self._where(preview_dropped=True)
        return Counter(r for r, v in zip(compared.column("preview_reason").to_pylist(),
                                         compared.column("run_verdict").to_pylist()) if v != "not reached")

    def to_pandas(self):
        """`table` as a pandas DataFrame."""
        return self.table.to_pandas()

    def summary(self) -> dict[str, int]:
        """The counts: sampled, passed, dropped, not reached, dropped by the run and by the preview,
        newly dropped, newly kept, errors."""
        return {"sampled": self.sampled, **self.counts, "run_dropped": sum(self.run_reasons.values()),
                "preview_dropped": sum(self.preview_reasons.values()),
                "newly_dropped": self.newly_dropped.num_rows, "newly_kept": self.newly_kept.num_rows,
                "errors": self.errors}

    def __repr__(self) -> str:
        s = self.summary()
        changed = ", ".join(f"{k}={v!r}" for k, v in self.changed.items()) or "the run's parameters"
        compared = s["passed"] + s["dropped"]
        lines = [f"PreviewResult: {self.op} with {changed}, on {s['sampled']:,} sampled documents",
                 f"  compared: {compared:,} (passed the op in the run: {s['passed']:,}, dropped by it: "
                 f"{s['dropped']:,}); not reached (dropped before the op): {s['not reached']:,}",
                 f"  the run dropped {s['run_dropped']:,}, the preview drops {s['preview_dropped']:,}: "
                 f"{s['newly_dropped']:,} newly dropped, {s['newly_kept']:,} newly kept"
                 + (f", {s['errors']:,} errors" if s["errors"] else "")]
        if self.note:
            lines.append(f"  note: {self.note}")
        for title, counter in (("run", self.run_reasons), ("preview", self.preview_reasons)):
            if counter:
                lines.append(f"  {title} reasons: " + ", ".join(f"{r} {n}" for r, n in counter.most_common()))
        for title, table in (("newly dropped", self.newly_dropped), ("newly kept", self.newly_kept)):
            for row in table.slice(0, 3).to_pylist():
                text = " ".join((row.get("text") or "").split())[:100]
                why = row.get("preview_reason") or row.get("run_reason")
                lines.append(f"  {title}: {row['id'][:12]} {why} {row.get('url') or ''}\n      {text!r}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the summary, not a dataclass dump
        p.text(repr(self))


def preview_op(run_or_table: Run | str | pa.Table, op_name: str, params: dict[str, Any] | None = None,
               n: int = 1000, seed: int = 0, source: Source = "auto") -> PreviewResult:
    """Rerun `op_name` on a sample of `n` documents with `params` changed (over the run's own
    parameters for that op, or the op's defaults if the run has none) and compare with the run.
    `run_or_table` may also be a table of documents (a `reason` column marks dropped ones).
    `source="auto"` samples kept and rejected documents when the run has rejected/ (run with
    `output.keep_rejected: true`), so a loosened threshold shows what it brings back (`newly_kept`);
    without rejected/ it samples kept documents and says so in `note`."""
    from ylink_data.ops import build_op, op_class, validate_stages

    run = None if isinstance(run_or_table, pa.Table) else _open(run_or_table)
    base = _run_params(run, op_name) if run is not None else {}
    changed = dict(params or {})
    ((name, full),) = validate_stages([{op_name: {**base, **changed}}])
    if op_class(name).is_global(full) or not hasattr(op_class(name), "process"):
        raise YlinkError(f"{op_name} needs the whole corpus and cannot be previewed on a sample "
                         "(for near duplicates of a sample: ylink_data.text.dedup.near_duplicates)")
    if run is None:
        assert isinstance(run_or_table, pa.Table)
        sample = sample_tables([run_or_table], n, seed) if run_or_table.num_rows else run_or_table
        op_stage = None
    else:
        source = _resolve_source(run, source)
        sample = sample_documents(run, n, seed, source)
        op_stage = _op_stage(run, op_name)
    if sample is None or sample.num_rows == 0:
        raise YlinkError(f"no documents to preview {op_name} on (source={source!r})")
    run_reasons = sample.column(_REASON).to_pylist() if _REASON in sample.column_names else [None] * sample.num_rows
    stages = sample.column(_STAGE).to_pylist() if _STAGE in sample.column_names else [None] * sample.num_rows
    verdicts = [_run_verdict(op_name, r, s, op_stage) for r, s in zip(run_reasons, stages)]

    op = build_op(name, full)
    docs = _as_documents(sample)
    try:
        op.setup()
        result = op.process(docs)
    finally:
        op.teardown()  # what setup started (extract's child process) ends with the preview
    dropped = result.dropped or [None] * docs.num_rows
    errors = result.errors or [None] * docs.num_rows
    preview = [f"error: {e}" if e else d for d, e in zip(dropped, errors)]
    added = [c for c in result.table.column_names if c not in docs.column_names]
    out = pa.table({
        "id": docs.column("id"), "url": docs.column("url"), "lang": docs.column("lang"),
        "text": result.table.column("text"), "run_reason": pa.array(run_reasons, pa.string()),
        "run_verdict": pa.array(verdicts, pa.string()), "preview_reason": pa.array(preview, pa.string()),
        **{c: result.table.column(c) for c in added}})
    counts = Counter(verdicts)
    return PreviewResult(op_name, full, changed, out, errors=sum(e is not None for e in errors),
                         counts={k: counts.get(k, 0) for k in ("passed", "dropped", "not reached")},
                         note=NO_REJECTED if run is not None and source == "kept" and not rejected_files(run) else None)


# ----------------------------------------------------------------------------- helpers


def _open(run: Run | str) -> Run:
    return run if isinstance(run, Run) else open_run(str(run))


def _resolve_source(run: Run, source: str) -> str:
    """kept, rejected or both, from what the caller asked and what the run holds."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(map(repr, SOURCES))}, not {source!r}")
    if source == "auto":
        return "both" if rejected_files(run) else "kept"
    return "both" if source == "all" else source


def _kept_batches(run: Run) -> Iterator[pa.Table]:
    for path in run.shard_paths:
        yield from iter_batches(run, path)


def _rejected_batches(run: Run, reason: str | None) -> Iterator[pa.Table]:
    files = rejected_files(run)
    if not files and not run.info.get("config", {}).get("output", {}).get("keep_rejected"):
        raise YlinkError(f"{run.url} has no rejected/ documents: run it with output.keep_rejected: true")
    for stage, path in files:
        for table in iter_batches(run, path):
            if reason is not None:
                table = table.filter(reason_mask(table.column(_REASON), reason))
            if table.num_rows:
                yield table.append_column(_STAGE, pa.array([stage] * table.num_rows, pa.int32()))


def _run_params(run: Run, op_name: str) -> dict[str, Any]:
    for name, params in run.info.get("fingerprinted", {}).get("stages", []):
        if name == op_name:
            return dict(params)
    return {}


def _op_stage(run: Run, op_name: str) -> int | None:
    for i, stage in enumerate(run.stats["stages"]):
        if stage["name"] == op_name:
            return i
    return None


def _run_verdict(op_name: str, reason: str | None, stage: int | None, op_stage: int | None) -> str:
    if reason is None:
        return "passed"
    if reason == op_name or reason.startswith(f"{op_name}:"):
        return "dropped"
    if op_stage is not None and stage is not None and stage > op_stage:
        return "passed"  # dropped by a later op: this one let it through
    return "not reached"


def _as_documents(table: pa.Table) -> pa.Table:
    """The sample in the document schema only: columns ops added in the run are left out, so an op
    that adds them again (annotate mode) starts from a clean table."""
    columns = []
    for f in DOCUMENT_SCHEMA:
        if f.name in table.column_names:
            columns.append(table.column(f.name).cast(f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.table(columns, schema=DOCUMENT_SCHEMA)


__all__ = ["sample_rejected", "sample_documents", "preview_op", "PreviewResult"]
