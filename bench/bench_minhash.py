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

`e2e`: the `minhash_dedup` op end to end (`ylink_data.run`, Ray with 2 CPUs) on 100k, 300k and 1M
synthetic ~1 KB documents built from real sentences, with injected near-duplicates whose exact
Jaccard is known: wall and CPU time, peak memory of the whole process tree, precision and recall;
and datatrove's four-stage MinHash pipeline on the same input, side by side. Corpora are built once
into bench/_data/minhash_e2e/ (1M: 1.2 GB JSONL + 0.7 GB Parquet, about 2 minutes), runs go to
bench/_data/minhash_e2e/runs/ (results.json, each run's log and output). See the "end to end" section below.

    .venv/bin/python bench/bench_minhash.py e2e [--sizes 100000,300000,1000000] [--datatrove-sizes 100000]
        [--bands 16 --rows 8] [--verify] [--profile]
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
from benchtools import WALL_OVER_CPU, timed  # bench/ is on sys.path when a script runs

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


# ============================================================================= end to end (e2e)
#
# Corpus. Real sentences (Reuters-21578 and Project Gutenberg for English, THUCNews for Chinese),
# split at sentence ends, whitespace collapsed, deduplicated (English 6-80 words, Chinese 10-200
# characters). A *base* document is a run of sentences drawn at random from the whole pool of its
# language until it reaches about 1 KB of UTF-8 (80% English, 20% Chinese), so two base documents
# share a 5-shingle only where they happen to draw the same sentence (the background rate is
# measured, not assumed). 10% of base documents get 1-3 edited copies each: `k` word (English) or
# character (Chinese) edits, k = rate x length with rate uniform in [0.5%, 2.5%], each edit a
# deletion, an insertion (a word or character from a random pool sentence), a replacement or a swap
# of neighbours. The exact Jaccard of every copy with its original is recorded (shingle sets of
# `ylink_data.dedup.minhash.shingles`, as the op cuts them). Everything is shuffled, written as
# JSONL files of 10,000 documents ({"id", "url", "text"}; no `lang`, so the op picks shingles by
# script, as on a crawl without langid) and the same as Parquet (what both sides read), with the
# ground truth next to them (truth.npz: family, original, exact Jaccard, Chinese or not, and the
# exact Jaccard of ~13,600 random pairs of different families: the background).
#
# Scoring. A dropped document is a true positive when it belongs to an injected family of which
# another member is kept. Recall is per injected pair (copy, original): found unless both are kept,
# for pairs at exact Jaccard >= 0.8 and for all. False positives are checked by exact Jaccard with
# their cluster's kept document (`cluster_columns`), and up to --brute-force-max documents against
# every kept document.
#
# Runs. Each side runs in a child process; a thread of the parent samples every 0.5 s the memory of
# the child and all its descendants (the embedded Ray's GCS, raylet and workers, datatrove's pool):
# VmRSS summed (shared pages, e.g. Ray's object store, count in every process that maps them), PSS
# summed (shared pages split between their processes: the machine's real use), and the largest
# single RSS. Read from /proc (Linux), since psutil is not a dependency.

E2E_DIR = REPO / "bench" / "_data" / "minhash_e2e"
E2E_OUT = E2E_DIR / "runs"
DOCS_PER_FILE = 10_000
DOC_BYTES = 1000
ZH_SHARE = 0.2
FAMILY_SHARE = 0.1
EDIT_RATE = (0.005, 0.025)


def sentence_pools() -> tuple[list[str], list[str]]:
    import gzip
    import json

    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    texts += [p.read_text(encoding="utf-8", errors="replace")
              for p in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt"))]
    en = set()
    for text in texts:
        for s in re.split(r"(?<=[.!?])\s+", text):
            s = " ".join(s.split())
            if 6 <= len(s.split()) <= 80:
                en.add(s)
    zh = set()
    for line in (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            for s in re.split(r"(?<=[。！？])", line.split("\t", 1)[1]):
                s = s.strip()
                if 10 <= len(s) <= 200:
                    zh.add(s)
    return sorted(en), sorted(zh)


def _base_docs(pool: list[str], n: int, rng, sep: str) -> list[str]:
    import numpy as np

    nbytes = np.array([len(s.encode("utf-8")) + len(sep) for s in pool])
    per = int(DOC_BYTES / nbytes.mean() * 3) + 4
    out = []
    for _ in range(n):
        idx = rng.integers(0, len(pool), per)
        cut = int(np.searchsorted(np.cumsum(nbytes[idx]), DOC_BYTES)) + 1
        out.append(sep.join(pool[i] for i in idx[:cut]))
    return out


def _edit(text: str, zh: bool, rng, pool: list[str]) -> str:
    parts = list(text) if zh else text.split(" ")
    k = max(1, round(rng.uniform(*EDIT_RATE) * len(parts)))
    for _ in range(k):
        op = rng.integers(4)
        i = int(rng.integers(len(parts)))
        donor = pool[int(rng.integers(len(pool)))]
        donor = list(donor) if zh else donor.split(" ")
        new = donor[int(rng.integers(len(donor)))]
        if op == 0 and len(parts) > 10:
            del parts[i]
        elif op == 1:
            parts.insert(i, new)
        elif op == 2:
            parts[i] = new
        elif i + 1 < len(parts):
            parts[i], parts[i + 1] = parts[i + 1], parts[i]
    return ("" if zh else " ").join(parts)


def to_parquet(folder: Path) -> None:
    """The JSONL files as Parquet (zstd, row groups of 2,000): what both sides read. (datatrove's
    JsonlReader needs orjson, which is not installed here.)"""
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    for path in sorted(folder.glob("part-*.jsonl")):
        target = path.with_suffix(".parquet")
        if not target.exists():
            table = pj.read_json(path)
            pq.write_table(table, str(target) + ".tmp", compression="zstd", row_group_size=2000)
            os.replace(str(target) + ".tmp", target)


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def shingle_set(text: str, zh: bool) -> set:
    from ylink_data.dedup.minhash import shingles

    return set(shingles(text, "zh" if zh else None))


def build_corpus(n: int, seed: int = 5) -> Path:
    """`n` documents (about: bases plus copies) in E2E_DIR/n{n}; reused when already there."""
    import json

    import numpy as np

    folder = E2E_DIR / f"n{n}"
    if (folder / "truth.npz").exists():
        to_parquet(folder)
        return folder
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    en_pool, zh_pool = sentence_pools()
    n_base = round(n / (1 + FAMILY_SHARE * 2))
    n_zh = round(n_base * ZH_SHARE)
    base = _base_docs(en_pool, n_base - n_zh, rng, " ") + _base_docs(zh_pool, n_zh, rng, "")
    base_zh = np.r_[np.zeros(n_base - n_zh, bool), np.ones(n_zh, bool)]
    fam_of = rng.choice(n_base, round(n_base * FAMILY_SHARE), replace=False)
    copies = rng.integers(1, 4, fam_of.size)
    texts, zh, family, original, jac = list(base), list(base_zh), [-1] * n_base, [-1] * n_base, [np.nan] * n_base
    for f, (b, c) in enumerate(zip(fam_of, copies)):
        family[b] = f
        orig_set = shingle_set(base[b], base_zh[b])
        for _ in range(c):
            copy = _edit(base[b], base_zh[b], rng, zh_pool if base_zh[b] else en_pool)
            texts.append(copy)
            zh.append(base_zh[b])
            family.append(f)
            original.append(int(b))
            jac.append(jaccard(orig_set, shingle_set(copy, base_zh[b])))
    total = len(texts)
    order = rng.permutation(total)            # position p holds generated document order[p]
    where = np.empty(total, np.int64)
    where[order] = np.arange(total)
    original = np.array(original)
    truth = dict(family=np.array(family, np.int64)[order], zh=np.array(zh)[order],
                 jaccard=np.array(jac, np.float64)[order],
                 original=np.where(original[order] >= 0, where[np.maximum(original[order], 0)], -1))
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(0, total, DOCS_PER_FILE):
        with open(folder / f"part-{k // DOCS_PER_FILE:05d}.jsonl", "w", encoding="utf-8") as f:
            for p in range(k, min(k + DOCS_PER_FILE, total)):
                f.write(json.dumps({"id": f"d{p}", "url": f"https://bench.invalid/d{p}", "text": texts[order[p]]},
                                   ensure_ascii=False) + "\n")
    # Background: exact Jaccard of random pairs of different families (same language).
    rp = rng.integers(0, total, (20_000, 2))
    fam = truth["family"]
    rp = rp[(rp[:, 0] != rp[:, 1]) & (truth["zh"][rp[:, 0]] == truth["zh"][rp[:, 1]])
            & ((fam[rp[:, 0]] < 0) | (fam[rp[:, 0]] != fam[rp[:, 1]]))]
    bg = np.array([jaccard(shingle_set(texts[order[a]], truth["zh"][a]), shingle_set(texts[order[b]], truth["zh"][b]))
                   for a, b in rp])
    np.savez(folder / "truth.npz", background=bg, **truth)
    mb = sum((folder / f).stat().st_size for f in os.listdir(folder) if f.endswith(".jsonl")) / 1e6
    to_parquet(folder)
    print(f"corpus n{n}: {total:,} docs ({n_base:,} bases, {int(copies.sum()):,} copies in {fam_of.size:,} families), "
          f"{mb:,.0f} MB JSONL, built in {time.perf_counter() - t0:.0f}s", flush=True)
    return folder


# ----------------------------------------------------------------------------- memory sampling


def _proc_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _mem_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in kB; (0, 0) when it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


class TreeMemory:
    """Samples a process tree every `interval` s in a thread: peaks of summed RSS, summed PSS and of
    the largest single process (GB), the most processes seen at once, and the CPU seconds of the
    tree (each process's last sample: a process that exits loses at most `interval` of its CPU)."""

    def __init__(self, root: int, interval: float = 0.5):
        import threading

        self.root, self.interval = root, interval
        self.rss = self.pss = self.single = 0.0
        self.procs = 0
        self.single_name = ""
        self.cpu: dict[int, float] = {}
        self.load = os.getloadavg()[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            pids = _proc_tree(self.root)
            mems = [(_mem_kb(p), p) for p in pids]
            for p in pids[1:] if len(pids) > 1 else pids:
                self.cpu[p] = max(self.cpu.get(p, 0.0), _cpu_s(p))
            self.cpu[self.root] = max(self.cpu.get(self.root, 0.0), _cpu_s(self.root))
            self.rss = max(self.rss, sum(m[0][0] for m in mems) / 2**20)
            self.pss = max(self.pss, sum(m[0][1] for m in mems) / 2**20)
            self.procs = max(self.procs, len(pids))
            (rss, _), pid = max(mems)
            if rss / 2**20 > self.single:
                self.single = rss / 2**20
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        self.single_name = f.read().replace(b"\0", b" ").decode(errors="replace")[:60]
                except OSError:
                    pass
            self._stop.wait(self.interval)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {"rss_sum_gb": self.rss, "pss_sum_gb": self.pss, "rss_max_proc_gb": self.single,
                "max_proc": self.single_name, "procs": self.procs, "cpu_s": sum(self.cpu.values()),
                "load_before": self.load, "load_after": os.getloadavg()[0]}


# ----------------------------------------------------------------------------- the two sides (child processes)


def child_ours(folder: Path, out: Path, threshold: float, bands: int, rows: int, rows_per_partition: int,
               store_mb: int, verify: bool = False) -> dict:
    import ylink_data
    from ylink_data.config import RayConfig
    from ylink_data.pipeline.ray_env import ensure_ray

    ray_cfg = {"num_cpus": 2, "object_store_memory": store_mb * 2**20}
    t0 = time.perf_counter()
    ensure_ray(RayConfig(**ray_cfg))
    ray_start = time.perf_counter() - t0
    files = sorted(str(p) for p in folder.glob("part-*.parquet"))
    t0 = time.perf_counter()
    path, stats = ylink_data.run(
        # split_bytes below one file's size (6.5 MB): a task per file, as datatrove gets (by default
        # files are packed into 256 MB tasks, and 100k documents would be a single task on one core).
        {"name": "minhash-e2e", "input": {"paths": files, "format": "parquet", "split_bytes": 8_000_000},
         "output": {"path": str(out), "keep_rejected": True},
         "stages": [{"minhash_dedup": {"threshold": threshold, "bands": bands, "rows": rows, "verify": verify,
                                       "cluster_columns": True,
                                       "rows_per_partition": rows_per_partition}}],
         "ray": ray_cfg}, fresh=True, progress=False)
    return {"wall": time.perf_counter() - t0, "ray_start": ray_start, "tasks": len(files), "out": str(path)}


def child_datatrove(folder: Path, out: Path, bands: int, rows: int) -> dict:
    import logging
    import types

    # datatrove.pipeline.dedup's __init__ imports its exact-substring steps, which need `tokenizers`
    # (not installed here, and not used by MinHash): stand in an empty module for them.
    stub = types.ModuleType("datatrove.pipeline.dedup.exact_substrings")
    stub.ESDatasetToSequence = stub.ESMergeSequences = stub.ESRangeRemover = None
    sys.modules.setdefault(stub.__name__, stub)
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                                  MinhashDedupFilter, MinhashDedupSignature)
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.typeshelper import Languages

    logging.getLogger().setLevel(logging.WARNING)
    # As datatrove's examples/minhash_deduplication.py, with our bands x rows (its example: 14 x 8,
    # i.e. a threshold near 0.72), without TokensCounter (it downloads a tokenizer), and with SHA-1 shingle
    # hashes: its default, xxhash, is not installed here. Pools fork, so the stub below reaches the workers.
    config = MinhashConfig(hash_config=HashConfig(precision=64, hash_fc="sha1"), num_buckets=bands,
                           hashes_per_bucket=rows)
    files = len(list(folder.glob("part-*.parquet")))
    reader = ParquetReader(str(folder), glob_pattern="part-*.parquet")
    logs = str(out / "logs")
    stages = {
        "signatures": LocalPipelineExecutor(
            pipeline=[reader, MinhashDedupSignature(output_folder=str(out / "signatures"), config=config,
                                                    language=Languages.english)],
            tasks=files, workers=2, logging_dir=f"{logs}/signatures", start_method="fork"),
        "buckets": LocalPipelineExecutor(
            pipeline=[MinhashDedupBuckets(input_folder=str(out / "signatures"), output_folder=str(out / "buckets"),
                                          config=config)],
            tasks=config.num_buckets, workers=2, logging_dir=f"{logs}/buckets", start_method="fork"),
        "cluster": LocalPipelineExecutor(
            pipeline=[MinhashDedupCluster(input_folder=str(out / "buckets"), output_folder=str(out / "remove_ids"),
                                          config=config)],
            tasks=1, logging_dir=f"{logs}/clusters"),
        "filter": LocalPipelineExecutor(
            pipeline=[reader, MinhashDedupFilter(input_folder=str(out / "remove_ids"),
                                                 exclusion_writer=ParquetWriter(str(out / "removed"))),
                      ParquetWriter(output_folder=str(out / "deduplicated"))],
            tasks=files, workers=2, logging_dir=f"{logs}/filter", start_method="fork"),
    }
    times = {}
    t0 = time.perf_counter()
    for name, executor in stages.items():
        t = time.perf_counter()
        executor.run()
        times[name] = time.perf_counter() - t
    return {"wall": time.perf_counter() - t0, "steps": times, "tasks": files}


def e2e_child(args) -> None:
    import json

    folder, out = Path(args.input), Path(args.out)
    if args.side == "ours":
        result = child_ours(folder, out, args.threshold, args.bands, args.rows, args.rows_per_partition,
                            args.object_store_mb, args.verify)
    else:
        result = child_datatrove(folder, out, args.bands, args.rows)
    Path(args.result).write_text(json.dumps(result))


def run_child(side: str, folder: Path, out: Path, args, bands: int, rows: int) -> dict:
    """Runs one side in a child process under the memory sampler; its log (the op's per-step lines)
    goes to out.log."""
    import json
    import resource
    import shutil
    import subprocess

    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result_path = out.parent / f"{out.name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "e2e-child", "--side", side, "--input", str(folder),
           "--out", str(out), "--result", str(result_path), "--threshold", str(args.threshold),
           "--rows-per-partition", str(args.rows_per_partition), "--object-store-mb", str(args.object_store_mb),
           "--bands", str(bands), "--rows", str(rows)] + (["--verify"] if args.verify and side == "ours" else [])
    log_path = out.parent / f"{out.name}.log"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TERM": "dumb"})
        mem = TreeMemory(proc.pid)
        rc = proc.wait()
        memory = mem.stop()
    # CPU of the child and every descendant reaped down the chain (Ray's workers by the raylet, the
    # raylet by the driver...): exact where the sampled figure misses processes that exited.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    memory["cpu_rusage_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if rc:
        raise RuntimeError(f"{side} on {folder.name} failed ({rc}); see {log_path}")
    result = json.loads(result_path.read_text())
    result.update(memory, process_wall=time.perf_counter() - t0, log=log_path.read_text())
    return result


# ----------------------------------------------------------------------------- scoring


def dropped_ours(out: str) -> tuple:
    import glob

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rejected = pa.concat_tables([pq.read_table(p, columns=["url", "id", "dup_cluster_id"])
                                 for p in sorted(glob.glob(f"{out}/rejected/*.parquet"))])
    kept = pa.concat_tables([pq.read_table(p, columns=["url", "id"]) for p in sorted(glob.glob(f"{out}/*.parquet"))
                             + sorted(glob.glob(f"{out}/data/*.parquet"))])
    pos = {i: int(u.rsplit("/d", 1)[1]) for i, u in zip(kept.column("id").to_pylist(), kept.column("url").to_pylist())}
    dropped = np.array([int(u.rsplit("/d", 1)[1]) for u in rejected.column("url").to_pylist()], np.int64)
    cluster_of = {int(u.rsplit("/d", 1)[1]): pos.get(c, -1)
                  for u, c in zip(rejected.column("url").to_pylist(), rejected.column("dup_cluster_id").to_pylist())}
    return dropped, cluster_of


def dropped_datatrove(out: Path):
    import numpy as np
    import pyarrow.parquet as pq

    ids = []
    for p in sorted((out / "removed").rglob("*.parquet")):
        ids += [int(i[1:]) for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()]
    return np.array(ids, np.int64)


def _texts(folder: Path, positions: set[int]) -> dict[int, str]:
    import json

    out = {}
    for k in sorted({p // DOCS_PER_FILE for p in positions}):
        with open(folder / f"part-{k:05d}.jsonl", encoding="utf-8") as f:
            for p, line in enumerate(f, start=k * DOCS_PER_FILE):
                if p in positions:
                    out[p] = json.loads(line)["text"]
    return out


def score(folder: Path, dropped, cluster_of: dict | None, sample: int = 200) -> dict:
    """Precision and recall of a set of dropped documents against the injected families."""
    import numpy as np

    truth = np.load(folder / "truth.npz")
    family, jac, original = truth["family"], truth["jaccard"], truth["original"]
    n = family.size
    is_dropped = np.zeros(n, bool)
    is_dropped[dropped] = True
    # Families: a dropped member is a true positive when another member of its family is kept.
    fam_ids = family[family >= 0]
    fam_size = np.bincount(fam_ids)
    fam_kept = np.bincount(fam_ids, weights=~is_dropped[family >= 0])
    in_family = family >= 0
    fam_of = np.maximum(family, 0)
    tp = is_dropped & in_family & (fam_kept[fam_of] >= 1)
    fp_idx = np.flatnonzero(is_dropped & ~tp)
    # Pairs (copy, original): found when the two are not both kept.
    copies = np.flatnonzero(original >= 0)
    found = is_dropped[copies] | is_dropped[original[copies]]
    high = jac[copies] >= 0.8
    # Documents: an ideal dedup drops size - 1 members of each family.
    ideal = int((fam_size - 1).sum())
    dropped_members = np.minimum(np.bincount(fam_ids, weights=is_dropped[family >= 0]), fam_size - 1).sum()
    res = {"docs": int(n), "dropped": int(is_dropped.sum()), "tp": int(tp.sum()), "fp": int(fp_idx.size),
           "precision": float(tp.sum() / max(1, is_dropped.sum())),
           "recall_j08": float(found[high].mean()), "pairs_j08": int(high.sum()),
           "recall_all": float(found.mean()), "pairs_all": int(copies.size),
           "recall_docs": float(dropped_members / ideal),
           "families_all_dropped": int(((fam_kept == 0) & (fam_size > 0)).sum()),
           "missed_j_hist": np.histogram(jac[copies][~found], bins=[0, .5, .6, .7, .75, .8, .85, .9, .95, 1.01])[0]
           .tolist(),
           "pairs_j_hist": np.histogram(jac[copies], bins=[0, .5, .6, .7, .75, .8, .85, .9, .95, 1.01])[0].tolist()}
    # False positives, checked by exact Jaccard with the kept document of their cluster (ours) and,
    # for a sample, by brute force against every kept document of the same language (at 100k only).
    copy_zh = truth["zh"][copies]
    for lang, m in (("en", ~copy_zh), ("zh", copy_zh)):
        res[f"recall_j08_{lang}"] = float(found[m & high].mean())
    res["fp_sample"] = []
    if fp_idx.size:
        rng = np.random.default_rng(0)
        pick = rng.choice(fp_idx, min(sample, fp_idx.size), replace=False)
        res["fp_sample"] = sorted(pick.tolist())
        need = set(pick.tolist())
        if cluster_of is not None:
            need |= {cluster_of.get(int(p), -1) for p in pick} - {-1}
        texts = _texts(folder, need)
        zh = truth["zh"]
        verified = []
        for p in pick:
            c = cluster_of.get(int(p), -1) if cluster_of else -1
            if c >= 0:
                verified.append(jaccard(shingle_set(texts[p], zh[p]), shingle_set(texts[c], zh[c])))
        if verified:
            v = np.array(verified)
            res["fp_checked"] = int(v.size)
            res["fp_jaccard_with_kept_ge_08"] = int((v >= 0.8).sum())
            res["fp_jaccard_quantiles"] = np.quantile(v, [0, 0.5, 1]).round(3).tolist()
            res["precision_verified"] = float((tp.sum() + fp_idx.size * (v >= 0.8).mean()) / max(1, is_dropped.sum()))
    return res


def brute_force_fp(folder: Path, fp: list[int], kept_mask) -> list[float]:
    """Best exact Jaccard of each false positive with any kept document of its language, by brute
    force: every kept document's shingles are counted against an index of the false positives'
    shingles, and the exact Jaccard is taken wherever one is shared."""
    import json
    from collections import Counter

    import numpy as np

    zh = np.load(folder / "truth.npz")["zh"]
    fp_sets = {}
    for q, text in _texts(folder, set(fp)).items():
        fp_sets[q] = shingle_set(text, zh[q])
    index: dict[str, list[int]] = {}
    for q, sh in fp_sets.items():
        for x in sh:
            index.setdefault(x, []).append(q)
    best = dict.fromkeys(fp_sets, 0.0)
    for path in sorted(folder.glob("part-*.jsonl")):
        k = int(path.stem.split("-")[1]) * DOCS_PER_FILE
        with open(path, encoding="utf-8") as f:
            for j, line in enumerate(f, start=k):
                if not kept_mask[j]:
                    continue
                sh = shingle_set(json.loads(line)["text"], zh[j])
                hits = Counter(q for x in sh for q in index.get(x, ()))
                for q in hits:
                    if q != j and zh[q] == zh[j]:
                        best[q] = max(best[q], jaccard(fp_sets[q], sh))
    return [best[q] for q in fp]


# ----------------------------------------------------------------------------- the op's keys, profiled in process


def profile_keys(folder: Path, docs: int = 20_000) -> dict:
    """Time of each part of `MinHashDedup.keys` on `docs` documents as one Arrow table, one core."""
    import json

    import pyarrow as pa

    from ylink_data.dedup.minhash import is_empty, signatures
    from ylink_data.dedup.lsh import band_keys
    from ylink_data.stages.minhash_dedup import MinHashDedup

    rows = []
    for p in sorted(folder.glob("part-*.jsonl")):
        with open(p, encoding="utf-8") as f:
            rows += [json.loads(line)["text"] for line in f]
        if len(rows) >= docs:
            break
    table = pa.table({"text": rows[:docs]})
    op = MinHashDedup(threshold=0.8)
    out = {}
    t = time.process_time()
    texts = [x or "" for x in table.column("text").to_pylist()]
    out["to_pylist"] = time.process_time() - t
    t = time.process_time()
    langs = op.languages(table)
    out["languages"] = time.process_time() - t
    t = time.process_time()
    sigs = signatures(texts, langs, num_perm=op.num_perm, seed=op.seed)
    out["signatures"] = time.process_time() - t
    t = time.process_time()
    band_keys(sigs, op.bands, op.rows)
    is_empty(sigs)
    out["band_keys"] = time.process_time() - t
    t = time.process_time()
    op.keys(table)
    out["keys() total"] = time.process_time() - t
    return {k: v / len(texts) * 1e6 for k, v in out.items()}   # us per document


# ----------------------------------------------------------------------------- driver


def step_times(log: str) -> list[tuple[str, int, float]]:
    out = []
    for line in log.splitlines():
        m = re.match(r"^(?P<label>.+?): (?P<done>\d+)/(?P<total>\d+) tasks.* in (?P<s>[\d.]+)s", line)
        if m:
            out.append((m.group("label").strip(), int(m.group("total")), float(m.group("s"))))
    return out


def e2e_main(args) -> None:
    import json

    import numpy as np

    from ylink_data.stages import build_op

    # the op's own choice (its weights), unless --bands/--rows are given
    op = build_op("minhash_dedup", {"threshold": args.threshold, "bands": args.bands, "rows": args.rows})
    bands, rows = op.bands, op.rows
    sizes = [int(s) for s in args.sizes.split(",") if s]
    dt_sizes = {int(s) for s in args.datatrove_sizes.split(",") if s}
    results = {}
    print(f"threshold {args.threshold}: {bands} bands x {rows} rows of 128 permutations; "
          f"rows_per_partition {args.rows_per_partition:,}; object store {args.object_store_mb} MB; Ray num_cpus 2\n",
          flush=True)
    for n in sizes:
        folder = build_corpus(n)
        truth = np.load(folder / "truth.npz")
        bg = truth["background"]
        jac = truth["jaccard"][truth["original"] >= 0]
        print(f"n{n}: {truth['family'].size:,} docs; background (random pairs of different families, same language): "
              f"{bg.size:,} pairs, max Jaccard {bg.max():.3f}, 99.9th pct {np.quantile(bg, 0.999):.3f}, "
              f"{int((bg > 0).sum())} above 0; injected pairs: {jac.size:,}, "
              f"{np.mean(jac >= 0.8):.1%} at Jaccard >= 0.8 "
              f"(median {np.median(jac):.3f})", flush=True)
        sides = (["ours"] if not args.skip_ours else []) + (["datatrove"] if n in dt_sizes else [])
        for side in sides:
            tag = f"{bands}x{rows}" + ("+verify" if args.verify and side == "ours" else "")
            out = E2E_OUT / f"{side}-n{n}-{tag}"
            r = run_child(side, folder, out, args, bands, rows)
            log = r.pop("log")
            if side == "ours":
                r["steps"] = step_times(log)
            if side == "ours":
                dropped, cluster_of = dropped_ours(r["out"])
            else:
                dropped, cluster_of = dropped_datatrove(out), None
            r["score"] = score(folder, dropped, cluster_of)
            fp = r["score"].pop("fp_sample")
            if n <= args.brute_force_max and fp:
                kept = np.ones(r["score"]["docs"], bool)
                kept[dropped] = False
                best = brute_force_fp(folder, fp, kept)
                r["score"]["fp_brute_force"] = {
                    "checked": len(best), "best_jaccard_ge_08": sum(b >= 0.8 for b in best),
                    "best_jaccard_quantiles": np.quantile(best, [0, .5, 1]).round(3).tolist()}
            results[f"{side}-n{n}-{tag}"] = r
            s = r["score"]
            print(f"{side} n{n}: wall {r['wall']:.1f}s ({r['wall'] / s['docs'] * 1000:.3f} s per 1k docs), "
                  f"peak RSS sum {r['rss_sum_gb']:.2f} GB, PSS sum {r['pss_sum_gb']:.2f} GB, max process "
                  f"{r['rss_max_proc_gb']:.2f} GB ({r['max_proc']}), {r['procs']} processes; "
                  f"CPU {r['cpu_s']:.0f}s (sampled; rusage of reaped children {r['cpu_rusage_s']:.0f}s), "
                  f"load {r['load_before']:.1f}/{r['load_after']:.1f}; dropped {s['dropped']:,}, "
                  f"precision {s['precision']:.4f}, recall J>=0.8 {s['recall_j08']:.4f}, all {s['recall_all']:.4f}",
                  flush=True)
            print("  " + json.dumps({k: v for k, v in r.items() if k != "steps"}, default=str), flush=True)
            steps = r["steps"] if side == "ours" else [(k, "", v) for k, v in r["steps"].items()]
            for label, tasks, seconds in steps:
                print(f"    {seconds:7.1f}s  {label}" + (f" ({tasks} tasks)" if tasks else ""), flush=True)
            path = E2E_OUT / "results.json"
            previous = json.loads(path.read_text()) if path.exists() else {}
            path.write_text(json.dumps({**previous, **results}, default=str, indent=1))
    if args.profile:
        folder = build_corpus(sizes[0])
        print("keys() per document, us (one core):", json.dumps(profile_keys(folder)), flush=True)
    print_table(results)


def print_table(results: dict) -> None:
    print("\n| side, bands x rows | docs | wall s | s per 1k docs | CPU s per 1k docs | peak RSS sum GB | "
          "peak PSS sum GB | max process GB | "
          "dropped | precision | recall (J >= 0.8) | recall (all copies) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, r in results.items():
        s = r["score"]
        side, _, config = key.split("-")
        print(f"| {side}, {config} | {s['docs']:,} | {r['wall']:.1f} | {r['wall'] / s['docs'] * 1000:.3f} | "
              f"{r['cpu_s'] / s['docs'] * 1000:.3f} | {r['rss_sum_gb']:.2f} | {r['pss_sum_gb']:.2f} | "
              f"{r['rss_max_proc_gb']:.2f} | {s['dropped']:,} | "
              f"{s['precision']:.4f} | {s['recall_j08']:.4f} | {s['recall_all']:.4f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    sig = sub.add_parser("signatures", help="signature throughput vs datasketch and rensa")
    sig.add_argument("--repeats", type=int, default=5)
    sig.add_argument("--docs", type=int, default=1000, help="documents per language (0: all)")
    sig.add_argument("--batch", type=int, default=1024, help="documents per `signatures` call")
    e2e = sub.add_parser("e2e", help="the minhash_dedup op end to end vs datatrove's MinHash pipeline")
    e2e.add_argument("--sizes", default="100000,300000,1000000", help="documents per run, comma-separated")
    e2e.add_argument("--datatrove-sizes", default="100000", help="sizes datatrove also runs on")
    e2e.add_argument("--threshold", type=float, default=0.8)
    e2e.add_argument("--bands", type=int, default=None, help="default: the op's (datasketch optimal_param)")
    e2e.add_argument("--rows", type=int, default=None)
    e2e.add_argument("--rows-per-partition", type=int, default=1_000_000)
    e2e.add_argument("--object-store-mb", type=int, default=300)
    e2e.add_argument("--brute-force-max", type=int, default=100_000,
                     help="check false positives by brute force up to this size")
    e2e.add_argument("--skip-ours", action="store_true")
    e2e.add_argument("--verify", action="store_true", help="the op's verify: true (exact Jaccard of candidate pairs)")
    e2e.add_argument("--profile", action="store_true", help="also time the parts of the op's keys() in process")
    child = sub.add_parser("e2e-child", help=argparse.SUPPRESS)
    for name in ("--side", "--input", "--out", "--result"):
        child.add_argument(name, required=True)
    child.add_argument("--threshold", type=float, default=0.8)
    child.add_argument("--rows-per-partition", type=int, default=1_000_000)
    child.add_argument("--object-store-mb", type=int, default=300)
    child.add_argument("--bands", type=int, default=9)
    child.add_argument("--rows", type=int, default=13)
    child.add_argument("--verify", action="store_true")
    args = ap.parse_args()
    if args.part == "e2e-child":
        return e2e_child(args)
    from importlib.metadata import version

    import numpy as np

    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}, datasketch {version('datasketch')}, rensa {version('rensa')}, {dt.date.today()}\n")
    if args.part == "signatures":
        bench_signatures(args.repeats, args.docs, args.batch)
    elif args.part == "e2e":
        e2e_main(args)


if __name__ == "__main__":
    main()
