"""minhash_dedup end to end on real text: edited copies of Reuters and THUCNews articles (and
Reuters' own repeated wire stories) found against exact Jaccard computed by brute force; the same
result with one partition and many; connected components out of core equal union-find."""
from __future__ import annotations

import gzip
import json
import random
from itertools import combinations

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ylink_data
from ylink_data.text.dedup.components import connected_components, write_edges
from ylink_data.text.dedup.keep import boilerplate_counts
from ylink_data.text.dedup.minhash import shingles
from ylink_data.engine.stats import check_invariant
from ylink_data.text.transform.units import unit_languages

from .test_gopher import thucnews


def _edit(text: str, rng: random.Random, unit: str) -> str:
    """A near-copy: two pairs of words (or characters) deleted."""
    parts = text.split() if unit == "word" else list(text)
    for _ in range(2):
        i = rng.randrange(len(parts))
        del parts[i:i + 2]
    return (" " if unit == "word" else "").join(parts)


def _corpus(shared, n: int = 300) -> tuple[list[str], list[str]]:
    rng = random.Random(7)
    with gzip.open(shared / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        en = [t for t in (json.loads(line)["text"] for line in f) if len(t.split()) >= 80][:n]
    zh = [t for t in thucnews(shared) if len(t) >= 300][:n]
    texts = en + zh
    langs = ["en"] * len(en) + ["zh"] * len(zh)
    for i in range(0, len(en), 9):
        texts.append(_edit(en[i], rng, "word"))
        langs.append("en")
    for i in range(0, len(zh), 9):
        texts.append(_edit(zh[i], rng, "char"))
        langs.append("zh")
    return texts, langs


def _op_units(texts):
    """The shingle unit the op gives each text when it has no `lang` column (JSONL input): by script."""
    return unit_languages("auto", pa.array(texts, pa.large_string()), None)


def _jaccard_pairs(texts, langs, threshold):
    """Every pair at exact Jaccard >= threshold, with its Jaccard, and the shingle sets, cut as the op
    cuts them (`langs` are the units: `_op_units`)."""
    sets = [set(shingles(t, lang)) for t, lang in zip(texts, langs)]
    pairs = {}
    for i, j in combinations(range(len(texts)), 2):
        if langs[i] == langs[j] and sets[i]:
            jac = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
            if jac >= threshold:
                pairs[(i, j)] = jac
    return pairs, sets


def test_finds_near_duplicates_like_brute_force_jaccard(ray_session, shared_data, tmp_path):
    texts, langs = _corpus(shared_data)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t, "lang": lang, "url": f"doc/{i}"}, ensure_ascii=False) + "\n"
                            for i, (t, lang) in enumerate(zip(texts, langs))), encoding="utf-8")
    pairs, sets = _jaccard_pairs(texts, _op_units(texts), 0.8)
    lines = boilerplate_counts(texts, _op_units(texts))
    assert len(pairs) >= 60  # the edited copies, and Reuters' own repeats
    kept_by = {}
    # 10M: the verified pairs are decided in one task; 40 (fewer than the pairs): per connected
    # component, out of core
    for label, rows_per_partition in (("one partition", 10_000_000), ("many", 40)):
        out, stats = ylink_data.run(
            {"name": "mh", "input": {"paths": [str(path)], "format": "jsonl", "split_bytes": 200_000},
             "output": {"path": str(tmp_path / f"out-{rows_per_partition}"), "keep_rejected": True},
             "stages": [{"minhash_dedup": {"threshold": 0.8, "cluster_columns": True,
                                           "rows_per_partition": rows_per_partition}}]}, progress=False)
        assert check_invariant(stats) is None
        run = ylink_data.open_run(out)
        kept = {int(u.split("/")[1]) for u in run.to_arrow().column("url").to_pylist()}
        dropped = {int(u.split("/")[1]) for u in run.rejected().column("url").to_pylist()}
        assert kept | dropped == set(range(len(texts))) and not kept & dropped
        # recall: LSH finds a pair with a probability that rises steeply around the threshold
        # (bands x rows chosen by datasketch's optimal_param), so well above it nearly always
        missed = {(i, j): jac for (i, j), jac in pairs.items() if i in kept and j in kept}
        high = [p for p, jac in pairs.items() if jac >= 0.9]
        assert sum(missed.get(p, 0) >= 0.9 for p in high) <= 0.02 * len(high), missed
        assert len(missed) <= 0.25 * len(pairs), missed
        # precision: every dropped document names a kept one, at the exact Jaccard (brute force) it states
        rejected = run.rejected()
        position = {i: int(u.split("/")[1]) for i, u in zip(run.to_arrow().column("id").to_pylist(),
                                                             run.to_arrow().column("url").to_pylist())}
        for url, dup_of, similarity in zip(rejected.column("url").to_pylist(), rejected.column("dup_of").to_pylist(),
                                           rejected.column("dup_similarity").to_pylist()):
            i, k = int(url.split("/")[1]), position[dup_of]
            exact = len(sets[i] & sets[k]) / len(sets[i] | sets[k])
            assert exact >= 0.8 and similarity == pytest.approx(exact, abs=1e-12), (i, k, exact, similarity)
            # the copy with the fewest boilerplate lines is kept, then the longest (keep's default)
            assert (lines[k], -len(texts[k])) <= (lines[i], -len(texts[i])), (i, k)
        # cluster columns name the kept document, on it and on its copies
        table = run.to_arrow()
        clustered = [(u, c, s) for u, c, s in zip(table.column("url").to_pylist(),
                     table.column("dup_cluster_id").to_pylist(), table.column("dup_cluster_size").to_pylist()) if s]
        assert all(s >= 2 for _, _, s in clustered)
        ids = dict(zip(table.column("url").to_pylist(), table.column("id").to_pylist()))
        assert all(c == ids[u] for u, c, _ in clustered)  # a kept document keeps its own cluster
        assert rejected.column("dup_cluster_id").to_pylist() == rejected.column("dup_of").to_pylist()
        sizes = dict(zip(table.column("id").to_pylist(), table.column("dup_cluster_size").to_pylist()))
        assert all(sizes[c] == s for c, s in zip(rejected.column("dup_cluster_id").to_pylist(),
                                                 rejected.column("dup_cluster_size").to_pylist()))
        assert "dup_of" not in table.column_names  # evidence goes to rejected/ only
        kept_by[label] = kept
        zh_edits = [i for i in dropped if langs[i] == "zh"]
        assert len(zh_edits) >= 30  # Chinese copies are found too (character shingles)
    assert kept_by["one partition"] == kept_by["many"]


def test_connected_components_out_of_core_equal_union_find(tmp_path):
    rng = random.Random(3)
    n = 5000
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(3500)]
    edges += [(i, i + 1) for i in range(100, 400)]  # a long chain: many rounds of stars
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for v in range(n):
        groups.setdefault(find(v), []).append(v)
    expected = {v: min(g) for g in groups.values() if len(g) > 1 for v in g}
    fs = fsspec.filesystem("file")
    x = np.array([a for a, b in edges if a != b], np.int64)
    y = np.array([b for a, b in edges if a != b], np.int64)
    write_edges(fs, str(tmp_path / "edges-0"), 0, x, y, 5)
    files = connected_components(fs, str(tmp_path), 5, lambda fn, args, label: [fn(*a) for a in args])
    got = {}
    for path in files:
        table = pq.read_table(path)
        got.update(zip(table.column("node").to_pylist(), table.column("label").to_pylist()))
    assert got == expected


@pytest.mark.parametrize("keep", ["longest"])
def test_keep_longest(ray_session, shared_data, tmp_path, keep):
    base = thucnews(shared_data)[5]
    shorter = base[:-40]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": t, "lang": "zh", "url": f"doc/{i}"}, ensure_ascii=False) + "\n"
                            for i, t in enumerate([shorter, base])), encoding="utf-8")
    out, _ = ylink_data.run({"name": "k", "input": {"paths": [str(path)]}, "output": {"path": str(tmp_path / "o")},
                             "stages": [{"minhash_dedup": {"keep": keep}}]}, progress=False)
    assert ylink_data.open_run(out).to_arrow().column("url").to_pylist() == ["doc/1"]


def _write_jsonl(path, texts, langs, start=0):
    path.write_text("".join(json.dumps({"text": t, "lang": lang, "url": f"doc/{start + i}"}, ensure_ascii=False) + "\n"
                            for i, (t, lang) in enumerate(zip(texts, langs))), encoding="utf-8")


def _run(tmp_path, name, path, **params):
    out, stats = ylink_data.run({"name": name, "input": {"paths": [str(path)], "format": "jsonl", "split_bytes": 100_000},
                                 "output": {"path": str(tmp_path / name), "keep_rejected": True},
                                 "stages": [{"minhash_dedup": params}]}, progress=False)
    assert check_invariant(stats) is None
    return ylink_data.open_run(out)


def test_verify_keeps_only_pairs_above_the_threshold(ray_session, shared_data, tmp_path):
    texts, langs = _corpus(shared_data, 120)
    path = tmp_path / "docs.jsonl"
    _write_jsonl(path, texts, langs)
    sets = [set(shingles(t, lang)) for t, lang in zip(texts, langs)]
    plain = _run(tmp_path, "plain", path, threshold=0.8, rows_per_partition=300)
    verified = _run(tmp_path, "verified", path, threshold=0.8, verify=True, rows_per_partition=300)
    dropped = {int(u.split("/")[1]) for u in verified.rejected().column("url").to_pylist()}
    plain_dropped = {int(u.split("/")[1]) for u in plain.rejected().column("url").to_pylist()}
    assert dropped and dropped <= plain_dropped
    # each verified drop was linked by a pair whose exact Jaccard reached the threshold
    for i in dropped:
        best = max(len(sets[i] & sets[j]) / len(sets[i] | sets[j]) for j in range(len(texts)) if j != i and sets[j])
        assert best >= 0.8, (i, best)


def test_incremental_dedup_against_a_saved_index(ray_session, shared_data, tmp_path):
    texts, langs = _corpus(shared_data, 120)
    n = len(texts) - len(range(0, 120, 9)) * 2           # the originals; the edited copies follow
    first, later = tmp_path / "snapshot-1.jsonl", tmp_path / "snapshot-2.jsonl"
    _write_jsonl(first, texts[:n], langs[:n])
    fresh = [t for t in thucnews(shared_data)[400:430] if len(t) >= 300]
    _write_jsonl(later, texts[n:] + fresh, langs[n:] + ["zh"] * len(fresh), start=n)
    index = tmp_path / "index"
    one = _run(tmp_path, "one", first, save_index=str(index))
    kept_one = one.to_arrow()
    meta = json.loads((index / "index.json").read_text())
    assert meta["documents"] == kept_one.num_rows and meta["bands"] * meta["rows"] <= meta["num_perm"]
    two = _run(tmp_path, "two", later, index=str(index), cluster_columns=True, save_index=str(tmp_path / "index-2"))
    dropped = two.rejected()
    copies = set(range(n, len(texts)))
    gone = {int(u.split("/")[1]) for u in dropped.column("url").to_pylist()}
    sets = [set(shingles(t, unit)) for t, unit in zip(texts, _op_units(texts))]
    indexed = {int(u.split("/")[1]): i for u, i in zip(kept_one.column("url").to_pylist(),
                                                        kept_one.column("id").to_pylist())}
    def jaccard(a, b):
        return len(sets[a] & sets[b]) / len(sets[a] | sets[b])
    similar = {c for c in copies if max(jaccard(c, j) for j in indexed) >= 0.9}
    assert len(similar) >= 0.7 * len(copies)
    assert similar <= gone                                    # copies of indexed documents are dropped
    # every removal names an indexed document (kept before), verified against it
    position = {i: p for p, i in indexed.items()}
    for url, dup_of, similarity in zip(dropped.column("url").to_pylist(), dropped.column("dup_of").to_pylist(),
                                       dropped.column("dup_similarity").to_pylist()):
        c = int(url.split("/")[1])
        assert jaccard(c, position[dup_of]) >= 0.8 and similarity == pytest.approx(jaccard(c, position[dup_of]))
    kept_two = two.to_arrow()
    assert len(fresh) - 1 <= sum(int(u.split("/")[1]) >= len(texts) for u in kept_two.column("url").to_pylist())
    assert dropped.column("dup_cluster_id").to_pylist() == dropped.column("dup_of").to_pylist()
    meta2 = json.loads((tmp_path / "index-2" / "index.json").read_text())
    assert meta2["documents"] == kept_one.num_rows + kept_two.num_rows
    with pytest.raises(ylink_data.core.errors.InputError, match="was built with num_perm=128 .this op: 64."):
        _run(tmp_path, "three", later, index=str(index), num_perm=64)
    # an index file changed since it was saved (same size, bytes flipped) is refused, not trusted
    key_file = next(index.glob("keys-*.parquet"))
    data = bytearray(key_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    key_file.write_bytes(bytes(data))
    with pytest.raises(ylink_data.core.errors.InputError, match=r"keys-.*\.parquet does not match the sha256"):
        _run(tmp_path, "four", later, index=str(index))


def test_near_duplicates_in_memory_matches_the_op(ray_session, shared_data, tmp_path):
    """The notebook function and the pipeline op find the same clusters."""
    from ylink_data.text.dedup import near_duplicates

    texts, langs = _corpus(shared_data, 80)
    labels = near_duplicates(texts)
    path = tmp_path / "docs.jsonl"
    _write_jsonl(path, texts, [None] * len(texts))
    run = _run(tmp_path, "op", path, rows_per_partition=200)
    dropped = {int(u.split("/")[1]) for u in run.rejected().column("url").to_pylist()}
    assert dropped == {i for i, label in enumerate(labels) if label != i}
    assert len(dropped) >= 15
