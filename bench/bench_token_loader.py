"""Benchmark (issue 14): `TokenLoader` serving fixed-length token sequences from a warm node-local cache,
against plain `numpy.memmap` reading the same `.bin` files into the same windows, and accelerator
utilisation in bench_cache.py's simulated training loop.

    .venv/bin/python bench/bench_token_loader.py [--pairs 8] [--repeats 5] [--epochs 20] [--seq-len 2048]
                                                 [--batch-size 16] [--au-repeats 3]

Data: Reuters-21578 articles and Project Gutenberg windows (`../shared/data`, bench_cache.documents)
tokenized with the tests' real BPE (tests/tokenruns.py: 1,000 tokens trained on the bundled crawl,
so about 3 characters per token) and written as Megatron pairs by ylink's writer (`write_pair`), with
a run manifest, in bench/_data/tokens/run-<pairs>.

Throughput (no sleep, each side in a fresh process, sides back to back in a rotating order; the
ratio is taken within each repeat, then the median):
  ylink        TokenLoader(http run, cache_dir=the warm cache): shuffled windows, int64 batches
  ylink-bnd    the same with boundaries=True (cu_seqlens, position_ids), for information
  memmap       numpy.memmap of the same cached .bin files (as plain ndarray views); the same windows
               in the same order (their file and offset computed before the clock starts), each
               copied into an int64 [batch, seq_len] array: the floor of reading these windows.
Tokens/s counts input tokens (batch x seq_len) per wall second from before the loader is made
(`--epochs` epochs per pass, each in its own order; modules, fsspec's HTTP filesystem included,
imported before the clock on both sides), and again after the first batch (start-up apart: the
loader's includes reading the manifest over HTTP, with the server's 30 ms latency).

AU: bench_cache.py's loop and server: a training loop that sleeps `--compute-s` / batches per
batch, fed from a throttled HTTP server on loopback (`--ratio` x the consumption rate, 30 ms per
request); cold (fresh cache folder) then warm (the folder cold filled). AU as MLPerf Storage
computes it (the first step left out) and from process start.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
DATA = REPO / "bench" / "_data" / "tokens"
WORK = REPO / "bench" / "_out" / "tokens"


def run_folder(pairs: int) -> Path:
    return DATA / f"run-{pairs}"


def build_data(target_mb: int, pairs: int) -> None:
    RUN = run_folder(pairs)
    if (RUN / "manifest.json").exists():
        return
    import pyarrow as pa
    from fsspec.implementations.local import LocalFileSystem

    from bench_cache import documents
    from tests.tokenruns import crawl_tokenizer
    from ylink_data.text.tokens.encode import encode_texts
    from ylink_data.text.tokens.load import load_tokenizer
    from ylink_data.io.megatron.write import megatron_section, write_pair

    t = time.perf_counter()
    tok = load_tokenizer(str(crawl_tokenizer(DATA / "tokenizer")))
    texts = [d["text"] for d in documents(target_mb * 1_000_000)]
    tmp = DATA / f"{RUN.name}.tmp"
    files, fs = [], LocalFileSystem()
    per = -(-len(texts) // pairs)
    for i in range(pairs):
        ids, _ = encode_texts(tok, texts[i * per:(i + 1) * per])
        files.append(write_pair(fs, str(tmp), f"megatron/part-{i:05d}", pa.chunked_array([ids]), tok.dtype))
        print(f"  pair {i}: {files[-1]['tokens']:,} tokens", flush=True)
    manifest = {"version": 1, "shards": [], "megatron": megatron_section(files, tok.dtype, tok.describe())}
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    tmp.rename(RUN)
    print(f"built {RUN} in {time.perf_counter() - t:.0f}s", flush=True)


def one_pass(spec: dict) -> dict:
    """One side once, in this process; returns its timings (see the module docstring)."""
    import importlib

    import numpy as np

    from ylink_data.cache.tokens import TokenLoader

    importlib.import_module("fsspec.implementations.http")  # both sides start with it (0.13 s of aiohttp)
    side, S, B, step = spec["side"], spec["seq_len"], spec["batch_size"], spec.get("step_s", 0)
    slept, first, first_done, first_slept, tokens = 0.0, None, None, None, 0

    def consume(n: int) -> None:
        nonlocal slept, first, first_done, first_slept, tokens
        if first is None:
            first = time.perf_counter() - t0
        tokens += n * S
        if step:
            s = time.perf_counter()
            time.sleep(step * n / B)
            slept += time.perf_counter() - s
        if first_done is None:
            first_done, first_slept = time.perf_counter() - t0, slept

    kw = dict(seq_len=S, batch_size=B, seed=spec.get("seed", 0), cache_dir=spec["cache"])
    epochs = spec.get("epochs", 1)
    if side == "memmap":
        # Outside the clock: where each window of each epoch lies (the loader's own order), and the
        # cached files.
        loader = TokenLoader(spec["url"], **kw)
        plans = []
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            files, starts = loader.epoch_files()
            ids = loader.window_ids(0, loader.num_windows) * S
            at = np.searchsorted(starts, ids, side="right") - 1
            plans.append(([spec["paths"][loader.pairs[int(i)].bin.ref.sha256] for i in files],
                          list(zip(at.tolist(), (ids - starts[at]).tolist()))))
        dtype = loader.file_dtype
        t0 = time.perf_counter()
        for paths, places in plans:
            # Plain ndarray views of the memmaps: slicing the memmap subclass itself costs about
            # twice as much per window, which would flatter the loader (it slices such views too).
            maps = [np.memmap(p, dtype=dtype, mode="r").view(np.ndarray) for p in paths]
            for j in range(0, len(places), B):
                out = np.empty((min(B, len(places) - j), S), np.int64)
                for i, (f, off) in enumerate(places[j:j + B]):
                    if off + S <= len(maps[f]):
                        out[i] = maps[f][off:off + S]
                    else:  # a window across two files
                        k = len(maps[f]) - off
                        out[i, :k], out[i, k:] = maps[f][off:], maps[f + 1][:S - k]
                consume(len(out))
    else:
        t0 = time.perf_counter()
        loader = TokenLoader(spec["url"], boundaries=side == "ylink-bnd", **kw)
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for batch in loader:
                consume(len(batch["input_ids"]))
    wall = time.perf_counter() - t0
    return {"wall": wall, "slept": slept, "first": first, "first_done": first_done, "first_slept": first_slept,
            "tokens": tokens, "cpu": time.process_time()}


def run_pass(spec: dict, timeout: float = 900) -> dict:
    out = subprocess.run([sys.executable, __file__, "_pass", json.dumps(spec)], capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"pass {spec['side']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cached_paths(cache: str) -> dict[str, str]:
    """sha256 -> path of each cached .bin (the cache's metadata names what each entry holds)."""
    out = {}
    for meta in (Path(cache) / "meta").glob("*.json"):
        m = json.loads(meta.read_text())
        if m["url"].endswith(".bin"):
            out[m["sha256"]] = str(Path(cache) / "shards" / f"{meta.stem}.parquet")
    return out


def main() -> None:
    from bench_cache import Server, au_mlperf, fresh

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--target-mb", type=int, default=60, help="text to tokenize")
    ap.add_argument("--pairs", type=int, default=8, help="files the tokens are written to (8: about 9 MB each)")
    ap.add_argument("--compute-s", type=float, default=10.0, help="AU loop: total sleep per epoch")
    ap.add_argument("--ratio", type=float, default=1.2, help="AU loop: server bandwidth / consumption")
    ap.add_argument("--au-repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5, help="epochs read per throughput pass")
    ap.add_argument("--latency-ms", type=float, default=30.0)
    args = ap.parse_args()

    build_data(args.target_mb, args.pairs)
    manifest = json.loads((run_folder(args.pairs) / "manifest.json").read_text())
    total_tokens = manifest["megatron"]["tokens"]
    total_bytes = sum(f["bin"]["bytes"] for f in manifest["megatron"]["files"])
    windows = total_tokens // args.seq_len
    batches = -(-windows // args.batch_size)
    print(f"run: {len(manifest['megatron']['files'])} pairs, {total_tokens:,} tokens "
          f"({manifest['megatron']['dtype']}, {total_bytes / 1e6:.1f} MB), {windows:,} windows of {args.seq_len}, "
          f"{batches} batches of {args.batch_size}", flush=True)
    print(f"date: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}", flush=True)
    WORK.mkdir(parents=True, exist_ok=True)
    server = Server(DATA, args.latency_ms)
    url = f"{server.base}/{run_folder(args.pairs).name}"
    common = {"url": url, "seq_len": args.seq_len, "batch_size": args.batch_size, "seed": 0}
    results = []
    try:
        # -- throughput from a warm cache ---------------------------------------------------
        server.control(rate=0)
        cache = fresh(WORK / "cache")
        run_pass({**common, "side": "ylink", "cache": cache})  # fills it
        paths = cached_paths(cache)
        sides = ["ylink", "memmap", "ylink-bnd"]
        for rep in range(args.repeats):
            for side in sides[rep % 3:] + sides[:rep % 3]:
                r = run_pass({**common, "side": side, "cache": cache, "paths": paths, "epochs": args.epochs})
                r.update(side=side, rep=rep, kind="throughput")
                results.append(r)
                print(f"  rep {rep} {side:>9}: {r['tokens'] / r['wall'] / 1e6:7.1f} M tokens/s, after the first "
                      f"batch {r['tokens'] / (r['wall'] - r['first']) / 1e6:7.1f} (wall {r['wall']:.3f}s, first batch "
                      f"{r['first']:.3f}s)", flush=True)
        # -- AU in the simulated training loop ----------------------------------------------
        step = args.compute_s / batches
        rate = total_bytes / args.compute_s
        print(f"AU loop: step {step * 1e3:.1f} ms, consumption {rate / 1e6:.2f} MB/s of .bin, server at "
              f"{args.ratio:g}x", flush=True)
        for rep in range(args.au_repeats):
            server.control(rate=args.ratio * rate, reset=1)
            cache = fresh(WORK / "au-cache")
            for side, temp in (("ylink", "cold"), ("ylink", "warm"), ("memmap", "warm")):
                r = run_pass({**common, "side": side, "cache": cache, "step_s": step,
                              "paths": cached_paths(cache) if side == "memmap" else {}})
                r.update(side=side, rep=rep, kind="au", temp=temp)
                results.append(r)
                print(f"  rep {rep} {side} {temp}: AU {au_mlperf(r):.1%} (from start {r['slept'] / r['wall']:.1%}), "
                      f"first batch {r['first']:.3f}s", flush=True)
    finally:
        server.stop()
    (WORK / f"results-{args.pairs}.json").write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    summarize(results)


def summarize(results: list[dict]) -> None:
    from bench_cache import au_mlperf

    by_rep: dict[int, dict[str, dict]] = {}
    for r in results:
        if r["kind"] == "throughput":
            by_rep.setdefault(r["rep"], {})[r["side"]] = r
    rate = lambda r: r["tokens"] / r["wall"]  # noqa: E731
    after = lambda r: r["tokens"] / (r["wall"] - r["first"])  # noqa: E731
    print("\n| side | M tokens/s (median) | after the first batch | first batch s | vs memmap, paired (median; all) "
          "| after the first batch, paired |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for side in ("memmap", "ylink", "ylink-bnd"):
        rs = [reps[side] for reps in by_rep.values()]
        ratios = [rate(reps[side]) / rate(reps["memmap"]) for reps in by_rep.values()]
        ratios2 = [after(reps[side]) / after(reps["memmap"]) for reps in by_rep.values()]
        print(f"| {side} | {statistics.median(rate(r) for r in rs) / 1e6:.1f} | "
              f"{statistics.median(after(r) for r in rs) / 1e6:.1f} | "
              f"{statistics.median(r['first'] for r in rs):.3f} | {statistics.median(ratios):.2f} "
              f"({', '.join(f'{x:.2f}' for x in ratios)}) | {statistics.median(ratios2):.2f} "
              f"({', '.join(f'{x:.2f}' for x in ratios2)}) |")
    for side, temp in (("ylink", "cold"), ("ylink", "warm"), ("memmap", "warm")):
        rs = [r for r in results if r.get("temp") == temp and r["side"] == side and r["kind"] == "au"]
        if rs:
            mlperf = ", ".join(f"{au_mlperf(r):.1%}" for r in rs)
            start = ", ".join(f"{r['slept'] / r['wall']:.1%}" for r in rs)
            firsts = ", ".join(f"{r['first']:.3f}" for r in rs)
            print(f"AU {side} {temp}: MLPerf {mlperf}; from start {start}; first batch {firsts} s")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_pass":
        print(json.dumps(one_pass(json.loads(sys.argv[2]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "summarize":
        summarize(json.loads((WORK / f"results-{sys.argv[2] if len(sys.argv) > 2 else 8}.json").read_text())["results"])
    else:
        main()
