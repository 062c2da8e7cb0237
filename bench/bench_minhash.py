"""Benchmark: MinHash near-duplicate detection.

    .venv/bin/python bench/bench_minhash.py signatures [--repeats 5] [--docs 1000]

`signatures`: signature throughput (documents/s and MB/s of UTF-8 text per core) of
`ylink_data.dedup.signatures` against datasketch (a `MinHash.update` loop, one call per shingle;
and `MinHash.bulk`, one `update_batch` per document) and rensa (`RMinHash.update` with the
document's list of shingles; and, for reference, rensa's own batch call
`RMinHash.digest_matrix_from_token_sets`), on real documents: English 500-word documents (Project
Gutenberg books cut into consecutive 500-word pieces) and Chinese 1,500-character documents
(THUCNews articles, in file order, joined and cut into 1,500-character pieces). Every side uses
128 permutations, seed 1, and the same shingles: word 5-grams for English and character 5-grams for
Chinese (datasketch gets them UTF-8 encoded, as its default SHA-1 hash needs bytes). Our side starts
from the texts; the peers start from shingle strings, so their *from text* rate adds the time of
building those strings in plain Python (`plain_shingles`: a regex, `split` and `join`, the usual way,
and a little faster than `ylink_data.dedup.shingles`; the number of documents where both give the
same list is printed), and their *shingles given* rate leaves it out.

One process, one core: the sides take turns `--repeats` times and the median CPU time
(`time.process_time`) is taken, so other jobs on a shared machine do not count. Data come from
../shared/data (research-only corpora are read there, never copied).

The end-to-end part (signatures, LSH bands, clustering) is a separate subcommand, added later.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))
sys.path.insert(0, str(REPO))

NUM_PERM = 128
SEED = 1


# ----------------------------------------------------------------------------- real documents


def english_500_words(limit: int) -> list[str]:
    """Project Gutenberg books cut into consecutive pieces of 500 words (whitespace-separated, the
    original text kept between them); a book's short remainder is left out."""
    docs = []
    for book in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt")):
        text = book.read_text(encoding="utf-8", errors="replace")
        ends = [m.end() for m in re.finditer(r"\S+", text)]
        starts = [m.start() for m in re.finditer(r"\S+", text)]
        for i in range(0, len(starts) - 499, 500):
            docs.append(text[starts[i]:ends[i + 499]])
    return spread(docs, limit)


def chinese_1500_chars(limit: int) -> list[str]:
    """THUCNews articles (validation split, 1,000 articles in 10 categories), in file order, joined
    with a newline and cut into consecutive 1,500-character pieces."""
    lines = (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    text = "\n".join(line.split("\t", 1)[1] for line in lines if "\t" in line)
    docs = [text[i:i + 1500] for i in range(0, len(text) - 1499, 1500)]
    return spread(docs, limit)


def spread(docs: list[str], limit: int) -> list[str]:
    """At most `limit` documents taken evenly across the list (every book or category represented)."""
    if limit <= 0 or len(docs) <= limit:
        return docs
    step = len(docs) / limit
    return [docs[int(i * step)] for i in range(limit)]


# ----------------------------------------------------------------------------- sides


def ours(texts: list[str], lang: str, batch: int) -> Callable[[], object]:
    from ylink_data.dedup import signatures

    return lambda: [signatures(texts[i:i + batch], lang, num_perm=NUM_PERM, seed=SEED)
                    for i in range(0, len(texts), batch)]


NON_WORD = re.compile(r"[\W_]+")


def plain_shingles(text: str, unit: str, n: int = 5) -> list[str]:
    """Shingles the way a plain Python pipeline builds them (lowercase, non-word characters to
    spaces, words or characters in n-grams); the same definition as `ylink_data.dedup.shingles`
    except for rare characters (marks, which `\\w` does not count as word characters; underscores)."""
    norm = NON_WORD.sub(" ", text.lower()).strip()
    if unit == "word":
        words = norm.split()
        if 0 < len(words) < n:
            return [" ".join(words)]
        return [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    chars = norm.replace(" ", "")
    if 0 < len(chars) < n:
        return [chars]
    return [chars[i:i + n] for i in range(len(chars) - n + 1)]


def build_shingles(texts: list[str], lang: str) -> list[list[str]]:
    unit = "char" if lang in ("zh", "ja") else "word"
    return [plain_shingles(t, unit) for t in texts]


def datasketch_update_loop(encoded: list[list[bytes]]) -> list:
    from datasketch import MinHash

    out = []
    for doc in encoded:
        m = MinHash(num_perm=NUM_PERM, seed=SEED)
        for s in doc:
            m.update(s)
        out.append(m.hashvalues)
    return out


def datasketch_bulk(encoded: list[list[bytes]]) -> list:
    from datasketch import MinHash

    return [m.hashvalues for m in MinHash.bulk(encoded, num_perm=NUM_PERM, seed=SEED)]


def rensa_update(shingle_lists: list[list[str]]) -> list:
    from rensa import RMinHash

    out = []
    for doc in shingle_lists:
        m = RMinHash(NUM_PERM, SEED)
        m.update(doc)
        out.append(m.digest())
    return out


def rensa_matrix(shingle_lists: list[list[str]]) -> object:
    from rensa import RMinHash

    return RMinHash.digest_matrix_from_token_sets(shingle_lists, NUM_PERM, SEED)


def timed(fn: Callable[[], object]) -> float:
    """CPU seconds of this process (see bench_langid.py); wall / CPU is recorded as a check."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    WALL_OVER_CPU.append(wall / cpu if cpu else 1.0)
    return cpu


WALL_OVER_CPU: list[float] = []


def check_same_shingles(texts: list[str], lang: str, shingle_lists: list[list[str]]) -> int:
    """Ours must equal datasketch's MinHash fed the same shingles with our shingle hash, or the
    comparison would be of different things; returns how many documents the plain shingler cuts
    exactly as `ylink_data.dedup.shingles` does."""
    import numpy as np
    from datasketch import MinHash

    from ylink_data.dedup import hash32, shingles, signatures

    sig = signatures(texts[:50], lang, num_perm=NUM_PERM, seed=SEED)
    for row, text in zip(sig, texts[:50]):
        m = MinHash(num_perm=NUM_PERM, seed=SEED, hashfunc=hash32)
        m.update_batch(shingles(text, lang))
        assert np.array_equal(m.hashvalues, row), "signatures differ from datasketch's"
    return sum(shingles(t, lang) == plain for t, plain in zip(texts, shingle_lists))


def bench_signatures(repeats: int, limit: int, batch: int) -> None:
    corpora = {"English, Gutenberg 500-word documents": ("en", english_500_words(limit)),
               "Chinese, THUCNews 1,500-character documents": ("zh", chinese_1500_chars(limit))}
    print(f"num_perm={NUM_PERM}, seed={SEED}, our batch={batch} documents; {repeats} interleaved repeats, "
          "median CPU time; one process, one core\n")
    print("| documents | side | docs/s per core | MB/s per core | ours / side |")
    print("| --- | --- | ---: | ---: | ---: |")
    for label, (lang, texts) in corpora.items():
        shingle_lists = build_shingles(texts, lang)
        encoded = [[s.encode("utf-8") for s in doc] for doc in shingle_lists]
        same = check_same_shingles(texts, lang, shingle_lists)
        mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        n_sh = sum(map(len, shingle_lists)) / len(texts)
        sides: dict[str, Callable[[], object]] = {
            "ours": ours(texts, lang, batch),
            "plain shingles": lambda: build_shingles(texts, lang),
            "datasketch update": lambda: datasketch_update_loop(encoded),
            "datasketch bulk": lambda: datasketch_bulk(encoded),
            "rensa RMinHash": lambda: rensa_update(shingle_lists),
            "rensa matrix": lambda: rensa_matrix(shingle_lists),
        }
        times: dict[str, list[float]] = {name: [] for name in sides}
        ours(texts[:batch], lang, batch)()                 # tables and caches built before timing
        for _ in range(repeats):
            for name, fn in sides.items():
                times[name].append(timed(fn))
        med = {name: statistics.median(ts) for name, ts in times.items()}
        head = (f"{label}: {len(texts):,} docs, {mb * 1000 / len(texts):.2f} KB avg, "
                f"{n_sh:,.0f} shingles avg (plain shingles = ours in {same:,})")
        rows = [("**ylink `signatures`** (from text)", med["ours"]),
                ("plain Python shingling alone (the peers' input)", med["plain shingles"])]
        for name, desc in [("datasketch update", "datasketch `MinHash.update` loop, one call per shingle"),
                           ("datasketch bulk", "datasketch `MinHash.bulk` (`update_batch` per document)"),
                           ("rensa RMinHash", "rensa `RMinHash.update(shingles)` per document"),
                           ("rensa matrix", "rensa `RMinHash.digest_matrix_from_token_sets`, one call")]:
            rows.append((f"{desc}, from text (+ plain shingling)", med[name] + med["plain shingles"]))
            rows.append((f"{desc}, shingles given", med[name]))
        for i, (desc, seconds) in enumerate(rows):
            rate = len(texts) / seconds
            ratio = seconds / med["ours"]
            print(f"| {head if i == 0 else ''} | {desc} | {rate:,.0f} | {mb / seconds:.2f} | "
                  f"{'' if i < 2 else f'{ratio:.1f}x'} |")
    print(f"\nwall / CPU time per timing: median {statistics.median(WALL_OVER_CPU):.2f}, "
          f"max {max(WALL_OVER_CPU):.2f} (above 1: the core was shared)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    sig = sub.add_parser("signatures", help="signature throughput vs datasketch and rensa")
    sig.add_argument("--repeats", type=int, default=5)
    sig.add_argument("--docs", type=int, default=1000, help="documents per language (0: all)")
    sig.add_argument("--batch", type=int, default=1024, help="documents per `signatures` call")
    args = ap.parse_args()
    from importlib.metadata import version

    import numpy as np

    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}, datasketch {version('datasketch')}, rensa {version('rensa')}, {dt.date.today()}\n")
    if args.part == "signatures":
        bench_signatures(args.repeats, args.docs, args.batch)


if __name__ == "__main__":
    main()
