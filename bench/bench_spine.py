"""Benchmark: the bare spine (WARC in, Parquet out, no ops) against plain warcio iteration over the
same file, in the same process, one core each. Goal: spine overhead over warcio at most 20%.

    .venv/bin/python bench/bench_spine.py [--copies 40] [--repeats 3]
    .venv/bin/python bench/bench_spine.py --cpu [--repeats 5]

The input is the bundled real crawl (samples/crawl/*.warc.gz) concatenated `--copies` times into one
.warc.gz (gzip members concatenate into a valid multi-member file). Ray is started before timing, so
the spine's number is planning + reading + Parquet writing + publishing + manifest, not Ray start-up.

`--cpu` measures CPU time (time.process_time) in this one process instead of wall time, which other
jobs on a shared machine disturb far less: warcio's iteration, the pipeline's WARC reader alone
(records out, nothing built), and the spine's task run in-process (the code a Ray worker runs:
reading, Arrow batches, Parquet with each `--compressions`, sha256, the marker), where the parts
written are counted too. The spine minus the reader is the cost of the output, which warcio does
not pay.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import time
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "_data"


def build_input(copies: int) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    target = DATA / f"sample-crawl-x{copies}.warc.gz"
    if not target.exists():
        parts = sorted((REPO / "samples" / "crawl").glob("*.warc.gz"))
        tmp = target.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            for _ in range(copies):
                for p in parts:
                    out.write(p.read_bytes())
        tmp.rename(target)
    return target


def bare_warcio(path: Path) -> tuple[float, int]:
    """What any WARC tool must at least do: iterate records and read every payload."""
    started = time.perf_counter()
    n = 0
    with open(path, "rb") as f:
        for record in ArchiveIterator(f):
            record.content_stream().read()
            n += 1
    return time.perf_counter() - started, n


def bare_fastwarc(path: Path) -> tuple[float, int]:
    """The same with FastWARC, the parser the spine reads most records with (for reference)."""
    from fastwarc.warc import ArchiveIterator as FastIterator

    started = time.perf_counter()
    n = 0
    with open(path, "rb") as f:
        for record in FastIterator(f, parse_http=True, auto_decode="all", fsspec_args=False):
            record.reader.read()
            n += 1
    return time.perf_counter() - started, n


def spine(path: Path, out: Path) -> tuple[float, int]:
    import ylink_data

    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    _, stats = ylink_data.run({"name": "bench-spine", "input": {"paths": [str(path)], "split_bytes": 1 << 40},
                               "output": {"path": str(out)}, "stages": []}, progress=False)
    return time.perf_counter() - started, stats["input_records"]


def cpu_warcio(path: Path) -> float:
    started = time.process_time()
    bare_warcio(path)
    return time.process_time() - started


def cpu_reader(path: Path) -> float:
    """The pipeline's WARC reader alone: every record as Record / Skip / Bad, nothing built."""
    from ylink_data.io.input_config import InputConfig
    from ylink_data.io.readers import Split, open_split, read_split

    started = time.process_time()
    split = Split(str(path), "warc", path.stat().st_size)
    with open_split(split, {}) as f:
        for _ in read_split(split, f, InputConfig(paths=[str(path)])):
            pass
    return time.process_time() - started


def cpu_spine_task(path: Path, out: Path, compression: str) -> tuple[float, int]:
    """The spine's one task in this process, as a Ray worker runs it: (CPU seconds, bytes written)."""
    from ylink_data.engine.config import load_config
    from ylink_data.engine.runner import Runner
    from ylink_data.engine.tasks import TaskSpec, execute_task

    shutil.rmtree(out, ignore_errors=True)
    cfg = load_config({"name": "bench-spine", "input": {"paths": [str(path)], "split_bytes": 1 << 40},
                       "output": {"path": str(out), "compression": compression}, "stages": []}, {})
    started = time.process_time()
    plan = Runner(cfg, progress=False).plan()
    marker = execute_task(TaskSpec(cfg, plan.phases[0], 0, splits=plan.tasks[0]))
    return time.process_time() - started, sum(p["bytes"] for p in marker["parts"])


def main_cpu(path: Path, repeats: int, compressions: list[str]) -> None:
    out = REPO / "bench" / "_out" / "spine-cpu"
    times: dict[str, list[float]] = {"warcio": [], "reader": [], **{c: [] for c in compressions}}
    written: dict[str, int] = {}
    for _ in range(repeats):  # interleaved
        times["warcio"].append(cpu_warcio(path))
        times["reader"].append(cpu_reader(path))
        for c in compressions:
            t, written[c] = cpu_spine_task(path, out, c)
            times[c].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    w = med["warcio"]
    print(f"input: {path.name}, {path.stat().st_size / 1e6:.1f} MB compressed; CPU seconds, median of {repeats}")
    print(f"warcio iteration        : {w:.2f} s")
    print(f"ylink reader alone      : {med['reader']:.2f} s  ({med['reader'] / w:.2f} x warcio)")
    for c in compressions:
        print(f"ylink spine task, {c:6s}: {med[c]:.2f} s  ({med[c] / w:.2f} x warcio, overhead "
              f"{100 * (med[c] / w - 1):+.0f}%); output {written[c] / 1e6:.1f} MB; output costs "
              f"{med[c] - med['reader']:.2f} s")
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"date {dt.date.today()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="CPU time in this process (see the module doc)")
    ap.add_argument("--compressions", default="zstd,lz4,snappy,none")
    args = ap.parse_args()
    if args.cpu:
        main_cpu(build_input(args.copies), args.repeats, args.compressions.split(","))
        return

    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=1, object_store_memory=200 * 1024 * 1024, include_dashboard=False, logging_level="ERROR")
    path = build_input(args.copies)
    mb = path.stat().st_size / 1e6
    out = REPO / "bench" / "_out" / "spine"
    warcio_times, fast_times, spine_times = [], [], []
    for _ in range(args.repeats):  # interleaved, so machine noise hits all sides alike
        t, n_warcio = bare_warcio(path)
        warcio_times.append(t)
        t, n_fast = bare_fastwarc(path)
        fast_times.append(t)
        t, n_spine = spine(path, out)
        spine_times.append(t)
    assert n_warcio == n_spine == n_fast, (n_warcio, n_spine, n_fast)
    w, f, s = (statistics.median(x) for x in (warcio_times, fast_times, spine_times))
    print(f"input: {path.name}, {mb:.1f} MB compressed, {n_warcio} records")
    print(f"warcio iteration : {mb / w:7.1f} MB/s per core  (median of {args.repeats}: {w:.2f} s)")
    print(f"fastwarc iteration: {mb / f:6.1f} MB/s per core  (median of {args.repeats}: {f:.2f} s)")
    print(f"ylink spine      : {mb / s:7.1f} MB/s per core  (median of {args.repeats}: {s:.2f} s)")
    print(f"spine / warcio throughput: {w / s:.2f}  (overhead {100 * (s / w - 1):+.0f}%)")
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"date {dt.date.today()}")


if __name__ == "__main__":
    main()
