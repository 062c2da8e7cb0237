"""Benchmark: the figures a run is sized from (issue 40 point 5; docs/guide/sizing.md uses them).

    .venv/bin/python bench/bench_sizing.py [--e2e-files 8] [--e2e-copies 4] [--docs 200000] [--json PATH]

Every figure comes from whole `ylink run` commands on this machine (bench_minhash.run_measured: the
process tree sampled every 0.1 s for CPU seconds and memory; the run folder's size sampled as well):

1. CPU seconds per GB of WARC (.warc.gz bytes in) for three pipelines on bench_scaling.py's e2e input
   (`--e2e-files` files, each the bundled crawl `--e2e-copies` times), on 1 CPU (core 0) and on 2:
   - `fineweb`: extract, gopher_repetition, gopher_quality, c4_quality, fineweb_quality;
   - `fineweb+minhash`: the same, then minhash_dedup;
   - `fineweb+langid+quality+minhash`: extract, langid, the four filters, minhash_dedup, quality_classifier.
   Reported: the process tree's CPU seconds / input GB (start-up included) and the tasks' CPU / GB
   (stats.json `timing`: the work alone).
2. Memory per worker: the largest process's peak RSS (VmHWM) in the 2-CPU runs, and the tree's peak
   RSS / PSS sum.
3. Intermediate disk: the run folder's peak size while it runs (its `_work/` parts of every phase, the
   global phase's spill), and its final size, per input GB.
4. MinHash at 10^9 documents: on `--docs` documents of the copy-heavy corpus (bench_scaling.py's
   `minhash`), the bytes per document of its keys in the parts (bucket keys, shingle sets, length:
   the phase-0 part files' growth against a run without minhash_dedup), of the global phase's work
   files (the run folder's peak), of a saved index (`save_index`: bytes / documents kept); the peak
   RSS of the largest process with `rows_per_partition` at its default and at 1/8 of the bucket rows
   (so that partitions bind, as they do at 10^9 documents: each task holds at most
   `rows_per_partition` bucket rows), on 2 CPUs.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_minhash import REPO, run_measured, ylink_command  # noqa: E402
from bench_scaling import E2E_STAGES, copies_input, e2e_input  # noqa: E402

OUT = REPO / "bench" / "_out" / "sizing"
GB = 1e9


class FolderSize:
    """The peak size of a folder (all files under it), sampled every `interval` s in a thread."""

    def __init__(self, root: Path, interval: float = 0.2):
        self.root, self.interval, self.peak = root, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _size(self) -> int:
        total = 0
        for folder, _, files in os.walk(self.root):
            for name in files:
                try:
                    total += os.stat(os.path.join(folder, name)).st_size
                except OSError:
                    pass
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._size())
            self._stop.wait(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self._size())


def run(name: str, paths: list[str], fmt: str | None, stages: list, cpus: int, extra: dict | None = None) -> dict:
    import yaml

    out = OUT / f"run-{name}-{cpus}"
    shutil.rmtree(out, ignore_errors=True)
    config = OUT / f"{name}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"name": f"sizing-{name}", "input": {"paths": paths, **({"format": fmt} if fmt else {})},
                                      "output": {"path": str(out)}, "stages": stages, **(extra or {})}, sort_keys=False))
    out.mkdir(parents=True, exist_ok=True)  # a killed earlier run may still be leaving files
    size = FolderSize(out)
    cmd = ylink_command() + ["run", str(config), "--fresh", "--no-progress", "--set", f"ray.num_cpus={cpus}"]
    r = run_measured(cmd, OUT / f"{name}-{cpus}.log", "0" if cpus == 1 else f"0-{cpus - 1}", interval=0.1)
    peak = size.stop()
    stats = json.loads((out / "stats.json").read_text())
    timing = stats["timing"]
    task_cpu = sum(s["cpu_s"] for s in timing["steps"]) + timing["driver_cpu_s"]
    final = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    shutil.rmtree(out, ignore_errors=True)
    return {"name": name, "cpus": cpus, "wall_s": r["wall"], "cpu_s": r["cpu_s"], "task_cpu_s": task_cpu,
            "rss_max_proc_gb": r["rss_max_proc_gb"], "rss_sum_gb": r["rss_sum_gb"], "pss_sum_gb": r["pss_sum_gb"],
            "input_bytes": stats["input_bytes"], "input_records": stats["input_records"],
            "output_records": stats["output_records"], "peak_folder_bytes": peak, "final_folder_bytes": final,
            "timing": timing}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--e2e-files", type=int, default=8)
    ap.add_argument("--e2e-copies", type=int, default=4)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--passages")
    ap.add_argument("--parts", default="pipelines,minhash", help="what to measure: pipelines, minhash")
    ap.add_argument("--json", default=str(OUT / "sizing.json"))
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    warc = [str(p) for p in e2e_input(args.e2e_files, args.e2e_copies)]
    pipelines = {
        "fineweb": E2E_STAGES,
        "fineweb+minhash": E2E_STAGES + [{"minhash_dedup": {}}],
        "fineweb+langid+quality+minhash": [E2E_STAGES[0], {"langid": {}}, *E2E_STAGES[1:], {"minhash_dedup": {}},
                                           {"quality_classifier": {}}],
    }
    results: dict = {"pipelines": [], "minhash": {}}
    parts = args.parts.split(",")
    for name, stages in (pipelines.items() if "pipelines" in parts else ()):
        for cpus in (1, 2):
            got = run(name, warc, None, stages, cpus)
            results["pipelines"].append(got)
            Path(args.json).write_text(json.dumps(results, indent=1))  # what is measured so far
            print(f"  {name} {cpus} CPU: {got['wall_s']:.1f} s, CPU {got['cpu_s']:.1f} s, largest process "
                  f"{got['rss_max_proc_gb']:.2f} GB, folder peak {got['peak_folder_bytes'] / 1e6:.0f} MB", file=sys.stderr,
                  flush=True)
    # MinHash's bytes per document: the same corpus with and without its keys, its index, its memory.
    if "minhash" in parts:
        results["minhash"] = minhash_sizing(args)
    results["machine"] = (f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, python "
                          f"{platform.python_version()}; {dt.datetime.now(dt.timezone.utc).isoformat(timespec='minutes')}; "
                          f"load average {os.getloadavg()[0]:.1f}")
    Path(args.json).write_text(json.dumps(results, indent=1))
    print(markdown(results))


def minhash_sizing(args) -> dict:
    folder = copies_input(args.docs, args.passages)
    docs = [str(folder / "part-*.jsonl")]
    index = OUT / "index"
    shutil.rmtree(index, ignore_errors=True)
    bare = run("copies-nodedup", docs, "jsonl", [], 1)
    mh = run("copies-minhash", docs, "jsonl", [{"minhash_dedup": {"save_index": str(index)}}], 1)
    bound = max(1, args.docs * 16 // 8)  # bucket rows: 16 bands a document; 1/8 of them per partition
    small = run("copies-minhash-bound", docs, "jsonl", [{"minhash_dedup": {"rows_per_partition": bound}}], 2)
    default2 = run("copies-minhash-2cpu", docs, "jsonl", [{"minhash_dedup": {}}], 2)
    index_bytes = sum(p.stat().st_size for p in index.rglob("*") if p.is_file())
    shutil.rmtree(index, ignore_errors=True)
    return {
        "docs": args.docs, "kept": mh["output_records"], "index_bytes": index_bytes,
        "index_bytes_per_kept_doc": index_bytes / max(1, mh["output_records"]),
        "runs": [bare, mh, small, default2], "rows_per_partition_bound": bound,
        "peak_folder_bytes_per_doc": mh["peak_folder_bytes"] / args.docs,
        "peak_folder_bytes_per_doc_without_minhash": bare["peak_folder_bytes"] / args.docs,
        "minhash_folder_bytes_per_doc": (mh["peak_folder_bytes"] - bare["peak_folder_bytes"]) / args.docs,
    }


def markdown(results: dict) -> str:
    lines = [f"machine: {results['machine']}", ""]
    if results["pipelines"]:
        lines += [
             "| pipeline | CPUs | input MB | wall s | CPU s (tree) | CPU s / GB in | tasks' CPU s / GB | largest process GB | "
             "tree RSS GB | run folder peak / GB in | final / GB in |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results["pipelines"]:
        gb = r["input_bytes"] / GB
        lines.append(f"| {r['name']} | {r['cpus']} | {r['input_bytes'] / 1e6:.0f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
                     f"{r['cpu_s'] / gb:.0f} | {r['task_cpu_s'] / gb:.0f} | {r['rss_max_proc_gb']:.2f} | "
                     f"{r['rss_sum_gb']:.2f} | {r['peak_folder_bytes'] / r['input_bytes']:.2f} | "
                     f"{r['final_folder_bytes'] / r['input_bytes']:.3f} |")
    m = results["minhash"]
    if not m:
        return "\n".join(lines)
    bare, mh, small, two = m["runs"]
    lines += ["", f"minhash_dedup on {m['docs']:,} documents of the copy-heavy corpus ({mh['input_bytes'] / 1e6:.0f} MB JSONL), "
              f"{m['kept']:,} kept:", "",
              "| run | CPUs | wall s | CPU s | largest process GB | run folder peak bytes / document |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r, what in ((bare, "no stage (the spine)"), (mh, "minhash_dedup, save_index"),
                    (small, f"minhash_dedup, rows_per_partition {m['rows_per_partition_bound']:,}"), (two, "minhash_dedup")):
        lines.append(f"| {what} | {r['cpus']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rss_max_proc_gb']:.2f} | "
                     f"{r['peak_folder_bytes'] / m['docs']:.0f} |")
    lines += ["", f"saved index: {m['index_bytes'] / 1e6:.1f} MB for {m['kept']:,} kept documents = "
              f"{m['index_bytes_per_kept_doc']:.0f} bytes a document; the run folder's peak grows by "
              f"{(mh['peak_folder_bytes'] - bare['peak_folder_bytes']) / m['docs']:.0f} bytes a document with minhash_dedup"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
