"""Benchmark: how a run's speed grows with CPUs (issue 40), measured on this machine's cores and
modelled for 4 to 64 workers from the runs' own per-task timings.

    .venv/bin/python bench/bench_scaling.py [--cpus 1,2] [--workloads e2e,minhash] [--repeats 1]
        [--e2e-files 32] [--e2e-copies 4] [--docs 200000] [--model 1,2,4,8,16,32,64]
        [--execution auto] [--rensa] [--passages FILE] [--json PATH]

Workloads (inputs built into bench/_data, ignored by git):
- `e2e`: `--e2e-files` .warc.gz files, each the bundled crawl (samples/crawl/*.warc.gz) concatenated
  `--e2e-copies` times (bench_cores.py's multi-file input; the issue's is 32 x 4, 235 MB), through
  extract, gopher_repetition, gopher_quality, c4_quality, fineweb_quality and minhash_dedup (defaults);
  `e2e-nodedup`: the same without minhash_dedup;
- `minhash`: minhash_dedup alone (defaults) over `--docs` documents of bench_dedup_verified.py's
  copy-heavy corpus (`build_copies(docs, 8000)`: ~1 KB passages of real Reuters, Gutenberg and
  THUCNews text drawn with replacement, 80% with a one-character edit), JSONL in. Its 8,000 passages
  come from ../shared/data, or from `--passages FILE` (gzipped JSON, written by `--export-passages FILE`, for a
  machine without the shared data): the same passages give the same documents.

Measured: each CPU count N of `--cpus` runs the whole command `ylink run P.yaml --fresh
--no-progress --set ray.num_cpus=N` under `taskset -c 0-(N-1)` (N = 1: core 0), CPU counts
interleaved and their order reversed every other repeat; wall seconds from spawn to exit, the CPU
seconds of the whole process tree (driver, workers, their extractor children: sampled from /proc
every 0.1 s, bench_minhash.TreeMemory), the largest process's peak RSS and the tree's; speed-up T1 /
TN and efficiency T1 / (N x TN). Beside each N, the machine's N-core ceiling: N busy loops (pure
Python) on N cores against one alone (N x t1 / tN: 1.0 per core on idle cores).

Modelled (`model`): the makespan for W workers from a measured run's stats.json `timing` (the run
at 1 CPU by default: its tasks ran alone, one after the other, in the order the scheduler hands
them out): every batch (phase, global step, publish) is list-scheduled on W workers in that order,
each task to the first worker free (what engine/workers.py and the Ray executor do: a task per
free worker, longest first, engine/submit.longest_first), batches one after the other (each waits
for the previous: a global phase needs all of a phase), plus the serial parts: the command's
start-up and exit (wall of the command - the run's `timing.wall_s`), the driver's own time between
and inside batches (`timing.wall_s` - the batches' task time), and, for W > 1, the worker
processes' start (the time from the run's start to the first task of a measured multi-CPU run, less
the 1-CPU run's) and each worker's first-task warm-up (its first phase-0 task's extra time in that
run). What the model leaves out is said in its output: tasks slowing down as more cores share the
memory bus and caches (the measured counts show it: CPU seconds per task at N CPUs against 1).
The model is checked against every measured N (`model / measured`).

`--rensa`: rensa's RMinHash + RMinHashLSH query-then-insert loop (bench_dedup_verified.py's
`rensa-loop`, its whole command on core 0) on the same corpus, beside the 1-CPU `ylink run`.
Prints Markdown; `--json` writes everything measured.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import heapq
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cores import multi_file_input  # noqa: E402
from bench_minhash import REPO, run_measured, ylink_command  # noqa: E402

DATA = REPO / "bench" / "_data"
OUT = REPO / "bench" / "_out" / "scaling"
E2E_STAGES = [{"extract": {}}, {"gopher_repetition": {}}, {"gopher_quality": {}}, {"c4_quality": {}},
              {"fineweb_quality": {}}]
PARAGRAPHS = 8000


# ----------------------------------------------------------------------------- inputs


def e2e_input(files: int, copies: int) -> list[Path]:
    """`files` .warc.gz files, each the bundled crawl's .warc.gz files concatenated `copies` times."""
    return multi_file_input(files, copies)


def copies_input(docs: int, passages_file: str | None) -> Path:
    """bench_dedup_verified's copy-heavy corpus of `docs` documents (its recipe, its seed), from the
    shared data or from a file of the same passages."""
    import bench_dedup_verified as bdv

    if passages_file:
        saved = json.loads(gzip.decompress(Path(passages_file).read_bytes()).decode("utf-8"))
        bdv.real_passages = lambda count: (saved["texts"], saved["zh"], saved["sources"])
    return bdv.build_copies(docs, PARAGRAPHS)


def export_passages(path: str) -> None:
    import bench_dedup_verified as bdv

    texts, zh, sources = bdv.real_passages(PARAGRAPHS)
    Path(path).write_bytes(gzip.compress(json.dumps({"texts": texts, "zh": zh, "sources": sources},
                                                    ensure_ascii=False).encode("utf-8"), mtime=0))
    print(f"{len(texts)} passages -> {path} ({Path(path).stat().st_size / 1e6:.1f} MB)")


def pipeline(name: str, paths: list[str], fmt: str | None, stages: list, out: Path, execution: str) -> Path:
    import yaml

    config = OUT / f"{name}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({
        "name": f"scaling-{name}", "input": {"paths": paths, **({"format": fmt} if fmt else {})},
        "output": {"path": str(out)}, "stages": stages, "ray": {"execution": execution}}, sort_keys=False))
    return config


# ----------------------------------------------------------------------------- measuring


def cores(n: int) -> str:
    return "0" if n == 1 else f"0-{n - 1}"


def pinned(cmd: list[str], n: int) -> list[str]:
    """`cmd` on cores 0..n-1: under `taskset`, or where there is none (a bare image) through
    `os.sched_setaffinity`, which the command and its children inherit as taskset's."""
    if shutil.which("taskset"):
        return ["taskset", "-c", cores(n)] + cmd
    return [sys.executable, "-c", f"import os, sys; os.sched_setaffinity(0, range({n})); os.execvp(sys.argv[1], sys.argv[1:])",
            *cmd]


def ceiling(n: int) -> float:
    """N busy loops on N cores against one alone: N x t1 / tN (N on idle cores)."""
    code = "x = 0\nfor i in range(6_000_000): x += i\n"

    def loops(k: int) -> float:
        started = time.perf_counter()
        procs = [subprocess.Popen(pinned([sys.executable, "-c", code], k)) for _ in range(k)]
        for p in procs:
            p.wait()
        return time.perf_counter() - started

    return n * loops(1) / loops(n) if n > 1 else 1.0


def measure(workload: str, config: Path, out: Path, n: int, repeat: int, sets: list[str] = ()) -> dict:
    log = OUT / f"{workload}-{n}cpu-r{repeat}.log"
    cmd = ylink_command() + ["run", str(config), "--fresh", "--no-progress", "--set", f"ray.num_cpus={n}"]
    for s in sets:
        cmd += ["--set", s]
    r = run_measured(pinned(cmd, n), log, None, interval=0.1)  # raises, with the log's end, when the run fails
    stats = json.loads((out / "stats.json").read_text())
    return {"wall_s": r["wall"], "cpu_s": r["cpu_s"], "rss_max_proc_gb": r["rss_max_proc_gb"],
            "rss_sum_gb": r["rss_sum_gb"], "pss_sum_gb": r["pss_sum_gb"], "procs": r["procs"],
            "input_records": stats["input_records"], "output_records": stats["output_records"],
            "input_bytes": stats["input_bytes"], "timing": stats["timing"], "work_bytes": work_bytes(out)}


def work_bytes(out: Path) -> int:
    """Bytes of the run folder (its shards, and what is left of its work files: none once finished)."""
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def rensa_side(folder: Path, repeat: int) -> dict:
    result = OUT / f"rensa-r{repeat}.json"
    cmd = [sys.executable, str(REPO / "bench" / "bench_dedup_verified.py"), "--child", "rensa-loop", "--input",
           str(folder), "--result", str(result), "--threshold", "0.8"]
    r = run_measured(pinned(cmd, 1), OUT / f"rensa-r{repeat}.log", None, interval=0.1)
    got = json.loads(result.read_text())
    return {"wall_s": r["wall"], "cpu_s": r["cpu_s"], "loop_s": got["work_s"], "removed": len(got["dropped"]),
            "rss_max_proc_gb": r["rss_max_proc_gb"]}


# ----------------------------------------------------------------------------- the model


def first_task_lag(timing: dict) -> float:
    """From the run's start to its first task's start (the worker processes' start, the plan)."""
    starts = [t["start_s"] for tasks in timing["tasks"].values() for t in tasks]
    return min(starts) if starts else 0.0


def warm_up(timing: dict) -> float:
    """Each worker's first phase-0 task's extra time over the median of the phase's other tasks, per
    byte alike (tasks are cut to about the same size): the median over workers, at least 0."""
    tasks = timing["tasks"].get("phase 0", [])
    firsts: dict[str, dict] = {}
    for t in sorted(tasks, key=lambda t: t["start_s"]):
        firsts.setdefault(t["worker"], t)
    rest = [t["wall_s"] for t in tasks if firsts.get(t["worker"]) is not t]
    if not rest or not firsts:
        return 0.0
    typical = statistics.median(rest)
    return max(0.0, statistics.median(t["wall_s"] - typical for t in firsts.values()))


def schedule(walls: list[float], workers: int, first_extra: float = 0.0) -> tuple[float, int]:
    """Makespan of tasks handed out in this order, each to the first free worker (a worker's first
    task of the run takes `first_extra` more); and how many workers got a task."""
    free = [(0.0, w) for w in range(workers)]
    used: set[int] = set()
    end = 0.0
    for wall in walls:
        at, w = heapq.heappop(free)
        finish = at + wall + (first_extra if w not in used else 0.0)
        used.add(w)
        end = max(end, finish)
        heapq.heappush(free, (finish, w))
    return end, len(used)


def model(base: dict, workers: int, start_lag: float = 0.0, warm: float = 0.0, slowdown: float = 1.0) -> dict:
    """The modelled wall of a run like `base` (a measured run: its command wall and stats timing) on
    `workers` workers. `start_lag`: the extra time to the first task with worker processes (their
    start); `warm`: each worker's first-task warm-up; `slowdown`: tasks' time factor at this count
    (1.0: as measured at 1 CPU)."""
    timing = base["timing"]
    steps = []
    busy = 0.0  # the batches' makespans
    task_time = 0.0  # the base run's time inside tasks
    for k, step in enumerate(timing["steps"]):
        tasks = sorted(timing["tasks"][step["name"]], key=lambda t: t["start_s"])  # as handed out
        walls = [t["wall_s"] * slowdown for t in tasks]
        task_time += sum(t["wall_s"] for t in tasks)
        span, used = schedule(walls, workers, warm if (k == 0 and workers > 1) else 0.0)
        steps.append({"name": step["name"], "tasks": len(tasks), "makespan_s": round(span, 3), "workers_used": used,
                      "longest_task_s": round(max(walls, default=0.0), 3)})
        busy += span
    driver = max(0.0, timing["wall_s"] - task_time)  # the driver's own time: planning, between tasks
    command = max(0.0, base["wall_s"] - timing["wall_s"])  # interpreter start, config, exit
    total = command + driver + busy + (start_lag if workers > 1 else 0.0)
    return {"workers": workers, "wall_s": round(total, 3), "serial_s": round(command + driver, 3),
            "batches_s": round(busy, 3), "start_lag_s": round(start_lag if workers > 1 else 0.0, 3), "steps": steps}


# ----------------------------------------------------------------------------- report


def summarise(workload: str, runs: dict[int, list[dict]], model_counts: list[int], ceilings: dict[int, list[float]]
              ) -> dict:
    med = {n: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "rss_max_proc_gb", "rss_sum_gb")}
           for n, rs in runs.items()}
    t1 = med[1]["wall_s"] if 1 in med else None
    base = min(runs[1], key=lambda r: r["wall_s"]) if 1 in runs else None
    multi = [n for n in sorted(runs) if n > 1]
    lag = warm = 0.0
    slowdown: dict[int, float] = {}
    if base and multi:
        ref = min(runs[multi[0]], key=lambda r: r["wall_s"])
        lag = max(0.0, first_task_lag(ref["timing"]) - first_task_lag(base["timing"]))
        warm = warm_up(ref["timing"])
        base_cpu = sum(s["cpu_s"] for s in base["timing"]["steps"])
        for n in multi:
            cpu = statistics.median(sum(s["cpu_s"] for s in r["timing"]["steps"]) for r in runs[n])
            slowdown[n] = cpu / base_cpu if base_cpu else 1.0
    rows = []
    for n in sorted(set(runs) | set(model_counts)):
        row: dict = {"cpus": n}
        if n in med:
            row.update(measured_wall_s=med[n]["wall_s"], cpu_s=med[n]["cpu_s"], rss_max_proc_gb=med[n]["rss_max_proc_gb"],
                       rss_sum_gb=med[n]["rss_sum_gb"], ceiling=statistics.median(ceilings.get(n, [1.0])))
            if t1:
                row.update(speedup=t1 / med[n]["wall_s"], efficiency=t1 / (n * med[n]["wall_s"]))
        if base:
            m = model(base, n, lag, warm)
            row["model"] = m
            row["model_wall_s"] = m["wall_s"]
            row["model_efficiency"] = base["wall_s"] / (n * m["wall_s"])
            if n in med:
                row["model_over_measured"] = m["wall_s"] / med[n]["wall_s"]
            # CPU seconds for n workers: the 1-CPU run's, with n workers' start and warm-up
            extra = (n - 1) * (runs_cpu_per_worker(runs, base) if multi else 0.0)
            row.setdefault("cpu_s_model", base["cpu_s"] + extra)
        rows.append(row)
    return {"workload": workload, "input_bytes": base["input_bytes"] if base else None,
            "input_records": base["input_records"] if base else None, "rows": rows, "start_lag_s": lag,
            "warm_up_s": warm, "task_cpu_growth": slowdown}


def runs_cpu_per_worker(runs: dict[int, list[dict]], base: dict) -> float:
    """CPU seconds each worker beyond the first adds (its start, its warm-up), from the multi-CPU runs
    measured: (CPU at N - CPU at 1) / (N - 1), the smallest N > 1."""
    n = min(k for k in runs if k > 1)
    return max(0.0, (statistics.median(r["cpu_s"] for r in runs[n]) - base["cpu_s"]) / (n - 1))


def markdown(summary: dict) -> str:
    lines = [f"**{summary['workload']}**: {summary['input_records']:,} records, {summary['input_bytes'] / 1e6:.0f} MB in; "
             f"modelled with start lag {summary['start_lag_s']:.2f} s, first-task warm-up {summary['warm_up_s']:.2f} s per "
             f"worker; tasks' CPU at N CPUs / at 1: "
             + (", ".join(f"{n}: {g:.2f}" for n, g in summary["task_cpu_growth"].items()) or "-"), "",
             "| CPUs | measured wall s | speed-up | efficiency | N-core ceiling | CPU s (tree) | largest process GB | "
             "model wall s | model / measured | model efficiency | model CPU s | tasks of the largest batch per worker |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in summary["rows"]:
        def f(key, fmt=".2f", suffix=""):
            return f"{r[key]:{fmt}}{suffix}" if key in r else ""
        largest = max(r["model"]["steps"], key=lambda s: s["makespan_s"]) if "model" in r else None
        per = f"{largest['tasks'] / r['cpus']:.1f} ({largest['name']})" if largest else ""
        lines.append(f"| {r['cpus']} | {f('measured_wall_s')} | {f('speedup', '.2f', 'x')} | {f('efficiency')} | "
                     f"{f('ceiling')} | {f('cpu_s', '.1f')} | {f('rss_max_proc_gb')} | {f('model_wall_s')} | "
                     f"{f('model_over_measured')} | {f('model_efficiency')} | {f('cpu_s_model', '.1f')} | {per} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpus", default="1,2")
    ap.add_argument("--workloads", default="e2e,minhash")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--e2e-files", type=int, default=32)
    ap.add_argument("--e2e-copies", type=int, default=4)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--model", default="1,2,4,8,16,32,64")
    ap.add_argument("--execution", default="auto", help="ray.execution of the runs (auto: worker processes)")
    ap.add_argument("--rensa", action="store_true", help="rensa's loop on the minhash corpus beside the 1-CPU run")
    ap.add_argument("--passages", help="the copy corpus's passages from this file (--export-passages)")
    ap.add_argument("--export-passages", help="write the copy corpus's passages to this file and stop")
    ap.add_argument("--deadline-s", type=float, default=0, help="skip runs that would start after this many seconds")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to every `ylink run` (e.g. input.split_bytes=8388608: the tasks of before issue 40)")
    ap.add_argument("--json", help="write everything measured here")
    args = ap.parse_args()
    if args.export_passages:
        export_passages(args.export_passages)
        return
    started = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    counts = [int(c) for c in args.cpus.split(",")]
    usable = len(os.sched_getaffinity(0))
    if max(counts) > usable:
        raise SystemExit(f"--cpus {args.cpus}: this process may use {usable} CPUs")
    model_counts = [int(c) for c in args.model.split(",")]
    workloads = {}
    for w in args.workloads.split(","):
        out = OUT / f"run-{w}"
        if w in ("e2e", "e2e-nodedup"):
            paths = [str(p) for p in e2e_input(args.e2e_files, args.e2e_copies)]
            stages = E2E_STAGES + ([{"minhash_dedup": {}}] if w == "e2e" else [])
            workloads[w] = (pipeline(w, paths, None, stages, out, args.execution), out)
        elif w == "minhash":
            folder = copies_input(args.docs, args.passages)
            workloads[w] = (pipeline(w, [str(folder / "part-*.jsonl")], "jsonl", [{"minhash_dedup": {}}], out,
                                     args.execution), out)
        else:
            raise SystemExit(f"unknown workload {w}")
    runs: dict[str, dict[int, list[dict]]] = {w: {} for w in workloads}
    ceilings: dict[int, list[float]] = {}
    rensa: list[dict] = []
    skipped = []
    for r in range(args.repeats):
        order = counts if r % 2 == 0 else counts[::-1]
        for n in order:
            if n > 1:
                ceilings.setdefault(n, []).append(ceiling(n))
            for w, (config, out) in workloads.items():
                if args.deadline_s and time.perf_counter() - started > args.deadline_s:
                    skipped.append(f"{w} {n} CPUs, repeat {r + 1}")
                    continue
                got = measure(w, config, out, n, r, args.set)
                runs[w].setdefault(n, []).append(got)
                print(f"  repeat {r + 1} {w} {n} CPUs: {got['wall_s']:.2f} s, CPU {got['cpu_s']:.1f} s, "
                      f"{got['output_records']:,} kept", file=sys.stderr, flush=True)
                if w == "minhash" and n == 1 and args.rensa and not (args.deadline_s and time.perf_counter() - started > args.deadline_s):
                    rensa.append(rensa_side(copies_input(args.docs, args.passages), r))
                    print(f"  repeat {r + 1} rensa loop: {rensa[-1]['wall_s']:.2f} s", file=sys.stderr, flush=True)
    for w, (config, out) in workloads.items():
        kept = {n: {x["output_records"] for x in rs} for n, rs in runs[w].items()}
        if len({k for ks in kept.values() for k in ks}) > 1:
            raise SystemExit(f"{w}: the kept counts differ between CPU counts: {kept}")
        shutil.rmtree(out, ignore_errors=True)
    summaries = [summarise(w, runs[w], model_counts, ceilings) for w in workloads if runs[w].get(1)]
    machine = (f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores ({usable} usable), python "
               f"{platform.python_version()}; {dt.datetime.now(dt.timezone.utc).isoformat(timespec='minutes')}; "
               f"load average {os.getloadavg()[0]:.1f}; ray.execution {args.execution}; repeats {args.repeats}"
               + (f"; --set {' '.join(args.set)}" if args.set else ""))
    text = [f"machine: {machine}", ""]
    for s in summaries:
        text += [markdown(s), ""]
    if rensa:
        y1 = statistics.median(x["wall_s"] for x in runs["minhash"][1])
        rw = statistics.median(x["wall_s"] for x in rensa)
        text.append(f"minhash per core (whole commands on core 0, start-up included): ylink run {y1:.2f} s, "
                    f"rensa loop {rw:.2f} s (its loop alone {statistics.median(x['loop_s'] for x in rensa):.2f} s); "
                    f"rensa / ylink = **{rw / y1:.2f}**")
    if skipped:
        text.append(f"skipped past --deadline-s: {', '.join(skipped)}")
    print("\n".join(text))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "args": vars(args), "runs": runs,
                                               "ceilings": ceilings, "rensa": rensa, "summaries": summaries,
                                               "skipped": skipped, "markdown": "\n".join(text)}, indent=1))


if __name__ == "__main__":
    main()
