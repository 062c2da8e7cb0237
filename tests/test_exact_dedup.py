"""exact_dedup across files and Ray tasks on real Reuters articles: the kept documents equal a
brute-force first-occurrence dedup in input order, whether the keys fit one partition or are
spilled into many; normalisation options decide what counts as the same text."""
from __future__ import annotations

import gzip
import json
import re
import unicodedata

import pytest

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
