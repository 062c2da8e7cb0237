"""Benchmark: does a run use both cores? The same pipeline as whole commands on 1 CPU and on 2
(issue 17, point 3: 2 CPUs should give at least 1.8x the throughput of 1).

    .venv/bin/python bench/bench_cores.py [--repeats 3] [--copies 40] [--files 16] [--file-copies 4] [--executions auto,ray]

Each command is `python -m ylink_data run P.yaml --no-progress --fresh --set ray.num_cpus=N` under
`taskset` on N cores (core 0; cores 0-1), default `input.split_bytes` (null: tasks sized from the
input), with `--set ray.execution=E` for each of `--executions` (default `auto`: the driver on one
CPU, worker processes on two; `ray`: every batch on an embedded Ray, as every run did before). CPU counts take turns in every round, so the noise of other jobs on this shared machine
falls on both alike. Reported per case: median wall seconds of the whole command, and of its map
phases and its publish phase as the run itself reports them (the start-up of Ray and the driver
are the rest), and the ratios 1 CPU / 2 CPUs. The machine's own ceiling is measured in the same
rounds: a pure-Python busy loop alone on core 0, and two such loops at once on cores 0-1; their
throughput ratio (2 x one loop's time / the pair's) is what two cores can give at that moment on a
machine other jobs share, and the pipeline's ratio is to be read against it.

Inputs (built into bench/_data, ignored by git), real pages only: the bundled crawl
(samples/crawl/*.warc.gz) concatenated `--copies` times into one .warc.gz (bench_spine.py's file:
one large file), and `--files` files each holding the bundled crawl `--file-copies` times (4: a
multi-file input).
Cases: the bare spine (`stages: []`) on both inputs, and `extract` on 4 of the files (4 tasks).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchtools import two_core_ceiling  # noqa: E402
from bench_spine import DATA, REPO, build_input  # noqa: E402

OUT = REPO / "bench" / "_out" / "cores"
_PHASE = re.compile(r"^(phase \d+|publish shards)\b.* in ([\d.]+)s", re.M)


def multi_file_input(files: int, copies: int) -> list[Path]:
    parts = sorted((REPO / "samples" / "crawl").glob("*.warc.gz"))
    one = b"".join(p.read_bytes() for p in parts) * copies
    folder = DATA / (f"cores-f{files}" + (f"-x{copies}" if copies != 4 else ""))
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"crawl-{k:03d}.warc.gz" for k in range(files)]
    for p in paths:
        if not p.exists() or p.stat().st_size != len(one):
            p.write_bytes(one)
    return paths


def run(name: str, paths: list[Path], stages: list, cpus: int, execution: str) -> tuple[float, float, float, dict]:
    """(wall, map phases, publish, stats) of one whole command."""
    out = OUT / name
    config = OUT / f"{name}.yaml"
    config.write_text(json.dumps({"name": f"bench-cores-{name}", "input": {"paths": [str(p) for p in paths]},
                                  "output": {"path": str(out)}, "stages": stages}))
    cmd = ["taskset", "-c", "0" if cpus == 1 else f"0-{cpus - 1}", sys.executable, "-m", "ylink_data", "run",
           str(config), "--no-progress", "--fresh", "--set", f"ray.num_cpus={cpus}", "--set", f"ray.execution={execution}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    text = done.stdout + done.stderr
    phases = [(k, float(s)) for k, s in _PHASE.findall(text)]
    maps = sum(s for k, s in phases if k.startswith("phase"))
    publish = sum(s for k, s in phases if k == "publish shards")
    stats = json.loads((out / "stats.json").read_text())
    return wall, maps, publish, stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--file-copies", type=int, default=4, help="copies of the bundled crawl in each of those files")
    ap.add_argument("--cases", default="large,multi,extract")
    ap.add_argument("--executions", default="auto", help="ray.execution values to run each case with")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    large = build_input(args.copies)
    multi = multi_file_input(args.files, args.file_copies)
    cases = {"large": ("spine, one large file", [large], []),
             "multi": (f"spine, {args.files} files", multi, []),
             "extract": ("extract, 4 files", multi[:4], [{"extract": {}}])}
    cases = {k: v for k, v in cases.items() if k in args.cases.split(",")}
    executions = args.executions.split(",")
    times: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
    kept: dict[tuple[str, str, int], int] = {}
    ceilings = []
    for r in range(args.repeats):
        ceilings.append(two_core_ceiling())
        print(f"  round {r + 1} busy-loop ceiling: {ceilings[-1]:.2f}", file=sys.stderr, flush=True)
        for key, (_, paths, stages) in cases.items():
            for execution in (executions if r % 2 == 0 else executions[::-1]):
                for cpus in ((1, 2) if r % 2 == 0 else (2, 1)):
                    wall, maps, publish, stats = run(key, paths, stages, cpus, execution)
                    times.setdefault((key, execution, cpus), []).append((wall, maps, publish))
                    kept[(key, execution, cpus)] = stats["output_records"]
                    print(f"  round {r + 1} {key} {execution} cpus={cpus}: {wall:.1f} s (map {maps:.1f}, "
                          f"publish {publish:.1f})", file=sys.stderr, flush=True)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}; date {dt.date.today()}; median of {args.repeats}; load average "
          f"{os.getloadavg()[0]:.1f}; busy-loop ceiling 2 CPUs / 1 CPU: {statistics.median(ceilings):.2f} "
          f"(rounds: {', '.join(f'{c:.2f}' for c in ceilings)})\n")
    print("| case | execution | input MB | kept | wall 1 CPU | wall 2 CPUs | ratio | map 1 | map 2 | map ratio | "
          "publish 1 | publish 2 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, (label, paths, _) in cases.items():
        for execution in executions:
            k1, k2 = (key, execution, 1), (key, execution, 2)
            assert kept[k1] == kept[k2] == kept[(key, executions[0], 1)], (key, kept)
            med = {c: [statistics.median(x[i] for x in times[(key, execution, c)]) for i in range(3)] for c in (1, 2)}
            mb = sum(p.stat().st_size for p in paths) / 1e6
            (w1, m1, p1), (w2, m2, p2) = med[1], med[2]
            print(f"| {label} | {execution} | {mb:.0f} | {kept[k1]} | {w1:.1f} s | {w2:.1f} s | {w1 / w2:.2f} | "
                  f"{m1:.1f} s | {m2:.1f} s | {m1 / m2:.2f} | {p1:.1f} s | {p2:.1f} s |")


if __name__ == "__main__":
    main()
