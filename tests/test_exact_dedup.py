"""exact_dedup across files and Ray tasks on real Reuters articles: the kept documents equal a
brute-force first-occurrence dedup in input order, whether the keys fit one partition or are
spilled into many; normalisation options decide what counts as the same text."""
from __future__ import annotations

import gzip
import json
import re
import unicodedata

import pytest

from .conftest import TEST_DATA

import ylink_data
from ylink_data.engine.stats import check_invariant


def _reuters(shared, n: int) -> list[str]:
    path = shared / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for _, line in zip(range(n), f)]


def _corpus(shared, tmp_path) -> list[list[str]]:
    """Four files: 300 real articles, then copies of some of them in later files (and one earlier
    file), verbatim, with changed whitespace, in upper case, and in full-width (NFKC-equal) digits."""
    articles = _reuters(shared, 300)
    files = [articles[:100], articles[100:200], articles[200:300], []]
    for i in range(0, 300, 7):
        files[3].append(articles[i])                                   # verbatim copies
    for i in range(1, 300, 11):
        files[(i // 100 + 1) % 4].append(re.sub(r"\s+", "  \n ", articles[i]))  # whitespace changed
    for i in range(2, 300, 13):
        files[3].append(articles[i].upper())                           # case changed
    for i in range(3, 300, 17):
        files[0].append(articles[i].translate(str.maketrans("0123456789", "０１２３４５６７８９")))
    for k, docs in enumerate(files):
        (tmp_path / f"part-{k}.jsonl").write_text(
            "".join(json.dumps({"text": t, "url": f"https://reuters.test/{k}/{j}"}) + "\n" for j, t in enumerate(docs)),
            encoding="utf-8")
    return files


def _expected(files: list[list[str]], lowercase: bool, nfkc: bool) -> list[str]:
    """Brute force: the urls of first occurrences in input order (file, then line)."""
    seen, kept = set(), []
    for k, docs in enumerate(files):
        for j, text in enumerate(docs):
            key = unicodedata.normalize("NFKC", text) if nfkc else text
            key = key.lower() if lowercase else key
            key = re.sub(r"\s+", " ", key).strip()
            if key not in seen:
                seen.add(key)
                kept.append(f"https://reuters.test/{k}/{j}")
    return kept


@pytest.mark.parametrize("lowercase,nfkc", [(False, False), (True, True)])
def test_dedup_across_files_and_tasks_equals_brute_force_with_and_without_spilling(
        ray_session, shared_data, tmp_path, capfd, lowercase, nfkc):
    files = _corpus(shared_data, tmp_path)
    expected = _expected(files, lowercase, nfkc)
    total = sum(map(len, files))
    assert total - len(expected) > 40  # there is something to find
    results = {}
    for label, rows_per_partition in (("one partition", 10_000_000), ("spilled", 40)):
        out_dir = tmp_path / f"out-{label.replace(' ', '-')}-{lowercase}"
        out, stats = ylink_data.run(
            {"name": "dedup", "input": {"paths": [str(tmp_path / "part-*.jsonl")], "format": "jsonl",
                                         "split_bytes": 64 * 1024},   # several tasks per file
             "output": {"path": str(out_dir), "keep_rejected": True},
             "stages": [{"exact_dedup": {"lowercase": lowercase, "unicode_nfkc": nfkc,
                                         "rows_per_partition": rows_per_partition}}]}, progress=False)
        assert check_invariant(stats) is None
        log = capfd.readouterr().err
        assert re.search(r"read → exact_dedup keys: ([2-9]|\d\d)/", log)         # several map tasks
        found = re.search(r"exact_dedup: find repeats: (\d+)/", log)
        assert found and int(found.group(1)) >= 2, log                          # every CPU has work
        if label == "spilled":                                                  # more partitions than CPUs
            assert int(found.group(1)) > 2 * int(ray_session.cluster_resources()["CPU"]), log
        run = ylink_data.open_run(out)
        kept = run.to_arrow().column("url").to_pylist()
        assert sorted(kept) == sorted(expected), label
        stage = next(s for s in stats["stages"] if s["name"] == "exact_dedup")
        assert stage["dropped"] == {"exact_dedup": total - len(expected)}
        assert set(run.rejected().column("reason").to_pylist()) == {"exact_dedup"}
        results[label] = sorted(kept)
    assert results["one partition"] == results["spilled"]


# ----------------------------------------------------------------------------- empty keys and evidence

# Every shape a key can take in JSONL: absent, null, "", blank, a value, the value with other
# whitespace, the value in upper case.
KEY_SHAPES = {
    "absent": lambda v: {},
    "null": lambda v: {"url": None},
    "empty": lambda v: {"url": ""},
    "blank": lambda v: {"url": " \t\n "},
    "value": lambda v: {"url": v},
    "spaced": lambda v: {"url": f"  {v} \n"},
    "upper": lambda v: {"url": v.upper()},
}


def _key_corpus(tmp_path, rng) -> list[dict]:
    """Real Common Crawl documents (bundled), each row given a key of a random shape made of one of
    three real URLs; the row number leads the text, which is unique."""
    with gzip.open(TEST_DATA / "cc_en_head-0174.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    urls = [d["metadata"]["url"] for d in docs[:3]]
    rows = []
    for i in range(140):
        shape = rng.choice(list(KEY_SHAPES))
        rows.append({"text": f"{i} {docs[i % len(docs)]['text'][:400]}", **KEY_SHAPES[shape](rng.choice(urls))})
    for k in range(2):  # two files, several tasks: copies across files and tasks
        (tmp_path / f"keys-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[k * 70:(k + 1) * 70]),
                                                  encoding="utf-8")
    return rows


def _brute_force(rows: list[dict], empty_keys: str, lowercase: bool, collapse: bool) -> dict[int, int | None]:
    """Row -> the row it copies (None: kept), written independently of the op: first occurrence of
    each normalised key in input order; empty keys copy nothing unless `empty_keys: duplicate`."""
    first: dict[str, int] = {}
    out: dict[int, int | None] = {}
    for i, row in enumerate(rows):
        key = row.get("url") or ""
        key = re.sub(r"\s+", " ", key).strip() if collapse else key
        key = key.lower() if lowercase else key
        if key == "" and empty_keys == "distinct":
            out[i] = None
            continue
        out[i] = first.get(key)
        first.setdefault(key, i)
    return out


@pytest.mark.parametrize("empty_keys,lowercase,collapse", [("distinct", False, True), ("duplicate", False, True),
                                                           ("distinct", True, False), ("duplicate", True, True)])
def test_empty_keys_and_dup_of_over_every_key_shape(tmp_path, empty_keys, lowercase, collapse):
    """A sweep over key shapes (issue 39 point 5, issue 42 point 4): null and empty keys are kept
    unless `empty_keys: duplicate`, and every removal names the first copy it repeats (`dup_of`)."""
    import random

    rows = _key_corpus(tmp_path, random.Random(f"{empty_keys}{lowercase}{collapse}"))
    expected = _brute_force(rows, empty_keys, lowercase, collapse)
    assert sum(v is None for v in expected.values()) < len(rows) - 20  # there is something to find
    assert empty_keys == "duplicate" or sum(not (r.get("url") or "").strip() for r in rows) > 20  # many empty keys
    out, stats = ylink_data.run(
        {"name": "keys", "input": {"paths": [str(tmp_path / "keys-*.jsonl")], "format": "jsonl", "split_bytes": 8192},
         "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
         "stages": [{"exact_dedup": {"column": "url", "empty_keys": empty_keys, "lowercase": lowercase,
                                     "collapse_whitespace": collapse, "rows_per_partition": 16}}],
         "ray": {"execution": "processes", "num_cpus": 2}}, progress=False)
    assert check_invariant(stats) is None
    run = ylink_data.open_run(out)
    kept, rejected = run.to_arrow(), run.rejected()
    row_of = {i: int(t.split(" ", 1)[0]) for table in (kept, rejected)
              for i, t in zip(table.column("id").to_pylist(), table.column("text").to_pylist())}
    got = {row_of[i]: None for i in kept.column("id").to_pylist()}
    got.update({row_of[i]: row_of[d] for i, d in zip(rejected.column("id").to_pylist(),
                                                      rejected.column("dup_of").to_pylist())})
    assert got == expected
    assert set(rejected.column("dup_similarity").to_pylist()) <= {1.0}
    stage = next(s for s in stats["stages"] if s["name"] == "exact_dedup")
    assert sum(stage["breakdowns"]["removed_by_source"].values()) == rejected.num_rows
