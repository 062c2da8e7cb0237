"""Stage-level reuse (issue 41 part 1): a threshold sweep (5 thresholds of minhash_dedup, then 5 of
quality_classifier's min_score) of the quickstart pipeline on the bundled crawl concatenated `--copies`
times, each step run twice as whole `ylink run` commands: a rerun into the same folder (reusing the
unchanged phases) and a `--fresh` run of the same config in another folder. Per step: the time of
each, the bytes of the published output (checked equal, shard by shard), and the disk the reuse
files hold (OUTPUT/_work/ once the rerun is done).

    python bench/bench_reuse.py --copies 5
"""
from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "_out" / "reuse"
MINHASH = [0.75, 0.7, 0.65, 0.6, 0.55]
QUALITY = [0.1, 0.2, 0.3, 0.4, 0.5]


def crawl(copies: int) -> Path:
    """The bundled crawl's .warc.gz files concatenated `copies` times, in one file."""
    one = b"".join(p.read_bytes() for p in sorted((REPO / "samples" / "crawl").glob("*.warc.gz"))) * copies
    path = OUT / f"crawl-x{copies}.warc.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.stat().st_size != len(one):
        path.write_bytes(one)
    return path


def config(inp: Path, out: Path, minhash: float, quality: float | None) -> dict:
    cfg = yaml.safe_load((REPO / "pipelines" / "quickstart.yaml").read_text())
    cfg["input"] = {"paths": [str(inp)], "split_bytes": 8 << 20}
    cfg["output"]["path"] = str(out)
    for stage in cfg["stages"]:
        if "minhash_dedup" in stage:
            stage["minhash_dedup"]["threshold"] = minhash
        if "quality_classifier" in stage and quality is not None:
            stage["quality_classifier"]["min_score"] = quality
    return cfg


def ylink_run(cfg: dict, name: str, *flags: str) -> tuple[float, str]:
    path = OUT / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ylink_data", "run", str(path), "--no-progress", *flags],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    took = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(proc.stderr)
    line = next((entry for entry in proc.stderr.splitlines() if "recomputing from" in entry), "")
    return took, line


def size(folder: Path, work: bool) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()
               and (p.relative_to(folder).parts[0] == "_work") == work and p.name != "run.lock")


def shards(folder: Path) -> list[str]:
    return [s["sha256"] for s in json.loads((folder / "manifest.json").read_text())["shards"]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=5)
    args = parser.parse_args()
    inp = crawl(args.copies)
    reuse, fresh = OUT / "reuse-run", OUT / "fresh-run"
    first, _ = ylink_run(config(inp, reuse, 0.8, None), "first", "--fresh")
    print(f"first run: {first:.1f} s, output {size(reuse, False) / 1e6:.2f} MB, reuse files {size(reuse, True) / 1e6:.2f} MB")
    rows = []
    steps = [(m, None) for m in MINHASH] + [(MINHASH[-1], q) for q in QUALITY]
    for minhash, quality in steps:
        cfg = config(inp, reuse, minhash, quality)
        reused, line = ylink_run(cfg, "reuse")
        fresh_cfg = copy.deepcopy(cfg)
        fresh_cfg["output"]["path"] = str(fresh)
        full, _ = ylink_run(fresh_cfg, "fresh", "--fresh")
        assert shards(reuse) == shards(fresh), "reuse and --fresh published different shards"
        change = f"minhash_dedup.threshold={minhash}" if quality is None else f"quality_classifier.min_score={quality}"
        rows.append((change, reused, full, size(reuse, False), size(fresh, False), size(reuse, True), line))
        print(f"{change}: reuse {reused:.1f} s, --fresh {full:.1f} s, output {size(reuse, False):,} B "
              f"(fresh {size(fresh, False):,} B), reuse files {size(reuse, True):,} B | {line}", flush=True)
    print(f"\nMachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{dt.date.today()}; python bench/bench_reuse.py --copies {args.copies}\n")
    print("| step | reuse rerun | `--fresh` rerun | output bytes (both) | reuse files |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for change, reused, full, out_bytes, fresh_bytes, held, _ in rows:
        same = "" if out_bytes == fresh_bytes else f" (fresh {fresh_bytes:,})"
        print(f"| {change} | {reused:.1f} s | {full:.1f} s | {out_bytes:,}{same} | {held / 1e6:.2f} MB |")
    total_reuse, total_fresh = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"| **sweep of {len(rows)}** | **{total_reuse:.1f} s** | **{total_fresh:.1f} s** | | |")


if __name__ == "__main__":
    main()
