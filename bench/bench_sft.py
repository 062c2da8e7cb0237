"""sft_tokenize against its floor on the bundled chat sample (samples/chat, real Self-Instruct turns).

Sides, single-threaded (RAYON_NUM_THREADS=1), interleaved `--repeats` times, median CPU seconds:
- floor: the ChatML rendering done once per conversation in plain Python, then `encode_batch_fast`
  (ids only): what any SFT tokenizer must at least do;
- `sft_tokenize.process` on the same rows: JSON parsing, checks, the Jinja2 rendering of the whole
  conversation and of its prefixes (for the mask), `encode_batch` with offsets, the mask, Arrow columns.

    RAYON_NUM_THREADS=1 python bench/bench_sft.py [--copies 20] [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402
from benchtools import WALL_OVER_CPU, timed  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from ylink_data.io.readers.jsonl import record_from_mapping  # noqa: E402
from ylink_data.ops.sft import SftTokenize  # noqa: E402
from ylink_data.text.tokens.chat import to_messages  # noqa: E402

CHAT = REPO / "samples" / "chat"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = [json.loads(line) for name in ("alpaca", "messages", "sharegpt")
            for line in (CHAT / f"{name}.jsonl").read_text().splitlines()] * args.copies
    texts = [record_from_mapping(dict(r), 0, None, None, chat=True).text for r in rows]
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    tok = Tokenizer.from_file(str(CHAT / "tokenizer.json"))
    op = SftTokenize(tokenizer=str(CHAT / "tokenizer.json"))
    op.setup()

    def floor():
        rendered = ["".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in to_messages(json.loads(t)))
                    for t in texts]
        return tok.encode_batch_fast(rendered, add_special_tokens=False)

    result = op.process(table)
    tokens = sum(result.table["num_tokens"].to_pylist())
    sides = {"floor": [], "sft_tokenize": []}
    for _ in range(args.repeats):
        sides["floor"].append(timed(floor))
        sides["sft_tokenize"].append(timed(lambda: op.process(table)))
    print(f"{len(texts)} conversations, {tokens} tokens; wall/CPU max {max(WALL_OVER_CPU):.2f}")
    for name, seconds in sides.items():
        median = statistics.median(seconds)
        print(f"{name:14s} {tokens / median / 1e3:8.1f} k tokens/s per core  {len(texts) / median:8.0f} conv/s  "
              f"median {median:.3f} s")
    print(f"ratio sft_tokenize / floor: {statistics.median(sides['floor']) / statistics.median(sides['sft_tokenize']):.2f}")


if __name__ == "__main__":
    main()
