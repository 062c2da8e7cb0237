"""Benchmark (issue 14, mixtures): `ylink mix` materialising a mixture, against copying the same
number of tokens from the same .bin files straight into one file (the floor: no choice, no shuffle,
no .idx, no hashing).

    .venv/bin/python bench/bench_mix.py [--repeats 3] [--tokens 20000000]

Data: the bundled crawl's 3,061 documents (tests/shardruns.crawl_documents) tokenized by the tests'
real 1,000-token BPE into three runs of Megatron pairs (tests/tokenruns.write_token_run), about 1M
tokens each, in bench/_data/mix. The mixture takes `--tokens` from them at weights 0.5/0.3/0.2
(so each source is repeated 4 to 9 times: max_epochs 20), materialised into pairs of 4M tokens.
Sides interleaved `--repeats` times in one process, median of CPU seconds (bench/benchtools.py).
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.benchtools import WALL_OVER_CPU, timed  # noqa: E402

DATA = REPO / "bench" / "_data" / "mix"
OUT = REPO / "bench" / "_out" / "mix"


def build_sources() -> list[Path]:
    from tests.tokenruns import write_token_run

    runs = [DATA / name for name in ("a", "b", "c")]
    if not all((run / "manifest.json").exists() for run in runs):
        shutil.rmtree(DATA, ignore_errors=True)
        for i, run in enumerate(runs):  # 1,020 documents each, in pairs of 255
            write_token_run(run, [255] * 4, start=i * 1020)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=20_000_000)
    args = parser.parse_args()
    from ylink_data.tokens.mix import plan_mixture, write_mixture
    from ylink_data.tokens.mix_config import load_mix_config

    runs = build_sources()
    cfg = load_mix_config({
        "sources": [{"path": str(run), "weight": w} for run, w in zip(runs, (0.5, 0.3, 0.2))],
        "tokens": args.tokens, "seed": 0, "max_epochs": 20,
        "output": {"path": str(OUT / "mixture"), "materialize": True, "shard_tokens": 4 * 2 ** 20}})
    bins = sorted(DATA.glob("*/megatron/*.bin"))

    def ylink() -> None:
        write_mixture(plan_mixture(cfg))

    def copy() -> None:  # the same tokens, sequentially from the memory-mapped .bin files
        left = args.tokens
        with open(OUT / "copy.bin", "wb") as out:
            while left > 0:
                for path in bins:
                    ids = np.memmap(path, dtype="<u2", mode="r")[:left]
                    out.write(ids.tobytes())
                    left -= len(ids)

    OUT.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {"ylink mix (materialise)": [], "copy .bin (floor)": []}
    for _ in range(args.repeats):
        times["ylink mix (materialise)"].append(timed(ylink))
        times["copy .bin (floor)"].append(timed(copy))
    taken = json.loads((OUT / "mixture" / "mixture.json").read_text())["taken"]["tokens"]
    print(f"tokens: {taken:,} mixed, {args.tokens:,} copied; wall/CPU {statistics.median(WALL_OVER_CPU):.2f}")
    rates = {}
    for side, seconds in times.items():
        n = taken if side.startswith("ylink") else args.tokens
        rates[side] = n / statistics.median(seconds)
        print(f"| {side} | {rates[side] / 1e6:.1f} M tokens/s | {statistics.median(seconds):.2f} s |")
    print(f"ratio ylink / floor: {rates['ylink mix (materialise)'] / rates['copy .bin (floor)']:.2f}")


if __name__ == "__main__":
    main()
