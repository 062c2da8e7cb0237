"""The Self-Instruct pool check at 50k instructions: ours (text/transform/rouge.py RougePool) against the
reference loop of Self-Instruct's `bootstrap_instructions.py` (`rouge_scorer.RougeScorer(["rougeL"])`
scoring each candidate against every pool instruction through `multiprocessing.Pool(...).map`, here
a pool of 1 process), on the same candidates and pool.

Pool: real English instructions and instruction-length text: the 175 Self-Instruct seeds, the 1,319
GSM8K test questions, and sentences of 6-60 words from Reuters-21578 articles up to 50,000.
Candidates: 200 near-duplicates of pool items (one word replaced) and 200 sentences of later
Reuters articles not in the pool. Each side decides "max ROUGE-L F > 0.7" for every candidate
(the candidates are not added, so both see the same pool); the decisions must agree. The reference
is timed on the first `--ref` candidates of each kind and extrapolated per candidate (it takes
seconds per candidate). Wall time (the reference's work runs in its child process).

    PYTHONPATH=. python bench/bench_rouge_pool.py [--pool 50000] [--ref 5]
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import time
from functools import partial
from multiprocessing import Pool
from pathlib import Path

from rouge_score import rouge_scorer

from ylink_data.text.transform.rouge import RougePool

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
if not DATA.exists():
    DATA = Path("/work/shared/data")
_SENT = re.compile(r"(?<=[.!?])\s+")


def texts(pool_size: int) -> tuple[list[str], list[str]]:
    seeds = [json.loads(x)["instruction"] for x in
             (DATA / "instruction_seeds/self_instruct/seed_tasks.jsonl").read_text().splitlines()]
    gsm = [json.loads(x)["question"] for x in (DATA / "benchmarks/gsm8k/test.jsonl").read_text().splitlines()]
    sentences, seen = [], set()
    with gzip.open(DATA / "en_reuters21578_nltk/reuters21578_apte.jsonl.gz", "rt") as f:
        for line in f:
            for s in _SENT.split(" ".join(json.loads(line)["text"].split())):
                if 6 <= len(s.split()) <= 60 and s not in seen:
                    seen.add(s)
                    sentences.append(s)
    pool = (seeds + gsm + sentences)[:pool_size]
    rng = random.Random(0)
    near = []
    for s in rng.sample(pool, 200):
        words = s.split()
        words[rng.randrange(len(words))] = "meanwhile"
        near.append(" ".join(words))
    unseen = sentences[len(pool) - len(seeds) - len(gsm):][:200]
    return pool, near + unseen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", type=int, default=50_000)
    ap.add_argument("--ref", type=int, default=5, help="reference candidates timed of each kind")
    args = ap.parse_args()
    pool_texts, candidates = texts(args.pool)
    t = time.perf_counter()
    pool = RougePool()
    for s in pool_texts:
        pool.add(s)
    build = time.perf_counter() - t
    t = time.perf_counter()
    ours = [pool.nearest(c, above=0.7)[0] > 0.7 for c in candidates]
    decide = time.perf_counter() - t
    t = time.perf_counter()
    exact = [pool.nearest(c)[0] for c in candidates]
    exact_s = time.perf_counter() - t
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    sample = candidates[:args.ref] + candidates[200:200 + args.ref]
    t = time.perf_counter()
    ref_max = []
    with Pool(1) as p:
        for c in sample:
            scores = p.map(partial(scorer.score, c), pool_texts)
            ref_max.append(max(s["rougeL"].fmeasure for s in scores))
    ref = (time.perf_counter() - t) / len(sample)
    picked = [exact[i] for i in list(range(args.ref)) + list(range(200, 200 + args.ref))]
    assert picked == ref_max, "exact maxima differ from rouge_score's"
    assert [m > 0.7 for m in ref_max] == [ours[i] for i in list(range(args.ref)) + list(range(200, 200 + args.ref))]
    n = len(candidates)
    print(f"pool {len(pool_texts)} instructions, {n} candidates ({sum(ours)} rejected as > 0.7)")
    print(f"ours: index build {build:.2f} s; decision {decide / n * 1e3:.2f} ms/candidate; "
          f"exact max {exact_s / n * 1e3:.2f} ms/candidate")
    print(f"reference (rouge_score, Pool(1)): {ref * 1e3:.0f} ms/candidate, measured on {len(sample)} candidates")
    print(f"speed-up: decision {ref / (decide / n):.0f}x, exact max {ref / (exact_s / n):.0f}x "
          f"(index build amortised: {build / n * 1e3:.2f} ms/candidate over these {n})")


if __name__ == "__main__":
    main()
