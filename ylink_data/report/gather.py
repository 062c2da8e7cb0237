"""Everything the report shows, gathered from a finished run out of core.

Counts come from stats.json (exact). Bytes are text bytes (UTF-8) of the documents: the kept
shards' `text`, and per stage the `text` of the documents `rejected/` holds (as they were when
dropped); with `keep_rejected` off only the output's bytes and the raw input bytes are known.
Distributions come from at most `max_rows` kept and `max_rows` dropped documents: the first rows of
each file, split evenly across files (stated in the report).
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ylink_data.core.redaction import redact, redact_text
from ylink_data.io.runs import Run
from ylink_data.core.schema import DOCUMENT_SCHEMA
from ylink_data.report.sampling import BottomK, file_schema, iter_batches, kept_files, rejected_files

# Numeric columns shown as distributions besides the measure columns of annotate mode.
SCORE_COLUMNS = ("lang_score", "quality_score")
DUP_COLUMNS = ("dup_cluster_id", "dup_cluster_size")
SAMPLE_COLUMNS = ["id", "text", "url", "lang", "lang_score", "quality_score", "reason"]
QUARANTINE_SHOWN = 20  # quarantine entries the report shows in full
# A dedup removal's evidence (`dup_of`: the kept document's id, `dup_similarity`) and what the
# report shows of both documents of a pair.
PAIR_COLUMNS = ["id", "text", "url", "source", "reason", "dup_of", "dup_similarity"]
PAIR_SOURCES = 20  # sources per dedup stage whose pairs are shown: the most removed share first


@dataclass
class StageRow:
    index: int
    name: str
    docs_in: int
    docs_out: int
    dropped: dict[str, int]
    quarantined: int
    seconds: float
    counters: dict[str, int]
    bytes_out: int | None = None  # text bytes of the documents after this stage, when known
    created: int = 0  # rows a fan-out op (chunk, qa_extract) made beyond one per input document
    breakdowns: dict[str, dict[str, int]] = field(default_factory=dict)  # a global op's (stats.json)
    startup_seconds: float = 0.0  # one-time start-up in its workers, not in `seconds` (core/startup.py)

    @property
    def docs_per_second(self) -> float | None:
        return self.docs_in / self.seconds if self.seconds > 0 else None


@dataclass
class ReasonRow:
    reason: str
    stage: str
    count: int
    bytes: int | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DupPair:
    """A removed document next to the document kept in its place (None: not in this run's kept or
    rejected documents, e.g. an earlier run's, from minhash_dedup's index), with their similarity."""

    removed: dict[str, Any]
    kept: dict[str, Any] | None
    similarity: float | None
    kept_note: str = ""  # "dropped later: <reason>" when a later stage removed the kept document


@dataclass
class DupSource:
    """One source's removals by a dedup stage, and a sample of them as pairs."""

    stage: str
    source: str
    docs_in: int | None
    removed: int
    pairs: list[DupPair]


@dataclass
class Threshold:
    low: float | None
    high: float | None
    label: str  # the op and languages it applies to


@dataclass
class ReportData:
    url: str
    manifest: dict[str, Any]
    stats: dict[str, Any]
    info: dict[str, Any]
    keep_rejected: bool
    stages: list[StageRow]
    reasons: list[ReasonRow]
    bytes_note: str
    kept_bytes: int
    kept_rows_read: int
    rejected_rows_read: int
    sample_note: str
    lengths_by_lang: dict[str, list[int]]  # characters of kept documents (sample)
    lang_counts: Counter  # all kept documents
    dropped_lang_counts: Counter  # dropped documents with a language (sample)
    numeric: dict[str, dict[str, list[float]]]  # column -> {"kept": values, "dropped later": values}
    thresholds: dict[str, list[Threshold]]
    cluster_sizes: Counter | None  # clusters by size, when the run wrote dup_cluster_* columns
    quarantine_counts: Counter  # (stage, reason) -> quarantined records
    quarantine: list[dict[str, Any]]  # the first QUARANTINE_SHOWN entries, redacted
    dup_sources: list[DupSource] = field(default_factory=list)  # per dedup stage and source: sample pairs

    @property
    def measure_columns(self) -> list[str]:
        return [c for c in self.numeric if c not in SCORE_COLUMNS]


def gather(run: Run, *, samples_per_reason: int = 3, max_rows: int = 100_000, seed: int = 0) -> ReportData:
    # The config, the quarantine entries shown and the run's URL are redacted again: a run written by
    # an older ylink, or copied by hand, may still hold credentials.
    stats, info = run.stats, redact(_info(run))
    keep_rejected = bool(info.get("config", {}).get("output", {}).get("keep_rejected"))
    stages = [StageRow(i, s["name"], s["in"], s["out"], dict(s.get("dropped", {})), s.get("quarantined", 0),
                       float(s.get("seconds", 0.0)), dict(s.get("counters", {})), created=s.get("created", 0),
                       breakdowns=redact(s.get("breakdowns", {})), startup_seconds=float(s.get("startup_seconds", 0.0)))
              for i, s in enumerate(stats["stages"])]
    stage_of_reason = {r: st.name for st in stages for r in st.dropped}
    base = {f.name for f in DOCUMENT_SCHEMA}

    numeric: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"kept": [], "dropped later": []})
    clusters: dict[str, int] = {}

    # ---- dropped documents: bytes per stage and reason, samples per reason, dropped distributions
    rejected = rejected_files(run)
    per_rejected = math.ceil(max_rows / len(rejected)) if rejected else 0
    reason_bytes: Counter = Counter()
    reason_rows: Counter = Counter()
    stage_bytes: Counter = Counter()
    samplers: dict[str, BottomK] = {}
    dropped_langs: Counter = Counter()
    rejected_read = 0
    pairs = PairSamples(stages, samples_per_reason, seed)
    for stage, path in rejected:
        schema = file_schema(run, path)
        num_cols = _numeric_columns(schema, base)
        seen = 0
        for table in iter_batches(run, path, [*SAMPLE_COLUMNS, *PAIR_COLUMNS, *num_cols, *DUP_COLUMNS]):
            nbytes = pc.binary_length(table.column("text")).to_pylist()
            reasons = table.column("reason").to_pylist()
            for r, b in zip(reasons, nbytes):
                reason_bytes[r] += b or 0
                reason_rows[r] += 1
            stage_bytes[stage] += sum(b or 0 for b in nbytes)
            _add_clusters(clusters, table)
            pairs.add(stage, table)
            sample_cols = [c for c in SAMPLE_COLUMNS if c in table.column_names]
            for r in set(reasons):
                sampler = samplers.setdefault(r, BottomK(samples_per_reason, seed))
                sampler.add(table.select(sample_cols).filter(pc.equal(table.column("reason"), r)))
            if seen < per_rejected:
                part = table.slice(0, per_rejected - seen)
                seen += part.num_rows
                dropped_langs.update(lang for lang in part.column("lang").to_pylist() if lang)
                for c in num_cols:
                    numeric[c]["dropped later"] += _values(part, c)
        rejected_read += seen

    # ---- kept documents (and the kept side of the dedup pairs): exact bytes and languages (two narrow columns), a sample for the rest
    files = kept_files(run)
    per_file = math.ceil(max_rows / len(files)) if files else 0
    kept_bytes, lang_counts = 0, Counter()
    lengths: dict[str, list[int]] = defaultdict(list)
    for path in files:
        schema = file_schema(run, path)
        num_cols = _numeric_columns(schema, base)
        seen = 0
        for table in iter_batches(run, path, ["id", "text", "url", "source", "lang", *num_cols, *DUP_COLUMNS]):
            kept_bytes += pc.sum(pc.binary_length(table.column("text"))).as_py() or 0
            pairs.find(table, "")
            lang_counts.update(_langs(table))
            _add_clusters(clusters, table)
            if seen < per_file:
                part = table.slice(0, per_file - seen)
                seen += part.num_rows
                for lang, n in zip(_langs(part), pc.utf8_length(part.column("text")).to_pylist()):
                    lengths[lang].append(n or 0)
                for c in num_cols:
                    numeric[c]["kept"] += _values(part, c)

    pairs.find_dropped_later(run, rejected)

    # ---- the funnel by bytes
    if all("bytes_out" in s for s in stats["stages"]):  # the run counted text bytes per stage
        for st, s in zip(stages, stats["stages"]):
            st.bytes_out = s["bytes_out"]
        note = ("Bytes are UTF-8 text bytes after each stage, as the run counted them (stats.json): after `read` "
                "the records' text as read (HTML for web pages), after extraction the main text.")
    elif keep_rejected:  # runs made before stats.json counted bytes: rebuild from output + rejected/
        complete = all(reason_rows.get(r, 0) == n for st in stages[1:] for r, n in st.dropped.items())
        after = kept_bytes
        for st in reversed(stages):
            st.bytes_out = after
            after += stage_bytes.get(st.index, 0)
        note = ("Bytes are UTF-8 text bytes: the kept documents' final text plus, for each later stage, the "
                "text of the documents it dropped as it was when dropped (rejected/). Text changed by an op "
                "(extraction, normalisation, line removal) is counted as it was at the end or when dropped, "
                "so the bytes after `read` are main-text bytes, not raw HTML (raw input bytes: see the summary).")
        if not complete:
            note += (" Some dropped documents are missing from rejected/ (quarantined documents, or a run resumed "
                     "with another keep_rejected): bytes before those stages are a lower bound.")
    else:
        stages[-1].bytes_out = kept_bytes
        note = ("keep_rejected is off: only the output's text bytes and the raw input bytes are known. Rerun with "
                "`output.keep_rejected: true` for bytes after each stage and samples of dropped documents.")
    if stats.get("quarantined"):
        note += " Quarantined documents have no text in the run and count for no bytes."

    reasons = []
    for st in stages:
        for r, n in sorted(st.dropped.items(), key=lambda kv: -kv[1]):
            sample = samplers[r].table() if r in samplers else None
            reasons.append(ReasonRow(r, stage_of_reason.get(r, st.name), n,
                                     reason_bytes.get(r) if r in reason_rows else None,
                                     sample.to_pylist() if sample is not None else []))
    kept_sampled = sum(len(v) for v in lengths.values())
    sample_note = (f"Distributions of kept documents: {kept_sampled:,} of {stats['output_records']:,} "
                   f"(the first {per_file:,} rows of each of {len(files)} shard(s)).")
    if rejected:
        sample_note += (f" Dropped documents: {rejected_read:,} of {sum(reason_rows.values()):,} in rejected/ "
                        f"(the first {per_rejected:,} rows of each of {len(rejected)} file(s)); a column an op "
                        "adds exists only for documents dropped after that op.")
    numeric = {c: v for c, v in sorted(numeric.items(), key=lambda kv: _column_order(kv[0])) if v["kept"] or v["dropped later"]}
    quarantine = run.quarantine()
    return ReportData(
        url=redact_text(run.url), manifest=run.manifest, stats=stats, info=info, keep_rejected=keep_rejected,
        stages=stages, reasons=reasons, bytes_note=note, kept_bytes=kept_bytes, kept_rows_read=kept_sampled,
        rejected_rows_read=rejected_read, sample_note=sample_note, lengths_by_lang=dict(lengths),
        lang_counts=lang_counts, dropped_lang_counts=dropped_langs, numeric=numeric,
        thresholds=thresholds(info, list(numeric)),
        cluster_sizes=Counter(clusters.values()) if clusters else None,
        quarantine_counts=Counter((e.get("stage") or "read", e.get("reason") or "error") for e in quarantine),
        quarantine=redact(quarantine[:QUARANTINE_SHOWN]), dup_sources=pairs.sources())


class PairSamples:
    """Dedup removals as pairs, per dedup stage and source: a reproducible sample of removed rows
    (those with `dup_of`) of the sources with the largest share removed (stats.json's breakdowns; the
    first seen where a run has none), then the documents they name, found in the kept shards or in
    the rejected rows of later stages. Memory: `n` pairs for each of `PAIR_SOURCES` sources."""

    def __init__(self, stages: list[StageRow], n: int, seed: int):
        self.n, self.seed = n, seed
        self.stage_name = {st.index: st.name for st in stages}
        self.counts: dict[int, tuple[dict[str, int], dict[str, int]]] = {}
        self.chosen: dict[int, list[str] | None] = {}
        for st in stages:
            seen, removed = st.breakdowns.get("in_by_source"), st.breakdowns.get("removed_by_source") or {}
            self.counts[st.index] = (seen or {}, removed)
            if removed:
                order = sorted(removed, key=lambda src: (-removed[src] / max(1, (seen or {}).get(src, 0) or 1),
                                                        -removed[src], src))
                self.chosen[st.index] = order[:PAIR_SOURCES]
        self.samplers: dict[tuple[int, str], BottomK] = {}
        self.found: dict[str, tuple[dict[str, Any], str]] = {}
        self._wanted: pa.Array | None = None  # the ids the sampled removals name, once sampling is done

    def add(self, stage: int | None, table: pa.Table) -> None:
        if stage is None or "dup_of" not in table.column_names or "source" not in table.column_names:
            return
        table = table.filter(pc.is_valid(table.column("dup_of")))
        chosen = self.chosen.get(stage)
        for source in sorted(set(table.column("source").to_pylist()), key=str):
            key = (stage, source)
            if key not in self.samplers:
                if chosen is not None and source not in chosen:
                    continue
                if chosen is None and sum(k[0] == stage for k in self.samplers) >= PAIR_SOURCES:
                    continue
                self.samplers[key] = BottomK(self.n, self.seed)
            self.samplers[key].add(table.select([c for c in PAIR_COLUMNS if c in table.column_names])
                                   .filter(pc.equal(table.column("source"), source)))

    def wanted(self) -> set[str]:
        return {r["dup_of"] for s in self.samplers.values() for r in (s.table() or pa.table({})).to_pylist()}

    def find(self, table: pa.Table, note: str) -> None:
        """Remember the documents of `table` that a sampled removal names."""
        if not self.samplers:
            return
        if self._wanted is None:
            self._wanted = pa.array(sorted(self.wanted()), pa.string())
        hit = table.filter(pc.is_in(table.column("id"), self._wanted))
        cols = [c for c in ("id", "text", "url", "source", "reason") if c in hit.column_names]
        for row in hit.select(cols).to_pylist():
            self.found.setdefault(row["id"], (row, note))

    def find_dropped_later(self, run: Run, rejected: list[tuple[int | None, str]]) -> None:
        """Named documents a later stage dropped (kept by the dedup stage, then removed)."""
        if not self.samplers or not (self.wanted() - set(self.found)):
            return
        first = min(stage for stage, _ in self.samplers)
        for stage, path in rejected:
            if stage is not None and stage > first:
                for table in iter_batches(run, path, ["id", "text", "url", "source", "reason"]):
                    self.find(table, "dropped later")

    def sources(self) -> list[DupSource]:
        out = []
        for (stage, source), sampler in sorted(self.samplers.items(), key=lambda kv: self._order(*kv[0])):
            seen, removed = self.counts.get(stage, ({}, {}))
            rows = sampler.table().to_pylist() if sampler.table() is not None else []
            pairs = []
            for row in rows:
                kept, note = self.found.get(row["dup_of"], (None, ""))
                if kept is not None and note:
                    note = f"{note}: {kept.get('reason')}"
                sim = row.get("dup_similarity")
                pairs.append(DupPair(row, kept, None if sim is None or _nan(sim) else float(sim), note))
            out.append(DupSource(self.stage_name.get(stage, "?"), source, seen.get(source),
                                 removed.get(source, len(rows)), pairs))
        return out

    def _order(self, stage: int, source: str) -> tuple:
        chosen = self.chosen.get(stage)
        return (stage, chosen.index(source) if chosen and source in chosen else len(chosen or []), str(source))


def thresholds(info: dict[str, Any], columns: list[str]) -> dict[str, list[Threshold]]:
    """The bounds each measure column is checked against, from the run's ops and their parameters
    (ops with `rules()`: Gopher, C4, FineWeb), per language where they differ.

    run.json holds the parameters redacted, and nothing else keeps them. Thresholds survive that:
    they are numbers under plain names, and redaction masks a number only under a secret-looking
    name, which no op parameter has (tests/chaos/test_secret_redaction.py checks both); a string
    parameter it masks (a URL with credentials, a value read from `${VAR}`) still builds the op."""
    from ylink_data.ops import build_op

    out: dict[str, list[Threshold]] = defaultdict(list)
    for name, params in info.get("fingerprinted", {}).get("stages", []):
        try:
            op = build_op(name, params)
        except (KeyError, TypeError, ValueError):
            continue
        score_column = getattr(op, "score_column", None)
        if score_column in columns:  # quality_classifier: min_score or tiers
            if getattr(op, "min_score", None) is not None:
                out[score_column].append(Threshold(op.min_score, None, f"{name} min_score"))
            for tier, low in getattr(op, "tiers", None) or []:
                out[score_column].append(Threshold(low, None, f"{name} tier {tier}"))
        rules, prefix = getattr(op, "rules", None), getattr(op, "column_prefix", None)
        if rules is None or prefix is None:
            continue
        by_bounds: dict[tuple[str, Any, Any], list[str]] = defaultdict(list)
        for lang in ("en", "zh"):
            try:
                for _, measure, low, high in rules(lang):
                    by_bounds[(measure, low, high)].append(lang)
            except (KeyError, NotImplementedError):
                continue
        for (measure, low, high), langs in by_bounds.items():
            column = f"{prefix}{measure}"
            if column in columns and (low is not None or high is not None):
                out[column].append(Threshold(low, high, f"{name} ({', '.join(langs)})"))
    return dict(out)


def _info(run: Run) -> dict[str, Any]:
    try:
        return run.info
    except FileNotFoundError:
        return {}


def _numeric_columns(schema: pa.Schema, base: set[str]) -> list[str]:
    """Numeric columns ops added (measures of annotate mode, scores) and the language score."""
    return [f.name for f in schema if (f.name not in base or f.name in SCORE_COLUMNS)
            and f.name not in DUP_COLUMNS and not f.name.startswith("__")
            and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))]


def _langs(table: pa.Table) -> list[str]:
    if "lang" not in table.column_names:
        return ["?"] * table.num_rows
    return [lang or "?" for lang in table.column("lang").to_pylist()]


def _values(table: pa.Table, column: str) -> list[float]:
    if column not in table.column_names:
        return []
    return [float(v) for v in table.column(column).to_pylist() if v is not None and not _nan(v)]


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _add_clusters(clusters: dict[str, int], table: pa.Table) -> None:
    if not all(c in table.column_names for c in DUP_COLUMNS):
        return
    for cid, size in zip(table.column("dup_cluster_id").to_pylist(), table.column("dup_cluster_size").to_pylist()):
        if cid is not None and size is not None:
            clusters[cid] = size


def _column_order(column: str) -> tuple[int, str]:
    return (SCORE_COLUMNS.index(column) if column in SCORE_COLUMNS else len(SCORE_COLUMNS), column)
