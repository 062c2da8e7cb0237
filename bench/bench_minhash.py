"""Benchmark: MinHash near-duplicate detection.

    .venv/bin/python bench/bench_minhash.py signatures [--repeats 5] [--docs 1000]

`signatures`: signature throughput (documents/s and MB/s of UTF-8 text per core) of
`ylink_data.text.dedup.signatures` against datasketch (a `MinHash.update` loop, one call per shingle;
and `MinHash.bulk`, one `update_batch` per document) and rensa (`RMinHash.update` with the
document's list of shingles; and, for reference, rensa's own batch call
`RMinHash.digest_matrix_from_token_sets`), on real documents: English 500-word documents (Project
Gutenberg books cut into consecutive 500-word pieces) and Chinese 1,500-character documents
(THUCNews articles, in file order, joined and cut into 1,500-character pieces). Every side uses
128 permutations, seed 1, and the same shingles: word 5-grams for English and character 5-grams for
Chinese (datasketch gets them UTF-8 encoded, as its default SHA-1 hash needs bytes). Our side starts
from the texts; the peers start from shingle strings, so their *from text* rate adds the time of
building those strings in plain Python (`plain_shingles`: a regex, `split` and `join`, the usual way,
and a little faster than `ylink_data.text.dedup.shingles`; the number of documents where both give the
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

`peers` (issue "MinHash per core ahead of rensa"): whole commands, each in a child process timed
by wall clock from spawn to exit (start-up and reading included) with its peak memory, on the JSONL
files of the e2e corpus of `--docs` documents, all sides taking turns in each of `--repeats` rounds
(order rotated by one each round) in one run: `ylink run` with `minhash_dedup` (threshold 0.8) on
`ray.num_cpus: 1` pinned to core 0 (`taskset -c 0`) and on 2 CPUs unpinned (`ylink-1cpu`,
`ylink-2cpu`); the same with `exact_dedup` (`exact-1cpu`, `exact-2cpu`: the exact-dedup global
phase's scaling); and on core 0, plain Python reading the same files with `json.loads` and shingling
with `plain_shingles` (word 5-grams; character 5-grams where the first 200 characters are mostly
Han or kana), then rensa 0.5 in one loop (`RMinHash(128, 1).update`, `RMinHashLSH(0.8, 128, 16
bands)` query, insert if new: `rensa-loop`), rensa's batch calls per file
(`digest_matrix_from_token_sets` + `insert_matrix_and_query_duplicate_flags`: `rensa-matrix`), and
datasketch (`MinHash(128, seed=1).update_batch` of UTF-8 shingles, `MinHashLSH(0.8)` query/insert:
`datasketch`, in the first `--datasketch-repeats` rounds only: it is slow). Reported per side: median
(min-max) wall, peak RSS of the largest process and of the tree, documents dropped, precision and
recall against truth.npz (`score`; the exact-dedup sides: wall only); and the ratios rensa / ylink
(1 CPU), datasketch / ylink, ylink 1 CPU / 2 CPUs, exact 1 CPU / 2 CPUs, with a busy-loop ceiling
of what 2 cores give at that moment. The machine, load averages and date are printed; results go
to bench/_data/minhash_e2e/runs/peers/results.json (and each run's log, YAML and stats.json there).
See the "peers" section below.

    .venv/bin/python bench/bench_minhash.py peers [--docs 200000] [--repeats 3] [--datasketch-repeats 1]

`scale`: one `ylink run` (`minhash_dedup` with its defaults, `ray.num_cpus: --cpus`) per size on
~1 KB documents built file by file in constant memory (`build_scale_corpus`: bench/_data/minhash_scale/
n{n}/, ~1.2 GB of JSONL per million documents, 20% Chinese, near-duplicates across files; built once,
about 40 s per million): wall and wall per 1,000 documents, peak RSS of the largest process and of
the process tree, documents kept and dropped (stats.json), the run's per-step lines; the ratio of
time per document at the largest size to the smallest. Each run's output is removed after it is
measured (its log, YAML and stats.json are kept in bench/_data/minhash_scale/runs/); results go to
bench/_data/minhash_scale/results.json and a plot to bench/minhash_scale.png (seconds per 1k
documents and peak RSS against documents). See the "scale" section below.

    .venv/bin/python bench/bench_minhash.py scale [--sizes 1000000,3000000,10000000] [--cpus 2]
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
from benchtools import WALL_OVER_CPU, timed, two_core_ceiling  # bench/ is on sys.path when a script runs

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
    from ylink_data.text.dedup import signatures

    return lambda: [signatures(texts[i:i + batch], lang, num_perm=NUM_PERM, seed=SEED)
                    for i in range(0, len(texts), batch)]


NON_WORD = re.compile(r"[\W_]+")


def plain_shingles(text: str, unit: str, n: int = 5) -> list[str]:
    """Shingles the way a plain Python pipeline builds them (lowercase, non-word characters to
    spaces, words or characters in n-grams); the same definition as `ylink_data.text.dedup.shingles`
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
    exactly as `ylink_data.text.dedup.shingles` does."""
    import numpy as np
    from datasketch import MinHash

    from ylink_data.text.dedup import hash32, shingles, signatures

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
# `ylink_data.text.dedup.minhash.shingles`, as the op cuts them). Everything is shuffled, written as
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


def _base_docs(pool: list[str], n: int, rng, sep: str, nbytes=None) -> list[str]:
    import numpy as np

    if nbytes is None:                                # the streaming builder passes them, once for all files
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
    from ylink_data.text.dedup.minhash import shingles

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


def _mem_kb(pid: int) -> tuple[int, int, int]:
    """(RSS, PSS, peak RSS) of a process in kB; zeros when it is gone. The peak is the kernel's
    VmHWM of the process's memory since its exec: exact, however short the peak, where sampling
    RSS can miss one (wait4's ru_maxrss is no substitute: exec records the parent's peak in it)."""
    rss = pss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss, hwm


class TreeMemory:
    """Samples a process tree every `interval` s in a thread: peaks of summed RSS and summed PSS, the
    largest peak RSS of any one process (VmHWM, GB), the most processes seen at once, and the CPU seconds of the
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
            (_, _, hwm), pid = max(mems, key=lambda m: m[0][2])
            if hwm / 2**20 > self.single:
                self.single = hwm / 2**20
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
    from ylink_data.engine.config import RayConfig
    from ylink_data.engine.executors.ray.connect import ensure_ray

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

    from ylink_data.text.dedup.minhash import is_empty, signatures
    from ylink_data.text.dedup.lsh import band_keys
    from ylink_data.ops.minhash_dedup import MinHashDedup

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

    from ylink_data.ops import build_op

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


# ============================================================================= peers (per core, whole commands)
#
# Issue "MinHash per core ahead of rensa". Every side is a whole command in a child process, timed
# by wall clock from spawn to exit (start-up, imports and reading the JSONL included, as a user
# running it would pay), on the same JSONL files of `build_corpus(docs)`. The sides take turns in
# every repeat, the order rotated by one each repeat, so a noisy neighbour on this shared machine
# falls on all of them alike; a pure-Python busy loop on one core and two at once on both cores is
# timed in each repeat too (the 2-core ceiling: what two cores give at that moment). One-core sides
# run under `taskset -c 0`, so their workers and threads (Arrow's, numpy's) get one core too.
#
# The peers read the files the plain way (`json.loads` per line) and cut each document's shingles
# with `plain_shingles` (word 5-grams; character 5-grams where most of the first 200 characters are
# Han or kana, as the op decides by script on a corpus without `lang`). rensa's LSH is given 16
# bands (x 8 rows: a candidate threshold near 0.71, somewhat more lenient than the op's 14 x 9),
# datasketch's `MinHashLSH` its own for 0.8 (`optimal_param`, 0.5/0.5 weights: 9 x 13, the least
# lenient, so its recall is the lowest). The loops keep a document unless the index already holds a
# candidate of it, and insert only kept ones (the usual streaming dedup; a chain a~b~c with a !~ c
# keeps a and c). `insert_matrix_and_query_duplicate_flags`
# flags *every* row that shares a band with another row, the first of a group included: its flags are
# scored as given (dropped = flagged), so its precision counts the originals it drops too; it is the
# fastest rensa call, not a dedup that keeps one per group. It is called once per input file (10,000
# documents), which keeps its shingle lists (Python strings: ~0.3 GB for 10,000 documents) to one
# file's worth; the loops hold one document's.

PEERS_OUT = E2E_OUT / "peers"
PEER_BANDS = 16
PEER_SIDES = ["ylink-1cpu", "ylink-2cpu", "exact-1cpu", "exact-2cpu", "rensa-loop", "rensa-matrix", "datasketch"]
PEER_WHAT = {
    "ylink-1cpu": "`ylink run`, minhash_dedup (threshold 0.8), `ray.num_cpus: 1`, taskset 1 core",
    "ylink-2cpu": "`ylink run`, minhash_dedup (threshold 0.8), `ray.num_cpus: 2`, 2 cores",
    "exact-1cpu": "`ylink run`, exact_dedup, `ray.num_cpus: 1`, taskset 1 core",
    "exact-2cpu": "`ylink run`, exact_dedup, `ray.num_cpus: 2`, 2 cores",
    "rensa-loop": "json.loads + plain shingles + `RMinHash.update`, LSH query/insert loop, 1 core",
    "rensa-matrix": "json.loads + plain shingles + `digest_matrix_from_token_sets` + "
                    "`insert_matrix_and_query_duplicate_flags` per file, 1 core",
    "datasketch": "json.loads + plain shingles + `MinHash.update_batch`, `MinHashLSH` query/insert loop, 1 core",
}
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def peer_shingles(text: str) -> list[str]:
    """`plain_shingles` with the unit chosen by script: characters where over 30% of the first 200
    characters are Han or kana (Chinese prose is ~90%, English 0%)."""
    head = text[:200]
    return plain_shingles(text, "char" if len(CJK.findall(head)) > 0.3 * len(head) else "word")


def peer_texts(path: Path):
    import json

    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


def peers_child(args) -> None:
    """One peer side in this process: reads `--input`'s part-*.jsonl, writes the positions (in file
    order, as truth.npz counts them) of the documents it drops and its in-process seconds to `--result`."""
    import json

    t0 = time.perf_counter()
    files = sorted(Path(args.input).glob("part-*.jsonl"))
    dropped: list[int] = []
    i = 0
    if args.side == "rensa-loop":
        from rensa import RMinHash, RMinHashLSH

        lsh = RMinHashLSH(threshold=args.threshold, num_perm=NUM_PERM, num_bands=PEER_BANDS)
        for path in files:
            for text in peer_texts(path):
                m = RMinHash(NUM_PERM, SEED)
                m.update(peer_shingles(text))
                if lsh.query(m):
                    dropped.append(i)
                else:
                    lsh.insert(i, m)
                i += 1
    elif args.side == "rensa-matrix":
        from rensa import RMinHash, RMinHashLSH

        lsh = RMinHashLSH(threshold=args.threshold, num_perm=NUM_PERM, num_bands=PEER_BANDS)
        for path in files:
            shingle_lists = [peer_shingles(t) for t in peer_texts(path)]
            matrix = RMinHash.digest_matrix_from_token_sets(shingle_lists, NUM_PERM, SEED)
            flags = lsh.insert_matrix_and_query_duplicate_flags(matrix, i)
            dropped += [i + j for j, flag in enumerate(flags) if flag]
            i += len(shingle_lists)
    elif args.side == "datasketch":
        from datasketch import MinHash, MinHashLSH

        lsh = MinHashLSH(threshold=args.threshold, num_perm=NUM_PERM)
        for path in files:
            for text in peer_texts(path):
                m = MinHash(num_perm=NUM_PERM, seed=SEED)
                m.update_batch([s.encode("utf-8") for s in peer_shingles(text)])
                if lsh.query(m):
                    dropped.append(i)
                else:
                    lsh.insert(i, m)
                i += 1
    else:
        raise SystemExit(f"unknown side {args.side}")
    Path(args.result).write_text(json.dumps({"docs": i, "work_s": time.perf_counter() - t0, "dropped": dropped}))


def ylink_command() -> list[str]:
    """The `ylink` entry point of this venv ([project.scripts] ylink = ylink_data.cli:main), or the module."""
    exe = Path(sys.executable).parent / "ylink"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ylink_data"]


def write_pipeline(path: Path, name: str, folder: Path, out: Path, stage: dict, cpus: int) -> Path:
    """A pipeline YAML on `folder`'s part-*.jsonl: one stage, default output (no rejected/ copy, no
    cluster columns: what a user's run pays), the run's CPUs."""
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "name": name, "input": {"paths": [str(folder / "part-*.jsonl")], "format": "jsonl"},
        "output": {"path": str(out)}, "stages": [stage], "ray": {"num_cpus": cpus}}, sort_keys=False))
    return path


def run_measured(cmd: list[str], log_path: Path, cores: str | None, interval: float = 0.25) -> dict:
    """Runs a whole command (under `taskset -c cores` when given), its stdout and stderr to log_path:
    wall seconds from spawn to exit, and memory: TreeMemory's samples of the process tree (summed RSS
    and PSS) and the largest process's peak RSS (its VmHWM: exact, but for growth in the last
    `interval` s of a process's life)."""
    import subprocess

    if cores is not None:
        cmd = ["taskset", "-c", cores] + cmd
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TERM": "dumb"})
        mem = TreeMemory(proc.pid, interval)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        memory = mem.stop()
    memory["rss_sum_gb"] = max(memory["rss_sum_gb"], memory["rss_max_proc_gb"])   # sampled: at least that
    memory["cpu_rusage_s"] = usage.ru_utime + usage.ru_stime
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}); see {log_path}:\n"
                           + log_path.read_text()[-3000:])
    return {"wall": wall, **memory}


def in_run_seconds(log: str) -> float:
    """Seconds of a run's own top-level phases (`phase N: ...`, `publish shards: ...` lines): the
    rest of the command's wall is start-up, planning and exit."""
    return sum(float(s) for s in re.findall(r"^(?:phase \d+|publish shards)\b.* in ([\d.]+)s", log,
                                   re.MULTILINE))


def kept_positions_ours(out: Path) -> set[int]:
    """Positions (from the `url`, .../d{position}) of the documents a run published."""
    import pyarrow.parquet as pq

    kept = set()
    for p in sorted(out.glob("data/*.parquet")) + sorted(out.glob("*.parquet")):
        kept.update(int(u.rsplit("/d", 1)[1]) for u in pq.read_table(p, columns=["url"]).column("url").to_pylist())
    return kept


def peer_side(side: str, folder: Path, docs: int, threshold: float, repeat: int) -> dict:
    """One run of one side: measurements, the positions it dropped (ylink: every position it did not
    publish) and, for ylink, its own per-step lines."""
    import json
    import shutil

    base = PEERS_OUT / f"n{docs}"
    log_path = base / f"{side}-r{repeat}.log"
    if side.startswith(("ylink", "exact")):
        cpus = int(side.split("-")[1][0])
        out = base / side
        stage = {"minhash_dedup": {"threshold": threshold}} if side.startswith("ylink") else {"exact_dedup": {}}
        config = write_pipeline(base / f"{side}.yaml", f"peers-{side}", folder, out, stage, cpus)
        r = run_measured(ylink_command() + ["run", str(config), "--fresh", "--no-progress"], log_path,
                         "0" if cpus == 1 else None)
        log = log_path.read_text()
        stats = json.loads((out / "stats.json").read_text())
        shutil.copy(out / "stats.json", base / f"{side}-r{repeat}.stats.json")
        r.update(docs=stats["input_records"], in_run_s=in_run_seconds(log),
                 dropped_count=stats["input_records"] - stats["output_records"])
        if side.startswith("ylink"):
            kept = kept_positions_ours(out)
            r["dropped"] = sorted(set(range(stats["input_records"])) - kept)
            r["steps"] = step_times(log)
        shutil.rmtree(out)                            # ~1 KB a document: keep the disk free
        return r
    result = base / f"{side}-r{repeat}.json"
    r = run_measured([sys.executable, str(Path(__file__).resolve()), "peers-child", "--side", side,
                      "--input", str(folder), "--result", str(result), "--threshold", str(threshold)], log_path, "0")
    child = json.loads(result.read_text())
    result.unlink()
    r.update(docs=child["docs"], in_run_s=child["work_s"], dropped=child["dropped"],
             dropped_count=len(child["dropped"]))
    return r


def peers_main(args) -> None:
    import json

    import numpy as np

    load_before = os.getloadavg()
    folder = build_corpus(args.docs)
    docs = int(np.load(folder / "truth.npz")["family"].size)
    mb = sum(p.stat().st_size for p in folder.glob("part-*.jsonl")) / 1e6
    print(f"corpus {folder.relative_to(REPO)}: {docs:,} docs, {mb:,.0f} MB JSONL; threshold {args.threshold}; "
          f"{args.repeats} repeats (datasketch {args.datasketch_repeats}), order rotated each repeat; "
          f"load average before {' '.join(f'{x:.2f}' for x in load_before)}\n", flush=True)
    sides = [s for s in args.sides.split(",") if s]
    unknown = set(sides) - set(PEER_SIDES)
    if unknown:
        raise SystemExit(f"unknown sides {sorted(unknown)}; choose from {PEER_SIDES}")
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    scores: dict[str, dict] = {}
    ceilings = []
    for rep in range(args.repeats):
        ceilings.append(two_core_ceiling())
        print(f"repeat {rep + 1}: busy-loop ceiling 2 cores / 1 core {ceilings[-1]:.2f}", flush=True)
        order = sides[rep % len(sides):] + sides[:rep % len(sides)]
        for side in order:
            if side == "datasketch" and len(runs[side]) >= args.datasketch_repeats:
                continue
            r = peer_side(side, folder, args.docs, args.threshold, rep)
            dropped = r.pop("dropped", None)
            if dropped is not None and side not in scores:   # the same every repeat (deterministic): scored once
                s = score(folder, np.array(dropped, np.int64), None)
                s.pop("fp_sample")
                scores[side] = s
            runs[side].append(r)
            print(f"  {side}: wall {r['wall']:.2f}s (in-run {r['in_run_s']:.2f}s), max process "
                  f"{r['rss_max_proc_gb']:.2f} GB, tree RSS {r['rss_sum_gb']:.2f} GB, dropped {r['dropped_count']:,}"
                  + (f", precision {scores[side]['precision']:.4f}, recall J>=0.8 {scores[side]['recall_j08']:.4f}"
                     if side in scores else ""), flush=True)
    load_after = os.getloadavg()
    summary = {}
    for side, rs in runs.items():
        if not rs:
            continue
        walls = [r["wall"] for r in rs]
        summary[side] = {
            "what": PEER_WHAT[side], "runs": len(rs), "wall_median": statistics.median(walls), "wall_min": min(walls),
            "wall_max": max(walls), "walls": walls, "in_run_median": statistics.median(r["in_run_s"] for r in rs),
            "rss_max_proc_gb": max(r["rss_max_proc_gb"] for r in rs), "rss_sum_gb": max(r["rss_sum_gb"] for r in rs),
            "pss_sum_gb": max(r["pss_sum_gb"] for r in rs), "procs": max(r["procs"] for r in rs),
            "dropped": rs[0]["dropped_count"], "dropped_all_runs": sorted({r["dropped_count"] for r in rs}),
            "docs": rs[0]["docs"], "score": scores.get(side), "steps": rs[0].get("steps")}
    med = {side: s["wall_median"] for side, s in summary.items()}
    rensa = min((s for s in ("rensa-loop", "rensa-matrix") if s in med), key=med.get, default="rensa-loop")
    ratios = {f"{rensa} / ylink-1cpu (the faster rensa side)": (rensa, "ylink-1cpu"),
              "rensa-loop / ylink-1cpu (the rensa side that keeps one per group)": ("rensa-loop", "ylink-1cpu"),
              "rensa-matrix / ylink-1cpu": ("rensa-matrix", "ylink-1cpu"),
              "datasketch / ylink-1cpu": ("datasketch", "ylink-1cpu"),
              "ylink-1cpu / ylink-2cpu (speed-up on 2 cores)": ("ylink-1cpu", "ylink-2cpu"),
              "exact-1cpu / exact-2cpu (speed-up on 2 cores)": ("exact-1cpu", "exact-2cpu")}
    ratios = {label: med[a] / med[b] for label, (a, b) in ratios.items() if a in med and b in med}
    ratios["busy-loop ceiling, 2 cores / 1 core (median)"] = statistics.median(ceilings)
    print(f"\n# {platform.platform()}, {os.cpu_count()} CPUs; {dt.datetime.now().isoformat(timespec='minutes')}; "
          f"load average before {' '.join(f'{x:.2f}' for x in load_before)}, after "
          f"{' '.join(f'{x:.2f}' for x in load_after)}; busy-loop ceiling per repeat "
          f"{', '.join(f'{c:.2f}' for c in ceilings)}\n")
    print(f"{docs:,} documents ({mb:,.0f} MB JSONL, {folder.relative_to(REPO)}); wall = whole command, spawn to exit, "
          "median of the runs (min-max); in-run = the run's own phases (ylink) or the child's time after start-up "
          "(peers)\n")
    print("| side | what | runs | wall s | min-max s | s per 1k docs | in-run s | max process GB | tree RSS GB | "
          "dropped | precision | recall (J >= 0.8) | recall (all copies) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for side, s in summary.items():
        sc = s["score"]
        quality = (f"{sc['precision']:.4f} | {sc['recall_j08']:.4f} | {sc['recall_all']:.4f}" if sc else "| |")
        print(f"| {side} | {s['what']} | {s['runs']} | {s['wall_median']:.2f} | "
              f"{s['wall_min']:.2f}-{s['wall_max']:.2f} | {s['wall_median'] / s['docs'] * 1000:.3f} | "
              f"{s['in_run_median']:.2f} | {s['rss_max_proc_gb']:.2f} | "
              f"{s['rss_sum_gb']:.2f} | {s['dropped']:,} | {quality} |")
    print("\n| ratio (median walls of this run) | value |")
    print("| --- | ---: |")
    for label, value in ratios.items():
        print(f"| {label} | {value:.2f} |")
    print("\n(peer / ylink >= 1: ylink at least as fast; rensa-matrix's flags include the first document of each "
          "group, so its precision counts dropped originals as errors)")
    for side in ("ylink-1cpu", "ylink-2cpu"):
        if summary.get(side, {}).get("steps"):
            print(f"\n{side}, first run's steps: "
                  + "; ".join(f"{label} {s:.1f}s" for label, _, s in summary[side]["steps"]))
    path = PEERS_OUT / "results.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    previous[f"n{args.docs}"] = {
        "machine": {"platform": platform.platform(), "node": platform.node(), "cpus": os.cpu_count(),
                    "load_before": load_before, "load_after": load_after},
        "date": dt.datetime.now().isoformat(timespec="seconds"), "docs": docs, "repeats": args.repeats,
        "datasketch_repeats": args.datasketch_repeats, "threshold": args.threshold, "ceilings": ceilings,
        "sides": summary, "ratios": ratios}
    path.write_text(json.dumps(previous, indent=1, default=str))
    print(f"\nresults: {path.relative_to(REPO)}")


# ============================================================================= scale (1M to 10M documents)
#
# Corpus. `build_scale_corpus(n)` writes the same kind of documents as `build_corpus` (bases of real
# sentences to ~1 KB, 20% Chinese, 10% of bases with 1-3 edited copies) file by file in constant
# memory, with no truth: file k's bases, their families and copies come from its own generators
# (numpy's default_rng([seed, k, stream]): the plan, how many bases, which get copies and into which
# file, from stream 0; the texts from stream 1; the order within the file from stream 2), and each
# copy goes into file k, k+1 or k+2 (copies for files past the end are left out), so duplicates
# cross file boundaries and only the texts of three files are ever held (copies meant for a file past
# the end go to the last one: the first two files are ~10% short, the last ~10% long). Any file can be rebuilt
# from its own plan and its two predecessors': files already there are kept (each written to .tmp
# and renamed), and DONE (its counts) marks a finished corpus. Files hold about 10,000 documents
# (their bases plus the copies sent to them).
#
# Runs. One `ylink run` per size (minhash_dedup with its defaults, `ray.num_cpus: --cpus`, under
# taskset on the first --cpus cores when fewer than the machine's), timed and sampled as the peers
# are; its per-step lines and stats.json are kept, its output removed (~1 KB a document).

SCALE_DIR = REPO / "bench" / "_data" / "minhash_scale"
SCALE_SEED = 11


def _scale_plan(k: int, n: int, seed: int) -> dict:
    """File k's plan (cheap): its bases (English first), the bases with copies, each copy's target file."""
    import numpy as np

    rng = np.random.default_rng([seed, k, 0])
    n_base = round(min(DOCS_PER_FILE, n - k * DOCS_PER_FILE) / (1 + FAMILY_SHARE * 2))
    n_zh = round(n_base * ZH_SHARE)
    fam_of = np.sort(rng.choice(n_base, round(n_base * FAMILY_SHARE), replace=False))
    copies = rng.integers(1, 4, fam_of.size)
    # copies meant for a file past the end go to the last one, so that the corpus holds about n
    target = np.minimum(k + rng.integers(0, 3, int(copies.sum())), -(-n // DOCS_PER_FILE) - 1)
    return {"n_base": n_base, "n_zh": n_zh, "fam_of": fam_of, "copies": copies, "target": target}


def _scale_texts(k: int, plan: dict, pools: tuple, seed: int) -> tuple[list[str], list[tuple[int, str]]]:
    """File k's base texts, and its copies as (target file, text)."""
    import numpy as np

    (en_pool, en_bytes), (zh_pool, zh_bytes) = pools
    rng = np.random.default_rng([seed, k, 1])
    n_en = plan["n_base"] - plan["n_zh"]
    base = _base_docs(en_pool, n_en, rng, " ", en_bytes) + _base_docs(zh_pool, plan["n_zh"], rng, "", zh_bytes)
    targets = iter(plan["target"].tolist())
    copies = []
    for b, c in zip(plan["fam_of"].tolist(), plan["copies"].tolist()):
        zh = b >= n_en
        for _ in range(c):
            copies.append((next(targets), _edit(base[b], zh, rng, zh_pool if zh else en_pool)))
    return base, copies


def build_scale_corpus(n: int, seed: int = SCALE_SEED) -> tuple[Path, dict]:
    """About `n` documents in SCALE_DIR/n{n}/part-*.jsonl; reused when DONE is there; (folder, counts)."""
    import json

    import numpy as np

    folder = SCALE_DIR / f"n{n}"
    done = folder / "DONE"
    if done.exists():
        return folder, json.loads(done.read_text())
    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    files = -(-n // DOCS_PER_FILE)
    plans = [_scale_plan(k, n, seed) for k in range(files)]
    en_pool, zh_pool = sentence_pools()
    pools = tuple((pool, np.array([len(s.encode("utf-8")) + len(sep) for s in pool]))
                  for pool, sep in ((en_pool, " "), (zh_pool, "")))
    texts: dict[int, tuple] = {}                      # the parts of files k-2..k: the bounded buffer of copies
    docs = copies = 0
    for k in range(files):
        path = folder / f"part-{k:05d}.jsonl"
        sent = [int((plans[j]["target"] == k).sum()) for j in range(max(0, k - 2), k + 1)]
        docs += plans[k]["n_base"] + sum(sent)
        copies += sum(sent)
        if path.exists():
            continue
        for j in range(max(0, k - 2), k + 1):
            if j not in texts:
                texts[j] = _scale_texts(j, plans[j], pools, seed)
        rows = list(texts[k][0])
        for j in range(max(0, k - 2), k + 1):
            rows += [t for target, t in texts[j][1] if target == k]
        order = np.random.default_rng([seed, k, 2]).permutation(len(rows))
        with open(str(path) + ".tmp", "w", encoding="utf-8") as f:
            for j, p in enumerate(order.tolist()):
                f.write(json.dumps({"id": f"s{k}-{j}", "url": f"https://bench.invalid/s{k}-{j}", "text": rows[p]},
                                   ensure_ascii=False) + "\n")
        os.replace(str(path) + ".tmp", path)
        texts.pop(k - 2, None)
        if k % 100 == 99:
            print(f"  corpus n{n}: {k + 1}/{files} files, {time.perf_counter() - t0:.0f}s", flush=True)
    mb = sum(p.stat().st_size for p in folder.glob("part-*.jsonl")) / 1e6
    counts = {"docs": docs, "files": files, "copies": copies, "bases": docs - copies, "mb": mb,
              "seconds": time.perf_counter() - t0, "seed": seed}
    done.write_text(json.dumps(counts))
    print(f"corpus n{n}: {docs:,} docs ({copies:,} injected copies) in {files} files, {mb:,.0f} MB JSONL, "
          f"built in {counts['seconds']:.0f}s", flush=True)
    return folder, counts


def scale_main(args) -> None:
    import json
    import shutil

    sizes = [int(s) for s in args.sizes.split(",") if s]
    runs = SCALE_DIR / "runs"
    results = {}
    load_before = os.getloadavg()
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs; {dt.datetime.now().isoformat(timespec='minutes')}; "
          f"ray.num_cpus {args.cpus}; load average before {' '.join(f'{x:.2f}' for x in load_before)}\n", flush=True)
    for n in sizes:
        folder, counts = build_scale_corpus(n)
        name = f"n{n}-c{args.cpus}"
        out = runs / name
        config = write_pipeline(runs / f"{name}.yaml", f"minhash-scale-{name}", folder, out, {"minhash_dedup": {}},
                                args.cpus)
        cores = f"0-{args.cpus - 1}" if args.cpus < (os.cpu_count() or 1) else None
        try:
            r = run_measured(ylink_command() + ["run", str(config), "--fresh", "--no-progress"],
                             runs / f"{name}.log", cores, interval=0.5)
        except RuntimeError as exc:                   # the other sizes still run; the output is left to look at
            print(f"n{n}: FAILED: {exc}", flush=True)
            continue
        log = (runs / f"{name}.log").read_text()
        stats = json.loads((out / "stats.json").read_text())
        shutil.copy(out / "stats.json", runs / f"{name}.stats.json")
        shutil.rmtree(out)                            # ~1 KB a document: the disk, at 10M
        docs = stats["input_records"]
        r.update(docs=docs, kept=stats["output_records"],
                 dropped={s["name"]: s["dropped"] for s in stats["stages"] if s["dropped"]},
                 s_per_1k=r["wall"] / docs * 1000, in_run_s=in_run_seconds(log), steps=step_times(log), corpus=counts)
        results[name] = r
        print(f"n{n}: {docs:,} docs, wall {r['wall']:.1f}s ({r['s_per_1k']:.3f} s per 1k docs; in-run "
              f"{r['in_run_s']:.1f}s), max process {r['rss_max_proc_gb']:.2f} GB ({r['max_proc']}), tree RSS "
              f"{r['rss_sum_gb']:.2f} GB, PSS {r['pss_sum_gb']:.2f} GB, {r['procs']} processes; kept {r['kept']:,}, "
              f"dropped {r['dropped']}; load {r['load_before']:.1f}/{r['load_after']:.1f}", flush=True)
        for label, tasks, seconds in r["steps"]:
            print(f"    {seconds:7.1f}s  {label} ({tasks} tasks)", flush=True)
        path = SCALE_DIR / "results.json"
        previous = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**previous, **results}, default=str, indent=1))
    load_after = os.getloadavg()
    print(f"\nload average after {' '.join(f'{x:.2f}' for x in load_after)}\n")
    print("| documents | MB JSONL | wall s | s per 1k docs | in-run s | max process GB | tree RSS GB | tree PSS GB | "
          "kept | dropped |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results.values():
        print(f"| {r['docs']:,} | {r['corpus']['mb']:,.0f} | {r['wall']:.1f} | {r['s_per_1k']:.3f} | "
              f"{r['in_run_s']:.1f} | {r['rss_max_proc_gb']:.2f} | {r['rss_sum_gb']:.2f} | {r['pss_sum_gb']:.2f} | "
              f"{r['kept']:,} | {sum(v for d in r['dropped'].values() for v in d.values()):,} |")
    rs = sorted(results.values(), key=lambda r: r["docs"])
    if len(rs) > 1:
        print(f"\ntime per document, {rs[-1]['docs']:,} / {rs[0]['docs']:,} docs: "
              f"{rs[-1]['s_per_1k'] / rs[0]['s_per_1k']:.2f} (1.00: linear); max-process peak RSS per size: "
              + ", ".join(f"{r['docs']:,}: {r['rss_max_proc_gb']:.2f} GB" for r in rs))
    plot_scale(rs, args.cpus)


def plot_scale(rs: list[dict], cpus: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["docs"] for r in rs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5), dpi=100)
    left.plot(x, [r["s_per_1k"] for r in rs], "o-")
    left.set_ylabel("wall s per 1k docs")
    left.set_ylim(bottom=0)
    right.plot(x, [r["rss_max_proc_gb"] for r in rs], "o-", label="largest process")
    right.plot(x, [r["rss_sum_gb"] for r in rs], "s--", label="process tree (RSS sum)")
    right.set_ylabel("peak RSS, GB")
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{d / 1e6:.1f}M" if d >= 1e6 else f"{d / 1e3:.0f}k" for d in x])
        ax.minorticks_off()
        ax.set_xlabel("documents")
        ax.grid(alpha=0.3)
    fig.suptitle(f"minhash_dedup, ylink run, ray.num_cpus {cpus}", fontsize=10)
    fig.tight_layout()
    path = REPO / "bench" / "minhash_scale.png"
    fig.savefig(path)
    print(f"plot: {path.relative_to(REPO)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # the child commands (run by the parent) have no help line and stay out of the list
    sub = ap.add_subparsers(dest="part", required=True, metavar="{signatures,e2e,peers,scale}")
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
    child = sub.add_parser("e2e-child")
    for name in ("--side", "--input", "--out", "--result"):
        child.add_argument(name, required=True)
    child.add_argument("--threshold", type=float, default=0.8)
    child.add_argument("--rows-per-partition", type=int, default=1_000_000)
    child.add_argument("--object-store-mb", type=int, default=300)
    child.add_argument("--bands", type=int, default=9)
    child.add_argument("--rows", type=int, default=13)
    child.add_argument("--verify", action="store_true")
    peers = sub.add_parser("peers", help="whole commands per core: ylink run (1 and 2 CPUs) vs rensa and datasketch")
    peers.add_argument("--docs", type=int, default=200_000, help="corpus size (build_corpus; built once)")
    peers.add_argument("--repeats", type=int, default=3, help="rounds; every side once per round, in turn")
    peers.add_argument("--datasketch-repeats", type=int, default=1, help="rounds datasketch takes part in (slow)")
    peers.add_argument("--threshold", type=float, default=0.8)
    peers.add_argument("--sides", default=",".join(PEER_SIDES),
                       help="comma-separated sides to run (default: all), e.g. ylink-1cpu,ylink-2cpu at 1M")
    pchild = sub.add_parser("peers-child")
    pchild.add_argument("--side", required=True, choices=["rensa-loop", "rensa-matrix", "datasketch"])
    for name in ("--input", "--result"):
        pchild.add_argument(name, required=True)
    pchild.add_argument("--threshold", type=float, default=0.8)
    scale = sub.add_parser("scale", help="one ylink run per size, 1M-10M documents: time per document and peak memory")
    scale.add_argument("--sizes", default="1000000,3000000,10000000", help="documents per run, comma-separated")
    scale.add_argument("--cpus", type=int, default=2, help="ray.num_cpus of the runs")
    args = ap.parse_args()
    if args.part == "e2e-child":
        return e2e_child(args)
    if args.part == "peers-child":
        return peers_child(args)
    from importlib.metadata import version

    import numpy as np

    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}, datasketch {version('datasketch')}, rensa {version('rensa')}, {dt.date.today()}\n")
    if args.part == "signatures":
        bench_signatures(args.repeats, args.docs, args.batch)
    elif args.part == "e2e":
        e2e_main(args)
    elif args.part == "peers":
        peers_main(args)
    elif args.part == "scale":
        scale_main(args)


if __name__ == "__main__":
    main()
