"""Benchmark (issue 7): a training loop fed from a run on a slow, far server, with and without the
node-local shard cache, against MosaicML Streaming over the same documents.

    .venv/bin/python bench/bench_cache.py [--repeats 3] [--ratios 0.8,1.2,2] [--compute-s 10]

Data: a real run built once with `ylink_data.run` (no ops) from Reuters-21578 articles and Project
Gutenberg windows (`../shared/data`), repeated with shifted windows to about 300 MB of text, cut
into ~35 shards (`output.shard_bytes`), in bench/_data/cache/run. The same documents (id, text),
in the same row order, are written with `streaming.MDSWriter` (zstd) to bench/_data/cache/mds.

Server: a separate process serving bench/_data/cache over HTTP on 127.0.0.1 (HEAD, GET, Range) with
a token bucket shared by all connections (`--ratios` x the consumption rate) and `--latency-ms`
added before every answer.

Consumer: a training loop that sleeps `--compute-s` / (number of batches) per batch of
`--batch-size` rows (pro rata for a short batch): the consumption rate is the run's shard bytes /
`--compute-s`. AU = time slept / wall time from before the loader is made to the end of the last
step (MLPerf Storage's accelerator utilisation); first batch = wall time until the first batch
arrives. Each pass runs in a fresh subprocess (no shared state but the cache folders and the OS page
cache). Sides, taking turns, the order rotating with each repeat:
  ylink      ShardLoader(url, cache_dir=fresh folder) (cold), then again over the filled cache (warm)
  nocache    ShardLoader(url, cache_dir=None): fsspec straight from the server
  fsspec     pyarrow.parquet.read_table(fsspec.open(shard)) per shard, in the loader's shard order
  streaming  StreamingDataset(remote=http://..., local=fresh folder) (cold), then the filled folder
             (warm). Streaming 0.13 has no http(s) downloader: one is registered here (a plain
             streamed GET into local + '.tmp', then a rename, as its other downloaders do).
Then read throughput without the sleep (warm cache vs pyarrow reading the same local files).
`bench_cache.py summarize` prints the table again from bench/_out/cache/results.json.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))
DATA = REPO / "bench" / "_data" / "cache"
RUN = DATA / "run"
MDS = DATA / "mds"
WORK = REPO / "bench" / "_out" / "cache"


# -- data ---------------------------------------------------------------------------------------

def documents(target_bytes: int) -> list[dict]:
    """Reuters articles and 2,000-character Gutenberg windows, repeated with shifted windows (and
    Reuters articles with a shifted start) until `target_bytes` of text; shuffled."""
    reuters = []
    with gzip.open(SHARED / "en_reuters21578_nltk/reuters21578_apte.jsonl.gz", "rt") as f:
        for line in f:
            t = json.loads(line)["text"]
            if len(t) >= 300:
                reuters.append(t)
    books = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt"))]
    docs, total, copy = [], 0, 0
    while total < target_bytes:
        shift = (copy * 389) % 2000
        for b, book in enumerate(books):
            for i in range(shift, len(book) - 2000, 2000):
                docs.append({"id": f"g{copy}-{b}-{i}", "text": book[i:i + 2000]})
        for r, t in enumerate(reuters):
            cut = (copy * 37) % 120
            docs.append({"id": f"r{copy}-{r}", "text": t[cut:]})
        total = sum(len(d["text"]) for d in docs)
        copy += 1
    random.Random(7).shuffle(docs)
    return docs


def build_data(target_mb: int, shard_mb: float) -> None:
    if (RUN / "manifest.json").exists() and (MDS / "index.json").exists():
        return
    import pyarrow.parquet as pq
    import ylink_data

    DATA.mkdir(parents=True, exist_ok=True)
    inputs = DATA / "input"
    if not inputs.exists():
        docs = documents(target_mb * 1_000_000)
        tmp = DATA / "input.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for k in range(8):
            with open(tmp / f"docs-{k}.jsonl", "w") as f:
                for d in docs[k::8]:
                    f.write(json.dumps(d) + "\n")
        tmp.rename(inputs)
    if not (RUN / "manifest.json").exists():
        t = time.perf_counter()
        ylink_data.run({"name": "bench-cache", "input": {"paths": [str(inputs / "*.jsonl")], "format": "jsonl"},
                        "output": {"path": str(RUN), "shard_bytes": int(shard_mb * 2**20)}, "stages": [],
                        "ray": {"num_cpus": 2}}, progress=False)
        print(f"built {RUN} in {time.perf_counter() - t:.0f}s", flush=True)
    if not (MDS / "index.json").exists():
        stub_streaming_imports()
        from streaming import MDSWriter
        manifest = json.loads((RUN / "manifest.json").read_text())
        raw = sum(pq.ParquetFile(RUN / s["path"]).metadata.num_rows for s in manifest["shards"])
        text_bytes = 0
        tables = [pq.read_table(RUN / s["path"], columns=["id", "text"]) for s in manifest["shards"]]
        text_bytes = sum(t.nbytes for t in tables)
        # About as many shards as the run has (size_limit counts uncompressed bytes).
        limit = int(text_bytes / len(manifest["shards"])) + (1 << 16)
        tmp = DATA / "mds.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        with MDSWriter(out=str(tmp), columns={"id": "str", "text": "str"}, compression="zstd", size_limit=limit) as w:
            for table in tables:
                for row in table.to_pylist():
                    w.write(row)
        tmp.rename(MDS)
        print(f"wrote {raw:,} rows to {MDS}", flush=True)


def data_sizes() -> dict:
    manifest = json.loads((RUN / "manifest.json").read_text())
    index = json.loads((MDS / "index.json").read_text())
    mds_zip = sum(s["zip_data"]["bytes"] for s in index["shards"])
    mds_raw = sum(s["raw_data"]["bytes"] for s in index["shards"])
    return {"shards": len(manifest["shards"]), "rows": sum(s["rows"] for s in manifest["shards"]),
            "bytes": sum(s["bytes"] for s in manifest["shards"]), "mds_shards": len(index["shards"]),
            "mds_zip_bytes": mds_zip, "mds_raw_bytes": mds_raw}


# -- the throttled server (its own process) -----------------------------------------------------

def serve(root: str, latency_ms: float) -> None:
    import re
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlparse

    state = {"rate": None, "latency": latency_ms / 1000, "sent": 0, "requests": 0}
    lock = threading.Lock()
    clock = [0.0]  # the time at which the bucket has paid for everything handed out so far

    def take(n: int) -> None:
        """Token bucket shared by all connections (burst: 50 ms of bandwidth)."""
        rate = state["rate"]
        if not rate:
            return
        with lock:
            now = time.monotonic()
            clock[0] = max(clock[0], now - 0.05) + n / rate
            wait = clock[0] - now
        if wait > 0:
            time.sleep(wait)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_HEAD(self) -> None:
            self._answer(False)

        def do_GET(self) -> None:
            self._answer(True)

        def _answer(self, body: bool) -> None:
            url = urlparse(self.path)
            if url.path == "/_control":
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                with lock:
                    if "rate" in q:
                        state["rate"] = float(q["rate"]) or None
                        clock[0] = 0.0
                    if "latency" in q:
                        state["latency"] = float(q["latency"])
                    if "reset" in q:
                        state["sent"] = state["requests"] = 0
                    data = json.dumps(state).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            with lock:
                state["requests"] += 1
            time.sleep(state["latency"])
            file = Path(root) / url.path.lstrip("/")
            if not file.is_file():
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            size = file.stat().st_size
            start, end, status = 0, size, 200
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range") or "")
            if m and (m[1] or m[2]):
                if m[1]:
                    start = int(m[1])
                    end = min(size, int(m[2]) + 1) if m[2] else size
                else:
                    start = max(0, size - int(m[2]))
                status = 206
            self.send_response(status)
            self.send_header("Content-Length", str(end - start))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Type", "application/octet-stream")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            if not body:
                return
            with open(file, "rb") as f:
                f.seek(start)
                left = end - start
                while left > 0:
                    piece = f.read(min(left, 64 * 1024))
                    take(len(piece))
                    try:
                        self.wfile.write(piece)
                    except (BrokenPipeError, ConnectionResetError):
                        self.close_connection = True
                        return
                    left -= len(piece)
                    with lock:
                        state["sent"] += len(piece)

    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address) -> None:  # a client closing early is normal
            pass

    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever(0.05)


class Server:
    def __init__(self, root: Path, latency_ms: float):
        self.proc = subprocess.Popen([sys.executable, __file__, "_serve", str(root), str(latency_ms)],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.base = f"http://127.0.0.1:{self.port}"

    def control(self, **kw) -> dict:
        import urllib.request
        q = "&".join(f"{k}={v}" for k, v in kw.items())
        with urllib.request.urlopen(f"{self.base}/_control?{q}") as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


# -- one measured pass (its own process) -----------------------------------------------------------

def stub_streaming_imports() -> None:
    """`import streaming` imports transformers and torchvision for its text and vision datasets;
    neither is used here and neither is installed (they would pull a CUDA torch), so stand-ins
    let the import succeed. The MDS reader and StreamingDataset do not touch them."""
    import types
    for name, attrs in {"transformers": [], "transformers.feature_extraction_utils": ["BatchFeature"],
                        "transformers.tokenization_utils_base": ["BatchEncoding"], "transformers.models": [],
                        "transformers.models.auto": [], "transformers.models.auto.tokenization_auto": ["AutoTokenizer"],
                        "torchvision": [], "torchvision.datasets": ["VisionDataset", "CIFAR10"],
                        "torchvision.transforms": [], "torchvision.transforms.functional": ["to_tensor"]}.items():
        if name in sys.modules:
            continue
        mod = types.ModuleType(name)
        mod.__path__ = []
        for a in attrs:
            setattr(mod, a, type(a, (object,), {}))
        sys.modules[name] = mod


def register_http_downloader() -> None:
    """MosaicML Streaming 0.13 downloads from s3, gs, oci, azure, hf, sftp, dbfs and local paths
    only (`CloudDownloader.get` raises 'Unsupported remote path' for http://). This adds http the way
    its other downloaders work: the whole file in one request into `local + '.tmp'`, then a rename."""
    import requests
    from streaming.base.storage import download as dl

    class HTTPDownloader(dl.CloudDownloader):
        _session = None

        @staticmethod
        def _client_identifier() -> str:
            return "http"

        def clean_up(self) -> None:
            pass

        def _download_file_impl(self, remote: str, local: str, timeout: float) -> None:
            if HTTPDownloader._session is None:
                HTTPDownloader._session = requests.Session()
            tmp = f"{local}.{os.getpid()}-{threading.get_ident()}.part"  # unique: workers may race
            with HTTPDownloader._session.get(remote, stream=True, timeout=timeout) as r:
                if r.status_code == 404:
                    raise FileNotFoundError(remote)
                r.raise_for_status()
                with open(tmp, "wb") as f:
                    for chunk in r.iter_content(1 << 20):
                        f.write(chunk)
            os.replace(tmp, local)

    dl.DOWNLOADER_MAPPINGS["http"] = HTTPDownloader


def one_pass(spec: dict) -> dict:
    """Runs one side once; returns its timings. spec: side, base, cache, batch_size, step_s (0: no
    sleep), seed."""
    import numpy as np  # noqa: F401 -- imported before timing, as every side needs it
    import pyarrow as pa  # noqa: F401
    import pyarrow.parquet as pq

    side, B, step = spec["side"], spec["batch_size"], spec["step_s"]
    if side.startswith("streaming"):
        stub_streaming_imports()
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory
        register_http_downloader()
        clean_stale_shared_memory()
    else:
        import fsspec
        from ylink_data.cache import ShardLoader

    slept = 0.0
    first = first_done = first_slept = None
    rows = 0

    def consume(n: int) -> None:
        nonlocal slept, first, first_done, first_slept, rows
        if first is None:
            first = time.perf_counter() - t0
        rows += n
        if step:
            s = time.perf_counter()
            time.sleep(step * n / B)
            slept += time.perf_counter() - s
        if first_done is None:  # the first step, which MLPerf Storage (DLIO) leaves out of AU
            first_done, first_slept = time.perf_counter() - t0, slept

    epochs = spec.get("epochs", 1)
    t0 = time.perf_counter()
    if side in ("ylink", "nocache", "local"):
        url = spec["base"] + "/run" if side != "local" else str(RUN)
        loader = ShardLoader(url, cache_dir=spec.get("cache"), batch_size=B, seed=spec.get("seed", 0))
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for batch in loader:
                consume(batch.num_rows)
    elif side == "fsspec":
        loader = ShardLoader(spec["base"] + "/run", batch_size=B, seed=spec.get("seed", 0))
        for shard in shard_order(loader):
            with fsspec.open(loader.shard_url(shard), "rb") as f:
                table = pq.read_table(f)
            for batch in table.to_batches(max_chunksize=B):
                consume(batch.num_rows)
    elif side == "pyarrow-local":
        for _ in range(epochs):
            for path in spec["files"]:
                table = pq.read_table(path)
                for batch in table.to_batches(max_chunksize=B):
                    consume(batch.num_rows)
    elif side == "streaming":
        ds = StreamingDataset(remote=spec["base"] + "/mds" if spec["base"] else None, local=spec["cache"],
                              shuffle=True, batch_size=B, shuffle_seed=spec.get("seed", 0) + 1)
        if spec.get("workers"):
            # As Streaming's documentation feeds a training loop: its DataLoader, with workers.
            from streaming import StreamingDataLoader
            dl = StreamingDataLoader(ds, batch_size=B, num_workers=spec.get("workers", 2),
                                     collate_fn=lambda samples: samples)
            for batch in dl:
                consume(len(batch))
        else:  # the dataset iterated in the training process itself
            n = 0
            for sample in ds:
                n += 1
                if n == B:
                    consume(n)
                    n = 0
            if n:
                consume(n)
    else:
        raise ValueError(side)
    wall = time.perf_counter() - t0
    return {"wall": wall, "slept": slept, "first": first, "first_done": first_done, "first_slept": first_slept,
            "rows": rows, "epochs": epochs}


def shard_order(loader) -> list[int]:
    """The loader's shards in the order it first reads them."""
    order, seen = loader.order, []
    for j in loader.steps():
        a, b = loader.batch_positions(j)
        for block, _, _ in order.pieces(a, b):
            s = int(order.block_shard[block])
            if s not in seen:
                seen.append(s)
    return seen


def run_pass(spec: dict, timeout: float = 600) -> dict:
    out = subprocess.run([sys.executable, __file__, "_pass", json.dumps(spec)], capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"pass {spec['side']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the benchmark ------------------------------------------------------------------------------

def fresh(path: Path) -> str:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ratios", default="0.8,1.2,2")
    ap.add_argument("--compute-s", type=float, default=10.0, help="total sleep per epoch (sets the consumption rate)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--latency-ms", type=float, default=30.0)
    ap.add_argument("--target-mb", type=int, default=300, help="text to build the run from")
    ap.add_argument("--shard-mb", type=float, default=3.0)
    ap.add_argument("--sides", default="ylink,nocache,fsspec,streaming")
    ap.add_argument("--throughput-repeats", type=int, default=5)
    ap.add_argument("--throughput-epochs", type=int, default=3, help="epochs read per throughput pass")
    ap.add_argument("--streaming-workers", type=int, default=0,
                    help="0: iterate StreamingDataset in the training process; N: StreamingDataLoader with N workers")
    ap.add_argument("--streaming-warm-ratios", default="1.2")
    args = ap.parse_args()

    build_data(args.target_mb, args.shard_mb)
    sizes = data_sizes()
    n_batches = -(-sizes["rows"] // args.batch_size)
    step = args.compute_s / n_batches
    rate = sizes["bytes"] / args.compute_s
    print(f"run: {sizes['shards']} shards, {sizes['rows']:,} rows, {sizes['bytes'] / 1e6:.1f} MB; MDS (zstd): "
          f"{sizes['mds_shards']} shards, {sizes['mds_zip_bytes'] / 1e6:.1f} MB on the wire, "
          f"{sizes['mds_raw_bytes'] / 1e6:.1f} MB decompressed", flush=True)
    print(f"{n_batches} batches of {args.batch_size}, step {step * 1e3:.1f} ms: consumption "
          f"{rate / 1e6:.2f} MB/s of shards; latency {args.latency_ms:g} ms per request", flush=True)
    print(f"date: {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}", flush=True)

    WORK.mkdir(parents=True, exist_ok=True)
    server = Server(DATA, args.latency_ms)
    results: list[dict] = []
    sides = args.sides.split(",")
    try:
        ratios = [float(r) for r in args.ratios.split(",")]
        warm_ratios = [float(r) for r in args.streaming_warm_ratios.split(",")]
        for rep in range(args.repeats):
            for ratio in ratios:
                server.control(rate=ratio * rate, reset=1)
                turn = sides[rep % len(sides):] + sides[:rep % len(sides)]
                for side in turn:
                    base = {"base": server.base, "batch_size": args.batch_size, "step_s": step, "seed": 0,
                            "workers": args.streaming_workers}
                    if side in ("ylink", "streaming"):
                        cache = fresh(WORK / f"{side}-cache")
                        for temp in ("cold", "warm"):
                            if side == "streaming" and temp == "warm" and ratio not in warm_ratios:
                                continue  # warm reads no network: measured at fewer ratios, to save time
                            before = server.control()["sent"]
                            r = run_pass({**base, "side": side, "cache": cache})
                            r.update(side=side, ratio=ratio, temp=temp, rep=rep, wire=server.control()["sent"] - before)
                            results.append(r)
                            report(r)
                    else:
                        before = server.control()["sent"]
                        r = run_pass({**base, "side": side})
                        r.update(side=side, ratio=ratio, temp="cold", rep=rep, wire=server.control()["sent"] - before)
                        results.append(r)
                        report(r)
        # Read throughput without the sleep: warm cache vs pyarrow on the same local files.
        server.control(rate=0)
        cache = fresh(WORK / "ylink-cache")
        run_pass({"base": server.base, "batch_size": args.batch_size, "step_s": 0, "side": "ylink", "cache": cache})
        files = sorted(str(p) for p in (Path(cache) / "shards").glob("*.parquet"))
        scache = fresh(WORK / "streaming-cache")
        run_pass({"base": server.base, "batch_size": args.batch_size, "step_s": 0, "side": "streaming", "cache": scache,
                  "workers": args.streaming_workers})
        tp_sides = [("ylink", {"cache": cache}), ("pyarrow-local", {"files": files}), ("local", {}),
                    ("streaming", {"cache": scache, "workers": args.streaming_workers})]
        for rep in range(args.throughput_repeats):
            # Streaming reads at a few MB/s here (30+ s a pass): once is enough to place it.
            sides_now = tp_sides if rep == 0 else tp_sides[:3]
            for side, extra in sides_now[rep % len(sides_now):] + sides_now[:rep % len(sides_now)]:
                epochs = 1 if side == "streaming" else args.throughput_epochs
                r = run_pass({"base": server.base, "batch_size": args.batch_size, "step_s": 0, "side": side,
                              "epochs": epochs, **extra})
                r.update(side=side, ratio=None, temp="throughput", rep=rep)
                results.append(r)
                report(r)
    finally:
        server.stop()
    (WORK / "results.json").write_text(json.dumps({"args": vars(args), "sizes": sizes, "rate": rate,
                                                   "results": results}, indent=1))
    summarize(results, sizes, rate)


def au_mlperf(r: dict) -> float | None:
    """AU as MLPerf Storage's DLIO computes it: the first step (its load and its compute) left out,
    so compute of steps 2..n / wall time from the end of step 1 to the end."""
    if not r["slept"] or r.get("first_done") is None:
        return None
    return (r["slept"] - r["first_slept"]) / (r["wall"] - r["first_done"])


def report(r: dict) -> None:
    au = r["slept"] / r["wall"] if r["slept"] else None
    au1 = au_mlperf(r)
    print(f"  rep {r['rep']} {r['side']:>13} {str(r['ratio']):>4} {r['temp']:>10}: wall {r['wall']:6.2f}s"
          + (f" AU {au1:6.1%} (from start {au:6.1%})" if au is not None else "") + f" first {r['first']:.3f}s "
          f"rows {r['rows']:,}" + (f" wire {r['wire'] / 1e6:.1f} MB" if r.get("wire") is not None else ""), flush=True)


def summarize(results: list[dict], sizes: dict, rate: float) -> None:
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["side"], r["ratio"], r["temp"]), []).append(r)
    print("\n| side | bandwidth / consumption | cache | AU (MLPerf Storage: step 1 left out) | AU from process start "
          "| first batch s | MB/s | MB/s after the first batch | wire MB |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (side, ratio, temp), rs in groups.items():
        med = lambda k: statistics.median(x[k] for x in rs)  # noqa: E731
        size = sizes["mds_zip_bytes"] if side == "streaming" else sizes["bytes"]
        size_of = lambda x: size * x.get("epochs", 1)  # noqa: E731
        au = statistics.median(x["slept"] / x["wall"] for x in rs) if rs[0]["slept"] else None
        au1 = statistics.median(au_mlperf(x) for x in rs) if rs[0]["slept"] and "first_done" in rs[0] else None
        mbs = statistics.median(size_of(x) / x["wall"] for x in rs) / 1e6
        wire = statistics.median(x.get("wire") or 0 for x in rs) / 1e6
        # Start-up (imports done lazily, the manifest, the first shard) apart from the steady state.
        mbs2 = statistics.median(size_of(x) / (x["wall"] - x["first"]) for x in rs) / 1e6
        print(f"| {side} | {'-' if ratio is None else f'{ratio:g}x'} | {temp} | "
              f"{'-' if au1 is None else f'{au1:.1%}'} | {'-' if au is None else f'{au:.1%}'} | {med('first'):.3f} | "
              f"{mbs:.1f} | {mbs2:.1f} | {wire:.1f} |")
    tp = {s: statistics.median(sizes["bytes"] * x.get("epochs", 1) / x["wall"] for x in rs)
          for (s, _, t), rs in groups.items() if t == "throughput" and s != "streaming"}
    tp2 = {s: statistics.median(sizes["bytes"] * x.get("epochs", 1) / (x["wall"] - x["first"]) for x in rs)
           for (s, _, t), rs in groups.items() if t == "throughput" and s != "streaming"}
    if "ylink" in tp and "pyarrow-local" in tp:
        print(f"\nread throughput / pyarrow local (medians): warm ShardLoader {tp['ylink'] / tp['pyarrow-local']:.2f} "
              f"(after the first batch {tp2['ylink'] / tp2['pyarrow-local']:.2f}), ShardLoader on the local run "
              f"{tp['local'] / tp['pyarrow-local']:.2f} ({tp2['local'] / tp2['pyarrow-local']:.2f})")
        # The same ratio within each repeat (the sides ran back to back), then the median: steadier
        # on a shared machine than a ratio of medians taken minutes apart.
        by_rep: dict[int, dict[str, dict]] = {}
        for r in results:
            if r["temp"] == "throughput":
                by_rep.setdefault(r["rep"], {})[r["side"]] = r
        for label, cut in (("from process start", lambda x: x["wall"]),
                           ("after the first batch", lambda x: x["wall"] - x["first"])):
            ratios = sorted(cut(s["pyarrow-local"]) / cut(s["ylink"]) for s in by_rep.values()
                            if "ylink" in s and "pyarrow-local" in s)
            print(f"paired ratios, warm ShardLoader / pyarrow, {label}: median {statistics.median(ratios):.2f} "
                  f"(all: {', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "summarize":  # the table again, from the last results.json
        saved = json.loads((WORK / "results.json").read_text())
        summarize(saved["results"], saved["sizes"], saved["rate"])
    elif len(sys.argv) > 1 and sys.argv[1] == "_serve":
        serve(sys.argv[2], float(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_pass":
        print(json.dumps(one_pass(json.loads(sys.argv[2]))))
    else:
        main()
