"""Benchmark (issue 15): qa_generate's requests in flight and pairs/s against the test server
(tests/llmserver.py) at a fixed server latency, for a few `llm.max_concurrency` values.

    PYTHONPATH=. .venv/bin/python bench/bench_qa_generate.py [--latency 0.2] [--concurrency 4,16,64] [--rounds 6]

Goal: throughput within 10% of max_concurrency / latency (requests per second; pairs/s is 3x that,
3 pairs per chunk). The server runs in its own process (so its event loop does not share the GIL
with the client's threads); the op runs in this process as one Ray worker would (`process` on a
batch of `rounds * max_concurrency` distinct chunks, the response cache off). Chunks: the first
1,000-character windows of THUCNews articles (`../shared/data/zh_thucnews_cnews`).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.llmserver import LLMServer  # noqa: E402
from ylink_data.core.schema import DOCUMENT_SCHEMA  # noqa: E402
from ylink_data.ops.qa_generate import QAGenerate  # noqa: E402

SHARED = REPO.parent / "shared" / "data"


def serve(latency: float, ports: mp.Queue, stop: mp.Event) -> None:
    with LLMServer(latency=latency) as server:
        ports.put(server.port)
        stop.wait()
        ports.put(server.max_in_flight)


def chunks(n: int) -> pa.Table:
    lines = (SHARED / "zh_thucnews_cnews/cnews.val.txt").read_text(encoding="utf-8").splitlines()
    texts = [lines[i % len(lines)].split("\t", 1)[1][:1000] + f"（{i}）" for i in range(n)]  # distinct prompts
    return pa.Table.from_pydict({"id": [f"c{i}" for i in range(n)], "text": texts, "url": [None] * n,
                                 "source": ["bench"] * n, "lang": ["zh"] * n, "lang_score": [None] * n,
                                 "metadata": [None] * n}, schema=DOCUMENT_SCHEMA)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", default="4,16,64")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    print(f"| max_concurrency | requests | max in flight (server) | seconds | requests/s | pairs/s | "
          f"goal c/latency | ratio |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in [int(x) for x in args.concurrency.split(",")]:
        ports, stop = mp.Queue(), mp.Event()
        proc = mp.Process(target=serve, args=(args.latency, ports, stop))
        proc.start()
        port = ports.get(timeout=30)
        op = QAGenerate(pairs=3, llm={"base_url": f"http://127.0.0.1:{port}/v1", "model": "bench",
                                      "max_concurrency": c, "cache": False})
        op.setup()
        op.process(chunks(c))  # warm-up: connections opened
        table = chunks(args.rounds * c)
        started = time.perf_counter()
        result = op.process(table)
        seconds = time.perf_counter() - started
        stop.set()
        in_flight = ports.get(timeout=30)
        proc.join()
        op.teardown()
        pairs = result.table.num_rows - sum(1 for d in result.dropped if d)
        rate, goal = table.num_rows / seconds, c / args.latency
        print(f"| {c} | {table.num_rows} | {in_flight} | {seconds:.2f} | {rate:.1f} | {pairs / seconds:.1f} | "
              f"{goal:.1f} | {rate / goal:.3f} |")


if __name__ == "__main__":
    main()
