"""The run's accounting: every input record is kept, dropped with a reason, or quarantined.

Tasks report `TaskStats`; the driver adds them up into `stats.json`:
  input_records + created == output_records + sum(all dropped) + quarantined
where `created` counts the rows ops that make several rows of one document (`chunk`, `qa_extract`)
added beyond the first per document: 0 for pipelines without such ops. Per stage, likewise:
  in + created == out + sum(dropped) + quarantined
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import fsspec


@dataclass
class StageStats:
    name: str
    docs_in: int = 0
    docs_out: int = 0
    dropped: Counter = field(default_factory=Counter)
    quarantined: int = 0
    seconds: float = 0.0  # time on documents, summed over tasks (start-up apart: startup_seconds)
    counters: Counter = field(default_factory=Counter)
    # UTF-8 bytes of the documents' text going in and out (for `read`: the input bytes read, and
    # the text of the documents made from them)
    bytes_in: int = 0
    bytes_out: int = 0
    created: int = 0  # rows made beyond one per input row (fan-out ops: chunks, pairs)
    # Named counts a global op gives when its decisions are applied (GlobalOp.decision_breakdowns):
    # minhash_dedup's documents in and removed per source, and its removals' similarities.
    breakdowns: defaultdict = field(default_factory=lambda: defaultdict(Counter))
    # One-time start-up in the stage's workers (core/startup.py: the op's setup, a model or a child
    # process loaded on first use), summed over tasks; not in `seconds`.
    startup_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "in": self.docs_in, "created": self.created, "out": self.docs_out,
                               "dropped": dict(sorted(self.dropped.items())), "quarantined": self.quarantined,
                               "seconds": round(self.seconds, 3), "startup_seconds": round(self.startup_seconds, 3),
                               "bytes_in": self.bytes_in, "bytes_out": self.bytes_out}
        if self.counters:
            out["counters"] = dict(sorted(self.counters.items()))
        if self.breakdowns:
            out["breakdowns"] = {k: dict(sorted(v.items())) for k, v in sorted(self.breakdowns.items())}
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StageStats":
        breakdowns = defaultdict(Counter, {k: Counter(v) for k, v in d.get("breakdowns", {}).items()})
        return cls(d["name"], d["in"], d["out"], Counter(d.get("dropped", {})), d.get("quarantined", 0),
                   d.get("seconds", 0.0), Counter(d.get("counters", {})), d.get("bytes_in", 0), d.get("bytes_out", 0),
                   d.get("created", 0), breakdowns, d.get("startup_seconds", 0.0))

    def add(self, other: "StageStats") -> None:
        self.docs_in += other.docs_in
        self.docs_out += other.docs_out
        self.dropped.update(other.dropped)
        self.quarantined += other.quarantined
        self.seconds += other.seconds
        self.startup_seconds += other.startup_seconds
        self.counters.update(other.counters)
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.created += other.created
        for key, counts in other.breakdowns.items():
            self.breakdowns[key].update(counts)


@dataclass
class TaskStats:
    """What one task did: records read from input (phase 0) and per-stage counts, by stage index
    (0 is `read`, i + 1 is the i-th op of the pipeline)."""

    input_records: int = 0
    input_bytes: int = 0
    stages: dict[int, StageStats] = field(default_factory=dict)

    def stage(self, index: int, name: str) -> StageStats:
        if index not in self.stages:
            self.stages[index] = StageStats(name)
        return self.stages[index]

    def to_json(self) -> dict[str, Any]:
        return {"input_records": self.input_records, "input_bytes": self.input_bytes,
                "stages": {str(i): s.to_json() for i, s in sorted(self.stages.items())}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TaskStats":
        return cls(d["input_records"], d.get("input_bytes", 0),
                   {int(i): StageStats.from_json(s) for i, s in d["stages"].items()})

    def add(self, other: "TaskStats") -> None:
        self.input_records += other.input_records
        self.input_bytes += other.input_bytes
        for i, s in other.stages.items():
            self.stage(i, s.name).add(s)


def run_stats(total: TaskStats, stage_names: list[str], output_records: int) -> dict[str, Any]:
    """stats.json: totals plus one entry per stage in pipeline order (`read` first)."""
    stages = [total.stages.get(i, StageStats(name)).to_json() for i, name in enumerate(stage_names)]
    quarantined = sum(s["quarantined"] for s in stages)
    created = sum(s["created"] for s in stages)
    return {"input_records": total.input_records, "created": created, "output_records": output_records,
            "quarantined": quarantined, "input_bytes": total.input_bytes, "stages": stages}


def records_in(stats: dict[str, Any]) -> str:
    """What went in, as the run's last line says it: the records read and, when the reader passed on
    fewer documents (a WARC's request, metadata and warcinfo records are records, not documents), how
    many documents, the count the phase lines' "docs" start from."""
    read = stats["stages"][0] if stats["stages"] and stats["stages"][0]["name"] == "read" else None
    n = stats["input_records"]
    if read is None or read["out"] == n:
        return f"{n:,} records in"
    other = sum(read["dropped"].values())
    skipped = f"; {other:,} other records skipped, by kind in stats.json's read stage" if other else ""
    return f"{n:,} records in ({read['out']:,} documents{skipped})"


def check_invariant(stats: dict[str, Any]) -> str | None:
    """None if the books balance, else a description of the gap: for the run, input records plus the
    rows fan-out ops created equal the rows kept, dropped and quarantined; for each stage the same
    with its own in/created/out (a stats.json from before `created` counts 0)."""
    dropped = sum(sum(s["dropped"].values()) for s in stats["stages"])
    created = stats.get("created", 0)
    accounted = stats["output_records"] + dropped + stats["quarantined"]
    if accounted != stats["input_records"] + created:
        return (f"accounting gap: {stats['input_records']} input records + {created} created but "
                f"{stats['output_records']} kept + {dropped} dropped + {stats['quarantined']} quarantined = {accounted}")
    for s in stats["stages"]:
        made = s.get("created", 0)
        if s["in"] + made != s["out"] + sum(s["dropped"].values()) + s["quarantined"]:
            return (f"accounting gap in stage {s['name']}: {s['in']} in + {made} created but {s['out']} out + "
                    f"{sum(s['dropped'].values())} dropped + {s['quarantined']} quarantined")
    return None


UNKNOWN_LANG = "?"  # documents without a `lang` (no langid op, or none found), as the report shows them


def token_stats(fs: fsspec.AbstractFileSystem, root: str, shards: list[dict[str, Any]],
                column: str) -> dict[str, Any]:
    """stats.json's `tokens` section: `{"total": N, "documents": D, "by_lang": {...}, "by_tier": {...}}`,
    sums of the published shards' token counts, `column` (the `writes_tokens` of the last op that
    wrote tokens: `num_tokens`, end-of-document ids included for `tokenize`), so they are exact after
    a resume as the shards are (a shard without the column counts nothing). Reads two columns of
    each shard, in batches."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ylink_data.core.storage import join

    total = documents = 0
    by_lang: Counter = Counter()
    by_tier: Counter = Counter()
    for shard in shards:
        with fs.open(join(root, shard["path"]), "rb") as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            if column not in names:
                continue
            columns = [column] + (["lang"] if "lang" in names else [])
            for batch in pf.iter_batches(batch_size=65536, columns=columns):
                table = pa.Table.from_batches([batch])
                n = int(pc.sum(table.column(column)).as_py() or 0)
                total += n
                documents += table.num_rows
                if shard.get("tier") is not None:
                    by_tier[shard["tier"]] += n
                if "lang" not in names:
                    by_lang[UNKNOWN_LANG] += n
                    continue
                table = table.set_column(1, "lang", pc.fill_null(table.column("lang"), UNKNOWN_LANG))
                for row in table.group_by("lang").aggregate([(column, "sum")]).to_pylist():
                    by_lang[row["lang"]] += int(row[f"{column}_sum"] or 0)
    return {"total": total, "documents": documents, "by_lang": dict(sorted(by_lang.items(), key=lambda kv: -kv[1])),
            "by_tier": dict(sorted(by_tier.items()))}


def timing_stats(steps: list, started: float, ended: float, driver_cpu: float) -> dict[str, Any]:
    """stats.json's `timing`: where the run's wall time went, for stragglers and serial steps (the
    report's timeline, bench/bench_scaling.py's model of more workers).
    - `wall_s`: the run, from the start of `run` to stats.json; `driver_cpu_s`: the driver's own CPU;
    - `steps`: every batch of tasks in the order it ran (a phase, a global op's step, publish), its
      `start_s` and `wall_s` (from the run's start), `tasks` and `cpu_s` (the sum of its tasks');
    - `tasks`: for each step by name, a list in task order of each task's `task` number, `start_s`,
      `wall_s`, `cpu_s` (its worker's process tree, children included) and `worker` (host:pid).
    Tasks finished by an earlier attempt of a resumed run are not listed (they did not run in this one).
    `steps` are Scheduler.timings (engine/submit.py)."""
    out: dict[str, Any] = {"wall_s": round(ended - started, 3), "driver_cpu_s": round(driver_cpu, 3),
                           "steps": [], "tasks": {}}
    for step in steps:
        name, k = step.name, 2
        while name in out["tasks"]:  # a step run more than once (rounds of components): numbered
            name, k = f"{step.name} ({k})", k + 1
        tasks = [{"task": step.ids[i], "start_s": round(t[0] - started, 3), "wall_s": round(t[1], 4),
                  "cpu_s": round(t[2], 4), "worker": t[3]} for i, t in sorted(step.tasks.items())]
        out["tasks"][name] = tasks
        out["steps"].append({"name": name, "start_s": round(step.started - started, 3),
                             "wall_s": round(max(step.ended, step.started) - step.started, 3), "tasks": len(tasks),
                             "cpu_s": round(sum(t["cpu_s"] for t in tasks), 3)})
    return out
