"""Benchmark: start-up (issue 17), whole commands, wall time: what a data engineer iterating on a
threshold, a notebook and every test pay before any work.

Commands, each a process of its own, on a one-document WARC (the first HTML response of the bundled
dolma-wget sample, https://www.semanticscholar.org/research/research-team, English, 88 KB):
- `python -c pass` (the interpreter alone) and `python -c "import ylink_data"`;
- `ylink run` (`python -m ylink_data run PIPELINE --fresh --no-progress`) with no stages (WARC in,
  Parquet out) and with `extract -> gopher_quality`, scheduled by the default `ray.execution: auto`
  (one task: in the driver, no Ray) and by `ray.execution: ray` (the embedded Ray started and
  stopped, as every run did before);
- datatrove: `WarcReader -> JsonlWriter` on a `LocalPipelineExecutor` (1 task, 1 worker), and the
  same with `Trafilatura -> GopherQualityFilter` between them (its Trafilatura with
  `timeout=--peer-timeout`: the sandbox process it extracts in must start within it).

Commands take turns, `--repeats` rounds, the order rotating each round, so that noise from other jobs
on this shared machine falls on all alike; reported: median and best wall seconds, and each ylink
command over its datatrove peer.

    .venv/bin/python bench/bench_startup.py [--repeats 7]

Prints Markdown.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "_data" / "startup"
OUT = REPO / "bench" / "_out" / "startup"
SOURCE = REPO / "samples" / "crawl" / "dolma-wget-sample-0000.warc.gz"


def build_input() -> Path:
    """The first HTML response of SOURCE, alone in a WARC file."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.warcwriter import WARCWriter

    path = DATA / "one.warc.gz"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    with open(SOURCE, "rb") as f, open(path, "wb") as out:
        for record in ArchiveIterator(f):
            if record.rec_type == "response" and "html" in (record.http_headers.get_header("Content-Type") or ""):
                WARCWriter(out, gzip=True).write_record(record)
                return path
    raise SystemExit(f"no HTML response in {SOURCE}")


def ylink_pipeline(warc: Path, name: str, stages: list[str], execution: str) -> Path:
    import yaml

    path = DATA / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "input": {"paths": [str(warc)]}, "output": {"path": str(OUT / name)},
        "stages": [{s: {}} for s in stages], "ray": {"execution": execution}}))
    return path


def run_datatrove(warc: str, out: str, with_ops: bool, timeout: float) -> None:
    """What the datatrove commands run, in a process of their own."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import GopherQualityFilter
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    folder, name = os.path.split(warc)
    ops = [Trafilatura(timeout=timeout), GopherQualityFilter()] if with_ops else []
    LocalPipelineExecutor(pipeline=[WarcReader(folder, glob_pattern=name), *ops, JsonlWriter(out)],
                          tasks=1, workers=1, logging_dir=out + "-logs", skip_completed=False).run()


def commands(warc: Path, peer_timeout: float) -> dict[str, list[str]]:
    py = sys.executable
    ylink = [py, "-m", "ylink_data", "run"]
    dt_cmd = [py, __file__, "_datatrove", str(warc)]
    filters = ["extract", "gopher_quality"]
    return {
        "python -c pass": [py, "-c", "pass"],
        "import ylink_data": [py, "-c", "import ylink_data"],
        "ylink run, no stages (auto)": [*ylink, str(ylink_pipeline(warc, "bare", [], "auto")), "--fresh", "--no-progress"],
        "ylink run, no stages (ray)": [*ylink, str(ylink_pipeline(warc, "bare-ray", [], "ray")), "--fresh",
                                       "--no-progress"],
        "datatrove WarcReader -> JsonlWriter": [*dt_cmd, str(OUT / "dt-bare"), "0", str(peer_timeout)],
        "ylink run, extract -> gopher_quality (auto)": [*ylink, str(ylink_pipeline(warc, "ops", filters, "auto")),
                                                        "--fresh", "--no-progress"],
        "ylink run, extract -> gopher_quality (ray)": [*ylink, str(ylink_pipeline(warc, "ops-ray", filters, "ray")),
                                                       "--fresh", "--no-progress"],
        "datatrove WarcReader -> Trafilatura -> GopherQuality -> JsonlWriter": [
            *dt_cmd, str(OUT / "dt-ops"), "1", str(peer_timeout)],
    }


PEERS = {"ylink run, no stages (auto)": "datatrove WarcReader -> JsonlWriter",
         "ylink run, no stages (ray)": "datatrove WarcReader -> JsonlWriter",
         "ylink run, extract -> gopher_quality (auto)": "datatrove WarcReader -> Trafilatura -> GopherQuality -> JsonlWriter",
         "ylink run, extract -> gopher_quality (ray)": "datatrove WarcReader -> Trafilatura -> GopherQuality -> JsonlWriter",
         "import ylink_data": "python -c pass"}


def timed(cmd: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_datatrove":
        _, _, warc, out, with_ops, timeout = sys.argv
        run_datatrove(warc, out, with_ops == "1", float(timeout))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--peer-timeout", type=float, default=30.0, help="datatrove Trafilatura's timeout, seconds")
    args = ap.parse_args()
    cmds = commands(build_input(), args.peer_timeout)
    names = list(cmds)
    for name in names:  # a warm-up round: page caches, .pyc files
        timed(cmds[name])
    walls: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            walls[name].append(timed(cmds[name]))
    median = {n: statistics.median(w) for n, w in walls.items()}
    print(f"## Start-up ({dt.date.today()}, {platform.node()}, {os.cpu_count()} CPUs shared, python "
          f"{platform.python_version()}, ray {version('ray')}, datatrove {version('datatrove')}; "
          f"{args.repeats} rounds, order rotating)\n")
    print("| command | median wall s | best | / peer (median) |")
    print("| --- | ---: | ---: | --- |")
    for name in names:
        peer = PEERS.get(name)
        ratio = f"{median[name] / median[peer]:.2f}x {peer}" if peer else ""
        print(f"| {name} | {median[name]:.2f} | {min(walls[name]):.2f} | {ratio} |")


if __name__ == "__main__":
    main()
