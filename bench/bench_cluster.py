"""Benchmark: what a Ray cluster costs over worker processes on the same cores (issue 26, point 8:
the cluster's overhead within 15%, or where the rest goes).

    .venv/bin/python bench/bench_cluster.py [--repeats 3] [--files 8] [--file-copies 4]

Two sides, the same whole command `python -m ylink_data run P.yaml --no-progress --fresh`, the same
input and output store (a SeaweedFS S3 server on 127.0.0.1, tests/s3server.py), taking turns in
every round so the noise of other jobs on this shared machine falls on both alike:

- processes: `ray.address: null`, `ray.num_cpus: 2`: worker processes on this machine;
- cluster: a Ray cluster started with the `ray` CLI on this machine (tests/raycluster.py: a head with
  no CPU and two worker nodes of one CPU, all on 127.0.0.1), `ray.address` its GCS. The cluster is
  started once, before the rounds, as an operator's would be.

The pipeline is the issue's: extract, normalize, langid, gopher_quality, exact_dedup, minhash_dedup,
quality_classifier and tokenize (a BPE trained on the bundled crawl, read from S3) into Megatron
files, over `--files` WARC files each holding the bundled crawl `--file-copies` times
(bench_cores.py's input) and `--jsonl-docs` JSONL documents (bench_minhash.py's corpus: real
Reuters and THUCNews sentences, a third of them near-duplicate families), as the issue's trial had
WARCs and JSONL. Reported: the median wall seconds of the whole command and of each phase
and helper step as the run reports them, and the ratio cluster / processes; the CPU seconds of
every process by part (the driver, the task processes, Ray's services, the S3 server), and the task
processes' by thread (the tasks' code runs on the main thread, on both sides: what the rest adds is
beside it). Both sides must write the same shards (checked).
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
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cores import multi_file_input  # noqa: E402
from bench_minhash import build_corpus  # noqa: E402
from bench_spine import REPO  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.raycluster import RayCliCluster  # noqa: E402
from tests.s3server import s3_server  # noqa: E402
from tests.tokenruns import crawl_tokenizer  # noqa: E402

OUT = REPO / "bench" / "_out" / "cluster"
STAGES = [{"extract": {}}, {"normalize": {}}, {"langid": {"languages": ["en", "zh"], "min_score": 0.5}},
          {"gopher_quality": {"language": "auto"}}, {"exact_dedup": {}}, {"minhash_dedup": {"threshold": 0.8}},
          {"quality_classifier": {}}, {"tokenize": {"tokenizer": "s3://models/crawl/tokenizer.json"}}]
_STEP = re.compile(r"^(\s*)([^\n]*?): \d+/\d+ tasks.* in ([\d.]+)s", re.M)


def run(side: str, config: Path, env: dict, address: str | None) -> tuple[float, dict[str, float], dict[str, float]]:
    """(wall, seconds per phase or helper step, CPU seconds by part) of one whole command. CPU: the
    command's own process tree as it exits (the driver, and its worker processes), and what the
    cluster's processes and the S3 server (this process's other descendants) spent meanwhile, by
    kind, sampled every 0.2 s: a Ray worker lives as long as its job, and is gone at the end."""
    cmd = [sys.executable, "-m", "ylink_data", "run", str(config), "--no-progress", "--fresh"]
    cmd += ["--set", f"ray.address={address}"] if address else ["--set", "ray.num_cpus=2"]
    sampler = _CpuSampler()
    started = time.perf_counter()
    with sampler:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{side}: {' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    steps = {name.strip(): float(s) for _, name, s in _STEP.findall(done.stderr)}
    # The cluster's services and the S3 server run during both sides' runs (idle on one).
    return wall, steps, sampler.by_kind() | {THREAD + name: cpu for name, cpu in sampler.by_thread().items()}


class _CpuSampler(threading.Thread):
    """CPU seconds of this process's descendants while the block runs: every process, first and
    last seen (sampled every 0.2 s: a process that lives less is missed, one that ends loses its
    last 0.2 s at most). getrusage would not do: a Ray worker is reaped by its raylet, and a worker
    process the driver kills at the end by nobody of ours."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.first: dict[tuple[int, float], float] = {}
        self.last: dict[tuple[int, float], tuple[float, str]] = {}
        # The task processes' threads, by name: the task's code runs on the main thread (on both
        # sides); the rest is what each process runs beside it (fsspec's event loop, Arrow's I/O
        # pool; in a Ray worker also its core worker's gRPC and event-loop threads).
        self.thread_first: dict[tuple[int, float, int], float] = {}
        self.threads: dict[tuple[int, float, int], tuple[float, str]] = {}
        self._done = threading.Event()

    def __enter__(self) -> "_CpuSampler":
        self._sample()
        self.first = {key: cpu for key, (cpu, _) in self.last.items()}
        self.thread_first = {key: cpu for key, (cpu, _) in self.threads.items()}
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.join()

    def run(self) -> None:
        while not self._done.wait(0.2):
            self._sample()

    def _sample(self) -> None:
        for proc in psutil.Process().children(recursive=True):
            try:
                key = (proc.pid, proc.create_time())
                t = proc.cpu_times()
                kind = self.last[key][1] if key in self.last else _kind(proc)
                self.last[key] = (t.user + t.system, kind)
                if kind == TASK_PROCESSES:
                    for th in proc.threads():
                        tkey = (*key, th.id)
                        name = self.threads[tkey][1] if tkey in self.threads else _thread_name(proc.pid, th.id)
                        self.threads[tkey] = (th.user_time + th.system_time, name)
            except psutil.Error:
                continue

    def by_thread(self) -> dict[str, float]:
        """The task processes' CPU seconds by thread name (digits dropped: one name per pool)."""
        return _spent(self.threads, self.thread_first)

    def by_kind(self) -> dict[str, float]:
        """Seconds by kind, and how many processes of each kind started during the block."""
        totals = _spent(self.last, self.first)
        for key, (_, kind) in self.last.items():
            if key not in self.first:
                totals[f"{kind}: processes started"] = totals.get(f"{kind}: processes started", 0) + 1
        return totals


def _spent(last: dict, first: dict) -> dict[str, float]:
    """CPU seconds by label between two samples: {key: (cpu, label)} last, {key: cpu} first."""
    totals: dict[str, float] = {}
    for key, (cpu, label) in last.items():
        totals[label] = totals.get(label, 0.0) + cpu - first.get(key, 0.0)
    return totals


def _thread_name(pid: int, tid: int) -> str:
    if tid == pid:
        return "main thread (the task's code)"
    try:
        name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:
        return "?"
    return re.sub(r"[\d_-]+$", "", name) or name


TASK_PROCESSES = "task processes (worker processes, Ray workers)"
THREAD = "  of which the thread "  # a part of TASK_PROCESSES, not counted again in the total


def _kind(proc: psutil.Process) -> str:
    """What a process is: the driver, a task process (a worker process, a Ray worker, an extractor
    child), the S3 server, or a Ray service by name."""
    name, cmdline = proc.name(), proc.cmdline()
    words = " ".join(cmdline)
    title = cmdline[0] if cmdline else name
    if name in ("raylet", "gcs_server"):  # the raylet's command line names default_worker.py too
        return f"Ray service: {name}"
    if "ylink_data run" in words:
        return "driver"
    if "ylink_data.engine.workers" in words or "default_worker.py" in words or (
            title.startswith("ray::") and not title.endswith("Agent")):
        return TASK_PROCESSES
    if "ylink_data.text.transform.extract_process" in words:
        return "extractor child processes"
    if name == "weed":
        return "S3 server"
    if "python" in name:
        what = next((Path(a).stem for a in cmdline[1:] if a.endswith(".py")), None)
        if what is None and "-m" in cmdline:
            what = cmdline[cmdline.index("-m") + 1]
        return f"Ray service: {what or 'ray start (a worker node)'}"
    return f"Ray service: {title.removeprefix('ray::')}" if title.startswith("ray::") else f"Ray service: {name}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--file-copies", type=int, default=4, help="copies of the bundled crawl in each file")
    ap.add_argument("--jsonl-docs", type=int, default=100_000, help="documents of bench_minhash.py's JSONL corpus")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    paths = multi_file_input(args.files, args.file_copies)
    if args.jsonl_docs:
        paths += sorted(build_corpus(args.jsonl_docs).glob("*.jsonl"))
    with tempfile.TemporaryDirectory(prefix="bc-", dir="/tmp") as tmp, s3_server(Path(tmp) / "s3") as s3, \
            RayCliCluster(Path(tmp) / "rc", workers=2) as cluster:
        fs = s3.filesystem()
        for bucket in ("crawl-in", "models", "runs"):
            fs.mkdir(bucket)
        for p in paths:
            fs.put_file(str(p), f"crawl-in/{p.name}")
        fs.put_file(str(crawl_tokenizer(Path(tmp) / "tok")), "models/crawl/tokenizer.json")
        configs = {}
        for side in ("processes", "cluster"):
            cfg = {"name": f"bench-cluster-{side}", "input": {"paths": [f"s3://crawl-in/{p.name}" for p in paths]},
                   "output": {"path": f"s3://runs/{side}", "megatron": {}}, "stages": STAGES,
                   "storage": {"s3": s3.storage_options()}}
            configs[side] = OUT / f"{side}.yaml"
            configs[side].write_text(json.dumps(cfg))
        env = {**cluster.env, "PYTHONPATH": str(REPO)}
        times: dict[str, list[tuple[float, dict[str, float]]]] = {"processes": [], "cluster": []}
        cpus: dict[str, list[dict[str, float]]] = {"processes": [], "cluster": []}
        for r in range(args.repeats):
            for side in (("processes", "cluster") if r % 2 == 0 else ("cluster", "processes")):
                wall, steps, cpu = run(side, configs[side], env, cluster.address if side == "cluster" else None)
                times[side].append((wall, steps))
                cpus[side].append(cpu)
                print(f"  round {r + 1} {side}: {wall:.1f} s", file=sys.stderr, flush=True)
        shards = {side: [s["sha256"] for s in json.loads(fs.cat_file(f"runs/{side}/manifest.json"))["shards"]]
                  for side in times}
        assert shards["processes"] == shards["cluster"], "the cluster wrote other shards than worker processes"
        kept = json.loads(fs.cat_file("runs/cluster/stats.json"))["output_records"]

    mb = sum(p.stat().st_size for p in paths) / 1e6
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}; date {dt.date.today()}; median of {args.repeats}; load average "
          f"{os.getloadavg()[0]:.1f}; input {len(paths)} files ({args.files} WARC, the rest JSONL), {mb:.0f} MB on S3; {kept:,} documents kept, "
          "identical shards on both sides\n")
    print("| step | processes, 2 CPUs | cluster, 2 x 1 CPU | cluster / processes |")
    print("| --- | ---: | ---: | ---: |")
    walls = {side: statistics.median(w for w, _ in runs) for side, runs in times.items()}
    print(f"| whole command | {walls['processes']:.1f} s | {walls['cluster']:.1f} s | "
          f"{walls['cluster'] / walls['processes']:.2f} |")
    for step in times["processes"][0][1]:
        med = {side: statistics.median(s.get(step, 0.0) for _, s in runs) for side, runs in times.items()}
        ratio = f"{med['cluster'] / med['processes']:.2f}" if med["processes"] >= 0.05 else "-"
        print(f"| {step} | {med['processes']:.2f} s | {med['cluster']:.2f} s | {ratio} |")
    print("\nRounds (wall s), in order: " + "; ".join(
        f"{side} " + ", ".join(f"{w:.1f}" for w, _ in runs) for side, runs in times.items()))
    print("\nCPU seconds per run (medians), by part:\n")
    print("| side | part | CPU s (or count) |")
    print("| --- | --- | ---: |")
    for side, runs in cpus.items():
        parts = sorted({k for r in runs for k in r}, key=lambda k: (k.startswith(THREAD), -statistics.median(r.get(k, 0.0) for r in runs)))
        for part in parts:
            med = statistics.median(r.get(part, 0.0) for r in runs)
            if med >= 0.05:
                print(f"| {side} | {part} | {med:.0f} |" if part.endswith("started") else f"| {side} | {part} | {med:.1f} |")
        total = statistics.median(sum(v for k, v in r.items() if not k.endswith("started") and
                                      not k.startswith(THREAD)) for r in runs)
        print(f"| {side} | **all** | **{total:.1f}** |")


if __name__ == "__main__":
    main()
