"""decontaminate against datatrove's n-gram decontamination, on the same real-text documents.

Documents: windows of 2 to 5 consecutive sentences of real text (Reuters-21578, 13 Gutenberg books,
THUCNews, ChineseWebText), taken at stepped offsets so that every document is distinct, generated
as a stream (never all in memory). Every 1,000th document gets a benchmark item planted in it:
alternately a GSM8K question or HumanEval prompt verbatim, and lightly edited (upper case,
punctuation removed, its 6th word changed). Benchmarks: GSM8K test `question` + HumanEval `prompt`.

Each side runs in its own process (peak RSS is its own), on one core, in batches of 2,048:
- ylink: `Decontaminate.process` on Arrow batches (13-word n-grams);
- datatrove 0.10.1: NGramsDecontFilter.filter per document, n_grams=13, with an index written
  by NGramsDecontIndexer.compute_hashes (its `run` needs lighteval to fetch tasks, which we do not
  install: we call the same method on our items, with find_query_ngrams so the item is the text
  indexed) and hash_fc=sha1 (its default xxhash raises "Strings must be encoded before hashing"
  with xxhash 3.x: the filter hashes str).

    PYTHONPATH=. .venv/bin/python bench/bench_decontaminate.py --docs 1000000 --peer-docs 200000

`--vs-old` adds the op of `--old-ref` (the previous implementation) on the same documents, each in
its own process; `--peer-docs 0` leaves datatrove out. `--ab-lookup --docs N`: the look-up alone,
the old index class against this one batch by batch in one process (`ab_lookup`), which this
shared machine's noise between processes (0.85x to 1.01x in three runs of `--vs-old`) cannot blur.

Scale mode (issue 23, point 8): the index of a benchmark of a million items, the previous
implementation against this one in the same run.

    PYTHONPATH=. nice .venv/bin/python bench/bench_decontaminate.py --scale --items 1000000 --workers 4

- Benchmark: one JSONL file of `--items` items, `{"id", "question"}`: the 1,319 GSM8K test questions,
  then items of 26 to 34 words, each made of runs of 4 to 8 consecutive words of real English text
  (the 13 Gutenberg books and Reuters articles 0-7,499, as written: case and punctuation kept), one in
  50 a Chinese item of 36 to 44 characters made of runs of 6 to 12 characters of THUCNews articles
  0-699. Real words in real local order, but a 13-gram almost always crosses a seam between two
  runs, so nearly every item's n-grams are its own (as in a real benchmark of distinct questions).
- Held-out documents (`--heldout`): windows of 2 to 5 sentences of text the items never drew on
  (Reuters articles 7,500 on, THUCNews articles 700 on; one in five Chinese); every 10th has an
  item planted, alternately verbatim and lightly edited (`edit`, `edit_zh`), one in four of them a
  GSM8K question of 30+ words, the others items spread over the whole file. Expected: the planted
  documents, each with its own item; no other.
- Old: `Decontaminate` of commit `--old-ref` (the last one before the compact index), extracted with
  `git archive` into the work folder and imported from there in its own process: each worker reads
  the file and builds its own index. One worker is run (every worker does the same).
- New: `--workers` processes started at once on a cold cache folder (one builds the index file, the
  others wait on its lock and map it), then as many again on the warm cache (each maps it).
Each process reports the wall and CPU seconds of `setup`, its peak RSS, and at the end its RSS split
into what it shares with the other workers (the mapped index file) and what is its own (PSS, USS
from /proc/self/smaps_rollup); then every held-out document is checked, and the matches of the two
sides must be the same (benchmark, item, n-gram) for every document.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

SHARED = Path(os.environ.get("YLINK_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")
GSM8K = SHARED / "benchmarks" / "gsm8k" / "test.jsonl"
HUMANEVAL = SHARED / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"
BATCH = 2048
PLANT_EVERY = 1000
OLD_REF = "0a518f0"  # the last commit with the per-worker index of Python strings (issue 23, point 8)
REPO = Path(__file__).resolve().parents[1]


def _sentences() -> list[str]:
    out: list[str] = []
    split_en = re.compile(r"(?<=[.!?])\s+")
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        for line in f:
            out += [s for s in split_en.split(" ".join(json.loads(line)["text"].split())) if s]
    for book in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt")):
        for para in book.read_text(encoding="latin-1").split("\n\n"):
            out += [s for s in split_en.split(" ".join(para.split())) if s]
    split_zh = re.compile(r"(?<=[。！？])")
    for line in (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text().splitlines():
        out += [s for s in split_zh.split(line.split("\t", 1)[1]) if s]
    for path in sorted((SHARED / "zh_chinesewebtext_quality").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line).get("text") or ""
            out += [s for s in split_zh.split(text) if s.strip()]
    return out


def items() -> list[tuple[str, str, str]]:
    """(benchmark file name, item id, text) of the planted pool."""
    gsm = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    with gzip.open(HUMANEVAL, "rt") as f:
        he = [json.loads(line) for line in f]
    return ([("test.jsonl", str(i), r["question"]) for i, r in enumerate(gsm) if len(r["question"].split()) >= 30]
            + [("HumanEval.jsonl.gz", r["task_id"], r["prompt"]) for r in he])


def edit(text: str) -> str:
    words = re.sub(r"[^\w\s]", " ", text.upper()).split()
    words[5] = "BANANAS"
    return " ".join(words)


def documents(n: int) -> Iterator[tuple[str, str | None]]:
    """(text, planted "kind:benchmark:item" or None) for n distinct documents."""
    pool = _sentences()
    planted = items()
    size = len(pool)
    for i in range(n):
        width = 2 + i % 4
        start = (i * 7919 + i // size) % size  # stepped offsets: (start, width) differ for every i < 4 * size
        text = " ".join(pool[start:start + width])
        kind = None
        if i % PLANT_EVERY == PLANT_EVERY - 1:
            k = i // PLANT_EVERY
            bench, item, body = planted[(k // 2) % len(planted)]
            verbatim = k % 2 == 0
            text = f"{text}\n{body if verbatim else edit(body)}\n{pool[(start + 100) % size]}"
            kind = f"{'verbatim' if verbatim else 'edited'}:{bench}:{item}"
        yield text, kind


def run_side(side: str, n: int) -> dict:
    """One side, in this process: (docs, seconds of checking, flagged documents)."""
    flagged: list[tuple[int, str | None, str]] = []  # (doc number, planted kind, what matched)
    if side == "ylink":
        import pyarrow as pa

        from ylink_data.ops.decontaminate import Decontaminate

        op = Decontaminate(benchmarks=[{"path": str(GSM8K), "fields": ["question"]},
                                       {"path": str(HUMANEVAL), "fields": ["prompt"], "id_field": "task_id"}])
        started = time.process_time()
        op.setup()
        setup = time.process_time() - started
        busy = 0.0
        texts: list[str] = []
        kinds: list[str | None] = []

        def flush(first: int) -> float:
            table = pa.table({"id": [str(first + j) for j in range(len(texts))],
                              "text": pa.array(texts, pa.large_string())})
            t0 = time.process_time()
            result = op.process(table)
            spent = time.process_time() - t0
            items_ = result.table.column("decontaminate_item").to_pylist()
            for j, reason in enumerate(result.dropped or []):
                if reason:
                    flagged.append((first + j, kinds[j], f"{reason.split(':', 1)[1]}:{items_[j]}"))
            return spent

        first = 0
        for i, (text, kind) in enumerate(documents(n)):
            texts.append(text)
            kinds.append(kind)
            if len(texts) == BATCH:
                busy += flush(first)
                first, texts, kinds = i + 1, [], []
        if texts:
            busy += flush(first)
    else:
        import tempfile
        from types import SimpleNamespace

        import numpy as np
        from datatrove.data import Document
        from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer
        from datatrove.utils.hashing import HashConfig, create_hash_func
        from datatrove.utils.word_tokenizers import load_word_tokenizer

        config = NGramsDecontConfig(n_grams=13, find_query_ngrams=True, hash_config=HashConfig(hash_fc="sha1"))
        started = time.process_time()
        indexer = SimpleNamespace(tokenizer=load_word_tokenizer("en"), config=config,
                                  hash_func=create_hash_func(config.hash_config))
        folder = tempfile.mkdtemp()
        gsm = [json.loads(line)["question"] for line in GSM8K.read_text().splitlines()]
        with gzip.open(HUMANEVAL, "rt") as f:
            he = [json.loads(line)["prompt"] for line in f]
        for name, texts_ in (("test.jsonl", gsm), ("HumanEval.jsonl.gz", he)):
            hashes = set()
            for t in texts_:
                hashes.update(NGramsDecontIndexer.compute_hashes(indexer, t))
            np.array(sorted(hashes), dtype=config.hash_config.np_descr).tofile(f"{folder}/{name}.index.hashes")
        filt = NGramsDecontFilter(folder, config=config)
        filt.load_index_hashes()
        setup = time.process_time() - started
        busy = 0.0
        for i, (text, kind) in enumerate(documents(n)):
            doc = Document(text=text, id=str(i))
            t0 = time.process_time()
            verdict = filt.filter(doc)
            busy += time.process_time() - t0
            if verdict is not True:
                flagged.append((i, kind, str(doc.metadata.get("contaminated_task"))))
    return {"side": side, "docs": n, "setup_s": setup, "busy_s": busy, "flagged": flagged,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def summarise(result: dict) -> dict:
    n = result["docs"]
    planted = [kind for _, kind in ((i, k) for i, k in _planted_kinds(n))]
    found = {i for i, kind, _ in result["flagged"] if kind}
    verbatim = [i for i, k in _planted_kinds(n) if k.startswith("verbatim")]
    edited = [i for i, k in _planted_kinds(n) if k.startswith("edited")]
    false = [(i, what) for i, kind, what in result["flagged"] if not kind]
    wrong_item = [(i, kind, what) for i, kind, what in result["flagged"]
                  if kind and result["side"] == "ylink" and kind.split(":", 1)[1] != what]
    return {**{k: v for k, v in result.items() if k != "flagged"}, "planted": len(planted),
            "docs_per_s": n / result["busy_s"],
            "recall_verbatim": sum(i in found for i in verbatim) / max(1, len(verbatim)),
            "recall_edited": sum(i in found for i in edited) / max(1, len(edited)),
            "false_positives": len(false), "false_positive_examples": false[:20], "wrong_item": wrong_item[:5]}


def _planted_kinds(n: int) -> Iterator[tuple[int, str]]:
    pool = items()
    for i in range(PLANT_EVERY - 1, n, PLANT_EVERY):
        k = i // PLANT_EVERY
        bench, item, _ = pool[(k // 2) % len(pool)]
        yield i, f"{'verbatim' if k % 2 == 0 else 'edited'}:{bench}:{item}"


# ----------------------------------------------------------------------------- scale mode (issue 23.8)

ITEM_SOURCE_REUTERS = 7500  # Reuters articles before this feed the items; the rest are held out
ITEM_SOURCE_THUCNEWS = 700  # likewise for THUCNews articles
SCALE_PLANT_EVERY = 10


def _reuters_texts() -> list[str]:
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        return [json.loads(line)["text"] for line in f]


def _thucnews_texts() -> list[str]:
    lines = (SHARED / "zh_thucnews_cnews" / "cnews.val.txt").read_text().splitlines()
    return [line.split("\t", 1)[1] for line in lines]


def write_scale_items(path: Path, n: int, seed: int = 23) -> None:
    """The benchmark file of the scale mode (module docstring), the same for the same n and seed."""
    words: list[str] = []
    for book in sorted((SHARED / "en_gutenberg_nltk_raw").glob("*.txt")):
        words += book.read_text(encoding="latin-1").split()
    for text in _reuters_texts()[:ITEM_SOURCE_REUTERS]:
        words += text.split()
    chars = "".join("".join(t.split()) for t in _thucnews_texts()[:ITEM_SOURCE_THUCNEWS])
    rng = random.Random(seed)
    gsm = [json.loads(line)["question"] for line in GSM8K.read_text().splitlines()]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for i, question in enumerate(gsm[:n]):
            f.write(json.dumps({"id": f"gsm8k-{i}", "question": question}) + "\n")
        for k in range(n - min(n, len(gsm))):
            if k % 50 == 49:
                target, parts, size = rng.randint(36, 44), [], 0
                while size < target:
                    length = rng.randint(6, 12)
                    start = rng.randrange(len(chars) - length)
                    parts.append(chars[start:start + length])
                    size += length
                text = "".join(parts)
            else:
                target, out = rng.randint(26, 34), []
                while len(out) < target:
                    length = rng.randint(4, 8)
                    start = rng.randrange(len(words) - length)
                    out += words[start:start + length]
                text = " ".join(out)
            f.write(json.dumps({"id": f"s{k}", "question": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def edit_zh(sentence: str) -> str:
    """Light edits of a Chinese item: its middle character changed, its commas ASCII."""
    middle = len(sentence) // 2
    sentence = sentence[:middle] + ("的" if sentence[middle] != "的" else "了") + sentence[middle + 1:]
    return sentence.replace("，", ", ")


def write_heldout(path: Path, items_path: Path, n: int, n_items: int) -> None:
    """The held-out documents (module docstring) as JSONL {"text", "planted"}: planted is
    "verbatim|edited:<item id>" or null."""
    split_en, split_zh = re.compile(r"(?<=[.!?])\s+"), re.compile(r"(?<=[。！？])")
    en = [s for t in _reuters_texts()[ITEM_SOURCE_REUTERS:] for s in split_en.split(" ".join(t.split())) if s]
    zh = [s for t in _thucnews_texts()[ITEM_SOURCE_THUCNEWS:] for s in split_zh.split(t) if s.strip()]
    gsm = [json.loads(line)["question"] for line in GSM8K.read_text().splitlines()]
    long_gsm = [i for i, q in enumerate(gsm[:n_items]) if len(q.split()) >= 30]
    planted_count = n // SCALE_PLANT_EVERY
    chosen: dict[int, int] = {}  # planted k -> item line
    for k in range(planted_count):
        if k % 4 == 0 and long_gsm:
            chosen[k] = long_gsm[(k // 4) % len(long_gsm)]
        else:
            chosen[k] = len(gsm) + (k * 104729) % max(1, n_items - len(gsm))
    wanted = set(chosen.values())
    items: dict[int, dict] = {}
    with open(items_path, encoding="utf-8") as f:
        for line_no, line in enumerate(f):
            if line_no in wanted:
                items[line_no] = json.loads(line)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            k, planted = divmod(i, SCALE_PLANT_EVERY)
            planted_item = items[chosen[k]] if planted == SCALE_PLANT_EVERY - 1 and k in chosen else None
            if planted_item:  # the item's language picks the text it is planted in
                chinese = planted_item["id"].startswith("s") and int(planted_item["id"][1:]) % 50 == 49
            else:
                chinese = i % 5 == 4
            pool = zh if chinese else en
            width = 2 + i % 4
            start = (i * 7919) % (len(pool) - width)
            text = ("" if chinese else " ").join(pool[start:start + width])
            kind = None
            if planted_item:
                verbatim = k % 2 == 0
                body = planted_item["question"]
                body = body if verbatim else (edit_zh(body) if chinese else edit(body))
                text = f"{text}\n{body}\n{pool[(start + 100) % len(pool)]}"
                kind = f"{'verbatim' if verbatim else 'edited'}:{planted_item['id']}"
            out.write(json.dumps({"text": text, "planted": kind}, ensure_ascii=False) + "\n")


def _memory_mb() -> dict:
    """This process's peak RSS, and its RSS now as /proc/self/smaps_rollup splits it: anonymous
    memory (its own heap: what each worker adds) and file-backed pages it has mapped (the index
    file, shared by every worker that maps it, and the libraries), and PSS (shared pages divided
    among the processes mapping them at that instant)."""
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    fields = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                fields[parts[0].rstrip(":")] = int(parts[1]) / 1024
    rss, anon = fields.get("Rss", 0.0), fields.get("Anonymous", 0.0)
    out.update(rss_mb=rss, anon_mb=anon, file_mb=rss - anon, pss_mb=fields.get("Pss", 0.0))
    return out


def run_scale_side(side: str, items_path: str, docs_path: str, cache_dir: str | None, start_at: float) -> dict:
    """One worker of the scale mode, in this process: set up the op (old: build; new: map or build the
    cached index), then check every held-out document. `start_at`: a wall-clock time to start at, so
    that the workers of a round race for the index as a pipeline's workers do."""
    import pyarrow as pa

    from ylink_data.ops.decontaminate import Decontaminate

    params = {"benchmarks": [{"path": items_path, "fields": ["question"], "id_field": "id"}]}
    if cache_dir is not None:
        params["cache_dir"] = cache_dir
    op = Decontaminate(**params)
    time.sleep(max(0.0, start_at - time.time()))
    cpu, wall = time.process_time(), time.perf_counter()
    op.setup()
    setup_cpu, setup_wall = time.process_time() - cpu, time.perf_counter() - wall
    after_setup = _memory_mb()
    docs = [json.loads(line) for line in open(docs_path, encoding="utf-8")]
    matches = []
    cpu = time.process_time()
    for first in range(0, len(docs), BATCH):
        texts = [d["text"] for d in docs[first:first + BATCH]]
        table = pa.table({"id": [str(first + j) for j in range(len(texts))],
                          "text": pa.array(texts, pa.large_string())})
        result = op.process(table)
        columns = [result.table.column(c).to_pylist()
                   for c in ("decontaminate_benchmark", "decontaminate_item", "decontaminate_ngram")]
        matches += [[first + j, *row] for j, row in enumerate(zip(*columns)) if row[0] is not None]
    check_cpu = time.process_time() - cpu
    return {"side": side, "pid": os.getpid(), "setup_cpu_s": setup_cpu, "setup_wall_s": setup_wall,
            "built": bool(getattr(op, "index_built", True)), "after_setup": after_setup, "end": _memory_mb(),
            "check_cpu_s": check_cpu, "docs": len(docs), "matches": matches,
            "index_hashes": int(op.index.size) if op.index is not None else None}


def _old_tree(work: Path, ref: str) -> Path:
    """The package as it was at `ref`, extracted once into the work folder."""
    tree = work / f"old-{ref}"
    if not (tree / "ylink_data").is_dir():
        tmp = Path(tempfile.mkdtemp(dir=work))
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "ylink_data"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        os.replace(tmp, tree)
    return tree


def _start_sides(side: str, count: int, items: Path, docs: Path, cache: Path | None, pythonpath: str) -> list[dict]:
    """`count` processes of one side started together; their results."""
    start_at = time.time() + 2.0  # every process imported and waiting before the race starts
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath}
    args = ["--scale-side", side, "--items-path", str(items), "--docs-path", str(docs), "--start-at", str(start_at)]
    if cache is not None:
        args += ["--cache-dir", str(cache)]
    procs = [subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(count)]
    results = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"{side} worker failed ({proc.returncode}):\n{err[-4000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def scale_summary(result: dict, planted: dict[int, str]) -> dict:
    found = {doc: item for doc, _, item, _ in result["matches"]}
    verbatim = [d for d, kind in planted.items() if kind.startswith("verbatim")]
    edited = [d for d, kind in planted.items() if kind.startswith("edited")]
    return {"recall_verbatim": f"{sum(d in found for d in verbatim)}/{len(verbatim)}",
            "recall_edited": f"{sum(d in found for d in edited)}/{len(edited)}",
            "flagged_unplanted": sum(d not in planted for d in found),
            "planted_other_item": sum(d in planted and found[d] != planted[d].split(":", 1)[1] for d in found)}


def verify_matches(matches: list, items_path: Path, docs_path: Path) -> int:
    """How many matches are a real shared n-gram: the n-gram's tokens, spaced, inside both the
    reported item's normalised text and the document's (normalised as the op does)."""
    import pyarrow as pa

    from ylink_data.text.transform.ngrams import tokenize

    wanted = {item for _, _, item, _ in matches}
    items: dict[str, str] = {}
    with open(items_path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["id"] in wanted:
                items[row["id"]] = row["question"]
    docs = [json.loads(line)["text"] for line in open(docs_path, encoding="utf-8")]

    def spaced(text: str) -> str:
        return " " + " ".join(tokenize(pa.array([text])).to_pylist()[0] or []) + " "

    return sum(spaced(ngram) in spaced(items[item]) and spaced(ngram) in spaced(docs[doc])
               for doc, _, item, ngram in matches)


def scale_main(args: argparse.Namespace) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    items = work / f"items-{args.items}.jsonl"
    if not items.exists():
        started = time.perf_counter()
        write_scale_items(items, args.items)
        print(f"wrote {items} ({items.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.0f} s",
              flush=True)
    docs = work / f"heldout-{args.items}-{args.heldout}.jsonl"
    if not docs.exists():
        write_heldout(docs, items, args.heldout, args.items)
    planted = {i: json.loads(line)["planted"] for i, line in enumerate(open(docs, encoding="utf-8"))}
    planted = {i: kind for i, kind in planted.items() if kind}
    print(f"items: {args.items:,} ({items.stat().st_size / 1e6:.0f} MB); held-out documents: {args.heldout:,}, "
          f"{len(planted):,} planted", flush=True)
    rounds: dict[str, list[dict]] = {}
    if not args.skip_old:
        old = _old_tree(work, args.old_ref)
        rounds["old"] = _start_sides("old", 1, items, docs, None, str(old))
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    rounds["new-cold"] = _start_sides("new", args.workers, items, docs, cache, str(REPO))
    rounds["new-warm"] = _start_sides("new", args.workers, items, docs, cache, str(REPO))
    reference = None
    for name, results in rounds.items():
        for r in results:
            same = None
            if reference is None:
                reference = r["matches"]
            else:
                same = r["matches"] == reference
            row = {"round": name, "built": r["built"], "setup_wall_s": round(r["setup_wall_s"], 2),
                   "setup_cpu_s": round(r["setup_cpu_s"], 2),
                   "setup_peak_rss_mb": round(r["after_setup"]["peak_rss_mb"]),
                   "peak_rss_mb": round(r["end"]["peak_rss_mb"]),
                   **{f"end_{k}": round(v) for k, v in r["end"].items() if k != "peak_rss_mb"},
                   "check_cpu_s": round(r["check_cpu_s"], 2), "index_hashes": r["index_hashes"],
                   **scale_summary(r, planted), "same_matches_as_first": same}
            print(json.dumps(row), flush=True)
    first = next(iter(rounds.values()))[0]["matches"]
    print(f"matches that are a real shared n-gram (item and document): "
          f"{verify_matches(first, items, docs)} of {len(first)}", flush=True)
    files = sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []
    print("cache folder after both rounds:", files, sum(p.stat().st_size for p in cache.iterdir()) / 1e6, "MB")


def ab_lookup(args: argparse.Namespace) -> None:
    """The look-up alone, the previous index class against this one, in one process: the same batches
    of `documents`, each batch through both in alternating order, CPU time per side, the same
    matches required. The old class is `text/transform/ngram_index.py` of `--old-ref`, loaded beside this
    one in the package (it calls the same `ngrams` functions, unchanged)."""
    import importlib.util

    import pyarrow as pa

    from ylink_data.io.benchmarks import read_benchmark
    from ylink_data.text.transform.ngram_index import IndexWriter, NgramIndex

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    source = _old_tree(work, args.old_ref) / "ylink_data" / "transform" / "ngram_index.py"
    spec = importlib.util.spec_from_file_location("ylink_data.text.transform.ngram_index_old", source)
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old
    spec.loader.exec_module(old)
    read = [read_benchmark(str(GSM8K), ["question"]), read_benchmark(str(HUMANEVAL), ["prompt"], id_field="task_id")]
    items = [(r.name, r.texts, r.ids) for r in read]
    path = work / "ab-small.ngrams"
    with open(path, "wb") as out:
        writer = IndexWriter(out)
        for name, texts, ids in items:
            writer.add(name, [(texts, ids)])
        writer.finish()
    indexes = {"old": old.NgramIndex.build(items), "new": NgramIndex.open(path)}
    batches, texts = [], []
    for text, _ in documents(args.docs):
        texts.append(text)
        if len(texts) == BATCH:
            batches.append(pa.array(texts, pa.large_string()))
            texts = []
    spent = {"old": 0.0, "new": 0.0}
    for k, batch in enumerate(batches):
        found = {}
        for name in ("old", "new") if k % 2 else ("new", "old"):
            started = time.process_time()
            matches = indexes[name].find(batch)
            spent[name] += time.process_time() - started
            found[name] = [(m.benchmark, m.item, m.ngram) if m else None for m in matches]
        assert found["old"] == found["new"], f"batch {k}: the two indexes disagree"
    docs = len(batches) * BATCH
    print(json.dumps({"docs": docs, "old_cpu_s": round(spent["old"], 2), "new_cpu_s": round(spent["new"], 2),
                      "new_over_old_time": round(spent["new"] / spent["old"], 3), "same_matches": True}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--peer-docs", type=int, default=None, help="datatrove's documents (default: --docs; 0: none)")
    parser.add_argument("--vs-old", action="store_true", help="also the op of --old-ref on the same documents")
    parser.add_argument("--ab-lookup", action="store_true", help="old and new look-up interleaved in one process")
    parser.add_argument("--side", choices=["ylink", "datatrove"])
    parser.add_argument("--scale", action="store_true", help="the million-item index, old against new (issue 23.8)")
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--heldout", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "ylink-bench-decontaminate"))
    parser.add_argument("--old-ref", default=OLD_REF)
    parser.add_argument("--skip-old", action="store_true")
    parser.add_argument("--scale-side", choices=["old", "new"])
    parser.add_argument("--items-path")
    parser.add_argument("--docs-path")
    parser.add_argument("--cache-dir")
    parser.add_argument("--start-at", type=float, default=0.0)
    args = parser.parse_args()
    if args.scale_side:  # a child of the scale mode: one worker, result as JSON on stdout
        print(json.dumps(run_scale_side(args.scale_side, args.items_path, args.docs_path, args.cache_dir,
                                        args.start_at)))
        return
    if args.scale:
        scale_main(args)
        return
    if args.ab_lookup:
        ab_lookup(args)
        return
    if args.side:  # a child: one side, result as JSON on stdout
        print(json.dumps(run_side(args.side, args.docs)))
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sides = [("ylink", args.docs, str(REPO))]
    if args.vs_old:  # the previous implementation, on the same documents, in its own process
        sides.append(("ylink-old", args.docs, str(_old_tree(work, args.old_ref))))
    if args.peer_docs != 0:
        sides.append(("datatrove", args.peer_docs or args.docs, str(REPO)))
    results = {}
    for name, n, pythonpath in sides:
        side = "datatrove" if name == "datatrove" else "ylink"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath,
               "YLINK_DECONTAMINATE_CACHE": str(work / "cache-small")}
        proc = subprocess.run([sys.executable, __file__, "--side", side, "--docs", str(n)], capture_output=True,
                              text=True, check=True, env=env)
        results[name] = summarise(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps({"side": name, **{k: v for k, v in results[name].items()
                                           if k not in ("false_positive_examples", "side")}}), flush=True)
        print("  false positives (first 20):", results[name]["false_positive_examples"], flush=True)
    y = results["ylink"]
    for other in ("ylink-old", "datatrove"):
        if other in results:
            o = results[other]
            print(f"throughput ratio ylink/{other}: {y['docs_per_s'] / o['docs_per_s']:.2f}x; "
                  f"peak RSS {y['peak_rss_mb']:.0f} MB vs {o['peak_rss_mb']:.0f} MB")

if __name__ == "__main__":
    main()
