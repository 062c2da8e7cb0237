"""What output.megatron adds to tokenizing: Megatron .bin/.idx writing (`write_pair`) against the
tokenizer's own `encode_batch_fast` on the same real texts (the floor of the tokenize op).

Texts: the bundled crawl's pages extracted as the pipeline extracts them (English and Chinese).
Tokenizer: the 1,000-token byte-level BPE the tests train on the crawl (tests/tokenruns.py).
One thread (RAYON_NUM_THREADS=1), CPU seconds, sides interleaved, median of --repeats.

    .venv/bin/python bench/bench_megatron.py --copies 20 --repeats 5
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
from fsspec.implementations.local import LocalFileSystem  # noqa: E402
from warcio.archiveiterator import ArchiveIterator  # noqa: E402

from bench.benchtools import WALL_OVER_CPU, timed  # noqa: E402
from tests.tokenruns import crawl_tokenizer  # noqa: E402
from ylink_data.text.tokens.encode import encode_texts  # noqa: E402
from ylink_data.text.tokens.load import load_tokenizer  # noqa: E402
from ylink_data.io.megatron.write import write_pair  # noqa: E402
from ylink_data.text.transform.extract import extract_text  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "crawl"


def crawl_texts() -> list[str]:
    texts = []
    for path in sorted(SAMPLES.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    text = extract_text(record.content_stream().read().decode("utf-8", "replace"))
                    if text:
                        texts.append(text)
    return texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    texts = crawl_texts() * args.copies
    with tempfile.TemporaryDirectory() as tmp:
        tok = load_tokenizer(str(crawl_tokenizer(Path(tmp) / "tok")))
        ids, _ = encode_texts(tok, texts)
        column = pa.chunked_array([ids])
        tokens = len(column.combine_chunks().values)
        fs = LocalFileSystem()
        sides = {"encode_batch_fast (floor)": lambda: tok.tokenizer.encode_batch_fast(texts),
                 "encode_texts (tokenize op)": lambda: encode_texts(tok, texts),
                 "write_pair (.bin/.idx + sha256)": lambda: write_pair(fs, tmp, "megatron/part-00000", column, tok.dtype)}
        times = {name: [] for name in sides}
        for _ in range(args.repeats):
            for name, fn in sides.items():
                times[name].append(timed(fn))
    print(f"{len(texts):,} documents, {sum(map(len, texts)) / 1e6:.1f} M characters, {tokens:,} tokens")
    for name, t in times.items():
        median = statistics.median(t)
        print(f"{name:34s} {tokens / median / 1e6:8.2f} M tokens/s per core   {median:.3f} s")
    floor, write = statistics.median(times["encode_batch_fast (floor)"]), statistics.median(times["write_pair (.bin/.idx + sha256)"])
    print(f"Megatron writing adds {write / floor:.1%} to the floor's time; wall/CPU max {max(WALL_OVER_CPU):.2f}")


if __name__ == "__main__":
    main()
