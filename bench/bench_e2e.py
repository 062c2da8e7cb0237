"""Benchmark: the whole WARC-to-clean-text pipeline against datatrove's (issue 17), whole commands.

The same WARC files through both, each as a command of its own (a subprocess, start-up included):
- ylink-data: `python -m ylink_data run PIPELINE.yaml --no-progress` with the stages
  `extract -> gopher_repetition -> gopher_quality -> c4_quality -> fineweb_quality` (defaults),
  `ray.num_cpus` = the CPUs given;
- datatrove: `WarcReader -> Trafilatura -> GopherRepetitionFilter -> GopherQualityFilter ->
  C4QualityFilter -> FineWebQualityFilter -> JsonlWriter` (defaults, FineWeb's order) on a
  `LocalPipelineExecutor` with one task per file and `workers` = the CPUs given. Its Trafilatura gets
  `timeout=--peer-timeout` (default 30 s): the sandbox process it extracts in must import
  trafilatura within that time, which its 1 s default does not allow on this loaded machine.

Each command runs under `taskset` on 1 CPU (core 0) and on 2 (cores 0-1); the sides and CPU counts
take turns, `--repeats` times, the first side rotating each round, so noise from other jobs on this
shared machine falls on all alike. Reported: input documents, kept documents on each side, median
wall seconds, documents/s per core (documents / wall / CPUs), the seconds the pinned cores were
busy (/proc/stat; other jobs on those cores count too), and ylink / datatrove.

Input (built once into bench/_data/e2e-*, ignored by git): real pages only. The HTML responses of
the bundled crawl (samples/crawl, with their own HTTP headers) and the pages of trafilatura's
evaluation set (../shared/data/trafilatura_eval, as `text/html` responses with their evaluation
URLs), wrapped as WARC response records (with `WARC-Identified-Payload-Type`, which datatrove's
reader reads), `--copies` times, each copy with its own record id and URL (`?copy=K`), dealt
round-robin into `--files` .warc.gz files (one gzip member per record).

    .venv/bin/pip install datatrove spacy faust-cchardet python-magic   # the `bench` extra
    .venv/bin/python bench/bench_e2e.py [--copies 6] [--files 4] [--repeats 3] [--cpus 1,2]

`--sides ylink` (or `datatrove`) runs one side only. Prints Markdown.
"""
from __future__ import annotations

import argparse
import datetime as dt
import glob
import gzip
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))
DATA = REPO / "bench" / "_data"
OUT = REPO / "bench" / "_out" / "e2e"
STAGES = ["extract", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]
WARC_DATE = "2026-01-01T00:00:00Z"


# ----------------------------------------------------------------------------- input


def crawl_pages() -> list[tuple[str, bytes, list[tuple[str, str]]]]:
    """(url, body, HTTP headers) of the bundled crawl's HTML responses and of trafilatura's
    evaluation pages (923), in a fixed order."""
    from warcio.archiveiterator import ArchiveIterator

    pages = []
    for path in sorted((REPO / "samples" / "crawl").glob("*.warc*")):
        if ".wet" in path.name or path.name.startswith("trafilatura"):  # those pages come from the set below
            continue
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                body = record.content_stream().read()
                ctype = record.http_headers.get_header("Content-Type") or ""
                if body and "html" in ctype.lower():
                    headers = [(k, v) for k, v in record.http_headers.headers
                               if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")]
                    pages.append((record.rec_headers.get_header("WARC-Target-URI"), body, headers))
    root = SHARED / "trafilatura_eval" / "tests"
    evaldata = json.loads((root / "evaldata.json").read_text(encoding="utf-8"))
    for url, item in sorted(evaldata.items()):
        path = root / "eval" / item["file"]
        if not path.is_file():
            path = root / "cache" / item["file"]
        if not path.is_file():
            continue
        if not url.startswith(("http://", "https://")):
            url = "https://trafilatura-eval.invalid/" + item["file"]  # pseudo keys such as "hard::<file>"
        pages.append((url, path.read_bytes(), [("Content-Type", "text/html")]))
    return pages


def build_input(copies: int, files: int) -> tuple[Path, int]:
    """A folder of `files` .warc.gz files holding every page `copies` times; (folder, records)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    folder = DATA / f"e2e-x{copies}-f{files}"
    pages = crawl_pages()
    total = copies * len(pages)
    done = folder / "_DONE"
    if done.exists() and int(done.read_text()) == total:
        return folder, total
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    buffers = [io.BytesIO() for _ in range(files)]
    writers = [WARCWriter(b, gzip=True, warc_version="1.0") for b in buffers]
    k = 0
    for copy in range(copies):
        for url, body, headers in pages:
            url = f"{url}{'&' if '?' in url else '?'}copy={copy}"
            http = StatusAndHeaders("200 OK", headers + [("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            writer = writers[k % files]
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
                warc_headers_dict={"WARC-Record-ID": f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url)}>",
                                   "WARC-Date": WARC_DATE, "WARC-Identified-Payload-Type": "text/html"}))
            k += 1
    for i, b in enumerate(buffers):
        (folder / f"part-{i:03d}.warc.gz").write_bytes(b.getvalue())
    done.write_text(str(total))
    return folder, total


# ----------------------------------------------------------------------------- the two commands


def ylink_command(folder: Path, out: Path, cpus: int) -> list[str]:
    pipeline = {"name": "bench-e2e", "input": {"paths": [str(folder / "*.warc.gz")], "format": "warc"},
                "output": {"path": str(out)}, "stages": [{name: {}} for name in STAGES],
                "ray": {"num_cpus": cpus}}
    path = OUT / "pipeline.yaml"
    path.write_text(json.dumps(pipeline, indent=1))  # JSON is YAML
    return [sys.executable, "-m", "ylink_data", "run", str(path), "--no-progress", "--fresh"]


def ylink_kept(out: Path) -> tuple[int, int]:
    stats = json.loads((out / "stats.json").read_text())
    return stats["input_records"], stats["output_records"]


def datatrove_command(folder: Path, out: Path, cpus: int, timeout: float) -> list[str]:
    files = len(list(folder.glob("*.warc.gz")))
    return [sys.executable, __file__, "_datatrove", str(folder), str(out), str(cpus), str(files), str(timeout)]


def run_datatrove(folder: str, out: str, workers: int, tasks: int, timeout: float) -> None:
    """datatrove's FineWeb-style pipeline (what `datatrove_command` runs in a process of its own)."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    LocalPipelineExecutor(
        pipeline=[WarcReader(folder, glob_pattern="*.warc.gz"), Trafilatura(timeout=timeout),
                  GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter(),
                  JsonlWriter(f"{out}/data")],
        tasks=tasks, workers=workers, logging_dir=f"{out}/logs").run()


def datatrove_kept(out: Path) -> tuple[int, int]:
    kept = 0
    for path in glob.glob(str(out / "data" / "*.jsonl.gz")):
        with gzip.open(path, "rb") as f:
            kept += sum(1 for _ in f)
    stats = json.loads((out / "logs" / "stats.json").read_text())
    read = next(s for s in stats if "Warc" in s["name"])
    return read["stats"].get("documents", {}).get("total", 0), kept


# ----------------------------------------------------------------------------- timing


def core_busy(cores: list[int]) -> float:
    """Seconds the given cores have spent busy since boot (/proc/stat: all but idle and iowait)."""
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *ticks = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
                values = list(map(int, ticks))
                busy += sum(values) - values[3] - values[4]
    return busy / os.sysconf("SC_CLK_TCK")


def timed_command(cmd: list[str], cpus: int, log: Path) -> tuple[float, float]:
    """(wall seconds, busy seconds of the cores) of `cmd` pinned to `cpus` cores. Busy seconds count
    whatever ran on those cores meanwhile, other jobs included: an upper bound of the command's
    CPU time. (The rusage of the process tree, with this script a child subreaper, was no measure: it
    counted 11.1 s for a ylink run that kept an otherwise idle core busy 21.2 s; Ray's workers are
    not reaped through this script.)"""
    cores = sorted(os.sched_getaffinity(0))[:cpus]
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}
    before = core_busy(cores)
    started = time.perf_counter()
    with open(log, "wb") as f:
        proc = subprocess.run(["taskset", "-c", ",".join(map(str, cores)), *cmd], cwd=REPO, env=env,
                              stdout=f, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - started
    busy = core_busy(cores) - before
    if proc.returncode:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}; see {log}")
    return wall, busy


def _version(package: str) -> str:
    try:
        return version(package)
    except Exception:
        return "not installed"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_datatrove":
        folder, out, workers, tasks, timeout = sys.argv[2:7]
        run_datatrove(folder, out, int(workers), int(tasks), float(timeout))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=6, help="copies of every page (distinct ids and URLs)")
    ap.add_argument("--files", type=int, default=4, help=".warc.gz files the copies are dealt into")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpus", default="1,2", help="CPU counts to run each side on")
    ap.add_argument("--sides", default="ylink,datatrove")
    ap.add_argument("--peer-timeout", type=float, default=30.0, help="datatrove Trafilatura's timeout, seconds")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    folder, records = build_input(args.copies, args.files)
    mb = sum(p.stat().st_size for p in folder.glob("*.warc.gz")) / 1e6
    cpu_counts = [int(c) for c in args.cpus.split(",")]
    sides = args.sides.split(",")

    def command(side: str, cpus: int) -> tuple[list[str], Path]:
        out = OUT / f"{side}-{cpus}"
        shutil.rmtree(out, ignore_errors=True)
        if side == "ylink":
            return ylink_command(folder, out, cpus), out
        return datatrove_command(folder, out, cpus, args.peer_timeout), out

    kept_of = {"ylink": ylink_kept, "datatrove": datatrove_kept}
    walls: dict[tuple[str, int], list[float]] = {}
    cpu_s: dict[tuple[str, int], list[float]] = {}
    counts: dict[tuple[str, int], tuple[int, int]] = {}
    turns = [(side, cpus) for cpus in cpu_counts for side in sides]
    for r in range(args.repeats):
        shift = r % len(sides)
        order = [(s, c) for c in cpu_counts for s in sides[shift:] + sides[:shift]]
        for side, cpus in order:
            cmd, out = command(side, cpus)
            wall, cpu = timed_command(cmd, cpus, OUT / f"{side}-{cpus}.log")
            walls.setdefault((side, cpus), []).append(wall)
            cpu_s.setdefault((side, cpus), []).append(cpu)
            counts[(side, cpus)] = kept_of[side](out)
            print(f"  round {r + 1}: {side} on {cpus} CPU: {wall:.1f} s wall, cores busy {cpu:.1f} s, "
                  f"read {counts[(side, cpus)][0]}, kept {counts[(side, cpus)][1]}", file=sys.stderr, flush=True)

    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"datatrove {_version('datatrove')}, trafilatura {_version('trafilatura')}, ray {_version('ray')}, "
          f"{dt.datetime.now():%Y-%m-%d %H:%M}, load average {os.getloadavg()[0]:.1f} at the end\n")
    print(f"Input: {records:,} WARC response records ({args.copies} copies of {records // args.copies} real pages) "
          f"in {args.files} files, {mb:.1f} MB compressed. {args.repeats} rounds, median.\n")
    print("| side | CPUs | documents read | kept | wall s | docs/s per core | cores busy s | docs per busy core-s |"
          " vs datatrove (per core) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for side, cpus in turns:
        wall = statistics.median(walls[(side, cpus)])
        cpu = statistics.median(cpu_s[(side, cpus)])
        rate = records / wall / cpus
        peer = ("datatrove", cpus)
        ratio = f"{statistics.median(walls[peer]) / wall:.2f}x" if peer in walls else "-"
        read, kept = counts[(side, cpus)]
        print(f"| {side} | {cpus} | {read:,} | {kept:,} | {wall:.1f} | {rate:.1f} | {cpu:.1f} | {records / cpu:.1f} | "
              f"{ratio} |")
    for side in sides:
        if all((side, c) in walls for c in (1, 2)):
            speedup = statistics.median(walls[(side, 1)]) / statistics.median(walls[(side, 2)])
            print(f"\n{side}: 2 CPUs / 1 CPU throughput {speedup:.2f}x")
    print("\nwall seconds per round: " + "; ".join(
        f"{s} {c} CPU: " + ", ".join(f"{w:.1f}" for w in walls[(s, c)]) for s, c in turns))


if __name__ == "__main__":
    main()
