"""Tokens per CPU-second (= per core) on real English and Chinese documents, in one run:

(a) ylink: the `tokenize` op's `process` on Arrow batches, then the Megatron .bin/.idx pair written
    from its `token_ids` (`tokens.megatron.write_pair`);
(b) the floor: the `tokenizers` library's own `encode_batch_fast` on the same texts (ids only);
    `encode_batch` (with offsets) is shown too;
(c) datatrove's `DocumentTokenizer` (same tokenizer.json, same end-of-document token, one worker,
    no shuffling: it writes its .ds token file and index, as (a) writes Megatron's pair).

Every side runs single-threaded (TOKENIZERS_PARALLELISM=false, as the op sets it in a 1-CPU Ray
task) and is timed in CPU seconds of this process. The sides are interleaved `--repeats` times and
the best time of each is reported: on a shared machine, other jobs only ever add time (CPU seconds
inflate under contention for caches and cores), so the minimum is the least disturbed measure. Then a check of "one tokenizer thread per worker core": `--workers` processes
encode at once, as that many 1-CPU Ray tasks would, with the library's default thread pool and with
the op's setting; tokens per wall second of all of them, divided by the cores they share.

    .venv/bin/python bench/bench_tokenize.py [--mb 3] [--vocab-size 32000] [--repeats 3] [--workers 2]

English: Reuters-21578 articles; Chinese: THUCNews articles (both ../shared/data). The tokenizer is
trained by `ylink tokenizer train` on the same texts (cached under /tmp).
"""
from __future__ import annotations

import argparse
import gzip
import logging
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before the library is used (the workers' check sets its own)

import pyarrow as pa  # noqa: E402
from fsspec.implementations.local import LocalFileSystem  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchtools import WALL_OVER_CPU, timed  # noqa: E402

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
BATCH_ROWS = 1024


def english(limit: int) -> list[str]:
    out, size = [], 0
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            out.append(text)
            size += len(text.encode())
            if size >= limit:
                break
    return out


def chinese(limit: int) -> list[str]:
    out, size = [], 0
    with open(SHARED / "zh_thucnews_cnews" / "cnews.val.txt", encoding="utf-8") as f:
        for line in f:
            text = line.rstrip("\n").split("\t", 1)[1]
            out.append(text)
            size += len(text.encode())
            if size >= limit:
                break
    return out


def tokenizer_file(texts: list[str], vocab_size: int) -> str:
    from ylink_data.text.tokens.train import train_on_texts

    path = Path(tempfile.gettempdir()) / f"ylink-bench-tokenizer-{vocab_size}-{len(texts)}.json"
    if not path.exists():
        path.write_text(train_on_texts(texts, vocab_size, show_progress=False).to_str())
    return str(path)


def side_ylink(path: str, texts: list[str], out: str) -> int:
    from ylink_data.ops.tokenize import Tokenize
    from ylink_data.io.megatron.write import write_pair

    op = Tokenize(path)
    op.setup()
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    columns = [op.process(table.slice(i, BATCH_ROWS)).table.column("token_ids")
               for i in range(0, len(texts), BATCH_ROWS)]
    ids = pa.chunked_array([c for col in columns for c in col.chunks])
    entry = write_pair(LocalFileSystem(), out, "megatron/part-00000", ids, op.loaded.dtype)
    return entry["tokens"]


def side_floor(tok, texts: list[str], fast: bool = True) -> int:
    encode = tok.encode_batch_fast if fast else tok.encode_batch
    return sum(len(e.ids) + 1 for i in range(0, len(texts), BATCH_ROWS)  # + the end-of-document id
               for e in encode(texts[i:i + BATCH_ROWS]))


def side_datatrove(path: str, texts: list[str], out: str) -> None:
    from datatrove.data import Document
    from datatrove.pipeline.tokens import DocumentTokenizer

    step = DocumentTokenizer(out, tokenizer_name_or_path=path, eos_token="<|endoftext|>", batch_size=BATCH_ROWS,
                             shuffle_documents=False, save_final_metadata=False)
    step.run((Document(text=t, id=str(i)) for i, t in enumerate(texts)), rank=0, world_size=1)


def _encode_worker(path: str, texts: list[str], parallelism: str | None, start, done) -> None:
    if parallelism is None:
        os.environ.pop("TOKENIZERS_PARALLELISM", None)
    else:
        os.environ["TOKENIZERS_PARALLELISM"] = parallelism
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(path)
    tok.encode_batch_fast(texts[:8])  # load and warm before the clock
    start.wait()
    n = sum(len(e.ids) for i in range(0, len(texts), BATCH_ROWS) for e in tok.encode_batch_fast(texts[i:i + BATCH_ROWS]))
    done.put(n)


def concurrent(path: str, texts: list[str], workers: int, parallelism: str | None) -> float:
    """Tokens per wall second of `workers` processes encoding at once, per core."""
    ctx = mp.get_context("spawn")
    start, done = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=_encode_worker, args=(path, texts, parallelism, start, done)) for _ in range(workers)]
    for p in procs:
        p.start()
    start.wait()
    t0 = time.perf_counter()
    tokens = sum(done.get() for _ in procs)
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    return tokens / wall / min(workers, os.cpu_count() or 1)


def main() -> None:
    from loguru import logger  # datatrove logs a line per run

    logger.remove()
    logging.disable(logging.INFO)
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=3.0, help="MB of UTF-8 text per language")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from tokenizers import Tokenizer

    data = {"English (Reuters)": english(int(args.mb * 1e6)), "Chinese (THUCNews)": chinese(int(args.mb * 1e6))}
    path = tokenizer_file([t for texts in data.values() for t in texts], args.vocab_size)
    tok = Tokenizer.from_file(path)
    print(f"tokenizer: {args.vocab_size:,} tokens, {path}")
    for name, texts in data.items():
        mb = sum(len(t.encode()) for t in texts) / 1e6
        times: dict[str, list[float]] = {k: [] for k in ("ylink", "floor", "encode_batch", "datatrove")}
        tokens = side_floor(tok, texts)
        with tempfile.TemporaryDirectory() as tmp:  # imports, the op's tokenizer load, datatrove's: not timed
            side_ylink(path, texts[:50], tmp)
            side_datatrove(path, texts[:50], tmp + "/dt")
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                got: list[int] = []
                times["ylink"].append(timed(lambda: got.append(side_ylink(path, texts, tmp))))
                assert got[0] == tokens, (got, tokens)
                times["floor"].append(timed(lambda: side_floor(tok, texts)))
                times["encode_batch"].append(timed(lambda: side_floor(tok, texts, fast=False)))
                times["datatrove"].append(timed(lambda: side_datatrove(path, texts, tmp + "/dt")))
        rate = {k: tokens / min(v) for k, v in times.items()}
        print(f"\n{name}: {len(texts):,} documents, {mb:.2f} MB, {tokens:,} tokens (end-of-document ids included)")
        print("| side | tokens/s per core | best CPU s |\n| --- | ---: | ---: |")
        for k, label in (("ylink", "**ylink `tokenize` op + Megatron .bin/.idx**"),
                         ("floor", "`tokenizers` `encode_batch_fast` (floor)"),
                         ("encode_batch", "`tokenizers` `encode_batch` (with offsets)"),
                         ("datatrove", "datatrove `DocumentTokenizer` (.ds + index)")):
            print(f"| {label} | {rate[k]:,.0f} | {min(times[k]):.2f} |")
        print(f"ylink / floor: {rate['ylink'] / rate['floor']:.2f}   ylink / datatrove: "
              f"{rate['ylink'] / rate['datatrove']:.2f}")
    print(f"\nwall/CPU of the timed sides: max {max(WALL_OVER_CPU):.2f} (1.0 = single-threaded, nothing waiting)")

    texts = data["Chinese (THUCNews)"]
    default = max(concurrent(path, texts, args.workers, None) for _ in range(args.repeats))
    one = max(concurrent(path, texts, args.workers, "false") for _ in range(args.repeats))
    print(f"\n{args.workers} processes encoding Chinese at once on {os.cpu_count()} cores, tokens/s per core: "
          f"library default threads {default:,.0f}, one thread each (the op in a Ray task) {one:,.0f}; "
          f"ratio {one / default:.2f}")


if __name__ == "__main__":
    main()
