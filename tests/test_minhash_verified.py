"""minhash_dedup removes only measured near copies of a document it keeps (issue 32), on real text:
no removal through a chain of links, none through shared boilerplate, copies found per source with
`scope: per_source`, and the evidence (dup_of, dup_similarity, stats per source) true to the text."""
from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest

import ylink_data
from ylink_data.text.dedup.minhash import shingles
from ylink_data.engine.stats import check_invariant
from ylink_data.text.transform.units import unit_languages

from .test_gopher import thucnews


def _reuters(shared, n: int, words: int) -> list[str]:
    with gzip.open(shared / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [t for t in (json.loads(line)["text"] for line in f) if len(t.split()) >= words]
    return texts[:n]


def _write(path, texts):
    path.write_text("".join(json.dumps({"text": t, "url": f"doc/{i}"}, ensure_ascii=False) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    return path


def _run(tmp_path, name, paths, **params):
    out, stats = ylink_data.run({"name": name, "input": {"paths": [str(p) for p in paths], "format": "jsonl"},
                                 "output": {"path": str(tmp_path / name), "keep_rejected": True},
                                 "stages": [{"minhash_dedup": params}]}, progress=False)
    assert check_invariant(stats) is None
    return ylink_data.open_run(out), stats


def _jaccard(a: str, b: str) -> float:
    unit_a, unit_b = unit_languages("auto", pa.array([a, b], pa.large_string()), None)
    x, y = set(shingles(a, unit_a)), set(shingles(b, unit_b))
    return len(x & y) / len(x | y)


def _removed(run) -> dict[str, tuple[str, float]]:
    """url -> (url of the kept document named, the similarity stated)."""
    kept = run.to_arrow()
    url_of = dict(zip(kept.column("id").to_pylist(), kept.column("url").to_pylist()))
    rejected = run.rejected()
    return {u: (url_of[d], s) for u, d, s in zip(rejected.column("url").to_pylist(),
                                                rejected.column("dup_of").to_pylist(),
                                                rejected.column("dup_similarity").to_pylist())}


def test_a_chain_of_near_copies_removes_only_copies_of_the_kept_one(shared_data, tmp_path):
    """A (the longest), B and C are overlapping windows of one article: A ~ B and B ~ C reach 0.8,
    A ~ C does not. B goes as a copy of A; C stays, since the one it copies (B) is gone and it is
    not a copy of A. Before verification against the kept document, the chain removed C too."""
    texts, triples = [], []
    for article in _reuters(shared_data, 12, 210):
        w = article.split()
        a, b, c = " ".join(w[0:176]), " ".join(w[15:185]), " ".join(w[30:200])
        if _jaccard(a, b) >= 0.82 and _jaccard(b, c) >= 0.82 and _jaccard(a, c) < 0.78 and len(a) > len(b):
            triples.append((len(texts), len(texts) + 1, len(texts) + 2))
            texts += [a, b, c]
    assert len(triples) >= 6
    run, _ = _run(tmp_path, "chain", [_write(tmp_path / "chain.jsonl", texts)])
    removed = _removed(run)
    for url, (kept, similarity) in removed.items():
        i, k = int(url.split("/")[1]), int(kept.split("/")[1])
        assert similarity == pytest.approx(_jaccard(texts[i], texts[k])) and similarity >= 0.8
    chained = [(a, b, c) for a, b, c in triples if removed.get(f"doc/{b}", ("",))[0] == f"doc/{a}"]
    assert len(chained) >= len(triples) // 2, (removed, triples)  # LSH finds most A ~ B pairs
    assert all(f"doc/{c}" not in removed for _, _, c in chained)


def test_shared_boilerplate_removes_no_distinct_document(shared_data, tmp_path):
    """Forty different short Chinese leads ending in the same 100-character footer (as reviews of one
    site do): any two share ~55% of their shingles, and some share an LSH bucket. The default
    removes none of them; `verify: false` (removal on a shared bucket alone) does remove some."""
    articles = [t for t in thucnews(shared_data) if len(t) >= 300]
    footer = articles[0][:100]
    texts = [a[:40] + footer for a in articles[1:41]]
    assert max(_jaccard(texts[0], t) for t in texts[1:]) < 0.7
    path = _write(tmp_path / "reviews.jsonl", texts)
    verified, stats = _run(tmp_path, "verified", [path])
    assert verified.to_arrow().num_rows == len(texts)
    loose, _ = _run(tmp_path, "loose", [path], verify=False)
    gone = loose.rejected()
    assert gone.num_rows >= 1  # 780 pairs at J ~0.55: about 12% share one of 16 buckets
    assert gone.column("dup_similarity").null_count == gone.num_rows  # nothing was measured


def test_per_source_scope_and_the_evidence_per_source(shared_data, tmp_path):
    """The same articles in two files, with an edited copy inside the first: globally the second
    file is wiped out (and stats say so per source); with `scope: per_source` each file keeps its
    own, and only the copy within the first file goes."""
    base = _reuters(shared_data, 30, 120)
    edited = base[3].replace(" the ", " a ", 2)
    one = _write(tmp_path / "one.jsonl", base + [edited])
    two = _write(tmp_path / "two.jsonl", base)
    run, stats = _run(tmp_path, "global", [one, two])
    breakdowns = next(s for s in stats["stages"] if s["name"] == "minhash_dedup")["breakdowns"]
    assert breakdowns["in_by_source"] == {str(one): len(base) + 1, str(two): len(base)}
    # Each of the 30 texts once: the first file's copies are kept (input order breaks the length tie).
    assert breakdowns["removed_by_source"].get(str(two)) == len(base)
    assert sum(breakdowns["similarity"].values()) == sum(breakdowns["removed_by_source"].values())
    assert breakdowns["similarity"]["1.00"] >= len(base) - 1  # exact copies across files
    per_source, stats = _run(tmp_path, "per-source", [one, two], scope="per_source")
    sources = per_source.rejected().column("source").to_pylist()
    assert sources == [str(one)]  # the one edited copy, inside its own file
    kept = per_source.to_arrow().column("source").to_pylist()
    assert kept.count(str(two)) == len(base)
