"""Issue 35, point 3: a finished run folder is a dataset that standard tools read. Its README.md (a
Hugging Face dataset card) makes `datasets.load_dataset(RUN)` return exactly the kept documents and
`load_dataset(RUN, "rejected")` the dropped ones, also when the stages' rejected files differ in
columns (minhash_dedup's carry `dup_of`); pandas and pyarrow read the kept shards from RUN/data.
Expectations come from the run's own files (manifest, rejected/ Parquet), read with pyarrow."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas
import pyarrow.dataset
import pyarrow.parquet as pq
import pytest
import yaml

import ylink_data

from .conftest import REPO

CC_HEAD = REPO / "tests" / "data" / "cc_en_head-0174.jsonl.gz"  # 10 real Common Crawl pages (tests/data/SOURCE.md)


def _corpus(path: Path) -> None:
    """The real pages, a near copy of the longest (one sentence added: minhash_dedup drops it with
    dup_of) and each page's first line alone (too short for gopher_quality: dropped, no dup_of)."""
    pages = [json.loads(line) for line in gzip.open(CC_HEAD, "rt")]
    rows = [{"text": p["text"], "url": p["id"]} for p in pages]
    longest = max(pages, key=lambda p: len(p["text"]))
    rows.append({"text": longest["text"] + "\nThis page was copied.", "url": longest["id"] + "?copy"})
    rows += [{"text": p["text"].split("\n", 1)[0], "url": p["id"] + "#first-line"} for p in pages[:3]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("card")
    _corpus(tmp / "pages.jsonl")
    out = tmp / "run"
    ylink_data.run({"name": "card-test", "input": {"paths": [str(tmp / "pages.jsonl")]},
                    "output": {"path": str(out), "keep_rejected": True},
                    "stages": [{"langid": {}}, {"gopher_quality": {}}, {"minhash_dedup": {"threshold": 0.8}}]})
    return out


def _ids(table) -> list[str]:
    return sorted(table.column("id").to_pylist())


def test_load_dataset_gives_exactly_the_kept_documents_and_rejected_as_a_second_config(run, tmp_path):
    import datasets

    manifest = json.loads((run / "manifest.json").read_text())
    kept = pyarrow.concat_tables([pq.read_table(run / s["path"]) for s in manifest["shards"]])
    rejected_files = sorted((run / "rejected").glob("*.parquet"))
    rejected = [pq.read_table(f) for f in rejected_files]
    assert [f"rejected/{f.name}" for f in rejected_files] == [f["path"] for f in manifest["rejected"]["files"]]
    # one schema for every stage's drops: gopher_quality's rows hold minhash_dedup's evidence, null
    assert len(rejected_files) == 2 and rejected[0].schema == rejected[1].schema
    assert {"dup_of", "dup_similarity"} <= set(rejected[0].column_names)
    assert rejected[0].column("dup_of").null_count == len(rejected[0])

    loaded = datasets.load_dataset(str(run), cache_dir=str(tmp_path / "hf"))
    assert list(loaded) == ["train"]
    assert sorted(loaded["train"]["id"]) == _ids(kept) and len(kept) > 0
    assert sorted(loaded["train"]["text"]) == sorted(kept.column("text").to_pylist())

    dropped = datasets.load_dataset(str(run), "rejected", cache_dir=str(tmp_path / "hf"))["train"]
    assert sorted(dropped["id"]) == sorted(i for t in rejected for i in t.column("id").to_pylist())
    reasons = set(dropped["reason"])
    assert any(r.startswith("gopher_quality:") for r in reasons) and "minhash_dedup" in reasons
    # one of the longest page and its near copy (the corpus's one such pair), with the other it copies
    copies = [row for row in dropped if row["reason"] == "minhash_dedup"]
    pair = {row["url"]: row["id"] for row in kept.select(["url", "id"]).to_pylist() + copies
            if row["url"].removesuffix("?copy") == copies[0]["url"].removesuffix("?copy")}
    assert len(copies) == 1 and len(pair) == 2 and copies[0]["dup_of"] == (set(pair.values()) - {copies[0]["id"]}).pop()
    assert 0.8 <= copies[0]["dup_similarity"] <= 1


def test_the_card_says_language_size_and_how_the_data_was_made(run):
    card = (run / "README.md").read_text()
    front = yaml.safe_load(card.split("---\n")[1])
    kept = pyarrow.dataset.dataset(run / "data").to_table()
    assert front["language"] == sorted(set(kept.column("lang").to_pylist())) == ["en"]
    assert front["size_categories"] == ["n<1K"] and front["license"]
    stats = json.loads((run / "stats.json").read_text())
    for stage in stats["stages"]:  # the accounting, stage by stage
        assert f"| {stage['name']} | {stage['in']:,} | {stage['out']:,} |" in card
    for column in kept.column_names:  # every column is explained
        assert f"| `{column}` |" in card
    assert "- minhash_dedup:\n    threshold: 0.8" in card  # the pipeline, with its parameters


def test_pandas_and_pyarrow_read_the_kept_shards(run):
    kept = ylink_data.open_run(str(run)).to_arrow()
    assert sorted(pandas.read_parquet(run / "data")["id"]) == _ids(kept)
    assert _ids(pyarrow.dataset.dataset(run / "data").to_table()) == _ids(kept)


def test_a_rerun_finds_the_run_complete_and_its_card_not_foreign(run):
    """README.md is the run's own entry: a rerun of the same pipeline does not refuse the folder as
    one holding files that are not a ylink run."""
    config = json.loads((run / "run.json").read_text())["config"]
    path, stats = ylink_data.run(config)
    assert Path(path) == run and stats == json.loads((run / "stats.json").read_text())


def test_the_card_is_the_same_wherever_the_run_was_written(run, tmp_path):
    """Run folders compare byte for byte across execution ways and machines (tests/test_execution.py,
    tests/test_cluster_node_loss.py): the card names no folder of its own."""
    config = json.loads((run / "run.json").read_text())["config"]
    config["output"]["path"] = str(tmp_path / "elsewhere")
    ylink_data.run(config)
    assert (tmp_path / "elsewhere" / "README.md").read_bytes() == (run / "README.md").read_bytes()


def test_each_tier_folder_is_a_dataset_of_its_own_documents(tmp_path):
    """quality_classifier tiers write tiers/<tier>/ as runs of their own for readers: each holds a
    card, and load_dataset(tier folder) gives exactly the shards its manifest lists."""
    import datasets

    _corpus(tmp_path / "pages.jsonl")
    out = tmp_path / "tiered"
    ylink_data.run({"name": "tiered", "input": {"paths": [str(tmp_path / "pages.jsonl")]},
                    "output": {"path": str(out)},
                    "stages": [{"langid": {}}, {"quality_classifier": {"tiers": {"high": 0.5, "low": 0.0}}}]})
    manifest = json.loads((out / "manifest.json").read_text())
    assert sum(t["rows"] for t in manifest["tiers"].values()) == manifest["rows"] > 0
    for tier in manifest["tiers"]:
        folder = out / "tiers" / tier
        listed = json.loads((folder / "manifest.json").read_text())["shards"]
        expected = sorted(i for s in listed for i in pq.read_table(folder / s["path"]).column("id").to_pylist())
        assert expected, tier  # both tiers hold pages of this corpus (6 and 8 with the bundled models)
        loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf"))["train"]
        assert sorted(loaded["id"]) == expected, tier
        assert f"{len(expected):,} documents kept" in (folder / "README.md").read_text()


# Runs that keep nothing, whole or in one tier (issue 39, point 22): a card whose default config named
# no file made `load_dataset` raise. Generated from how much each stage lets through.
EMPTY = {
    "every document dropped": [{"langid": {}}, {"gopher_quality": {"min_doc_words": 10_000_000}}],
    "every document dropped after a dedup": [{"gopher_quality": {"min_doc_words": 10_000_000}},
                                             {"minhash_dedup": {"threshold": 0.8}}],
    "one tier empty": [{"langid": {}}, {"quality_classifier": {"tiers": {"high": 1.0, "low": 0.0}}}],
}


@pytest.mark.parametrize("stages", list(EMPTY.values()), ids=list(EMPTY))
def test_a_run_or_tier_that_keeps_nothing_is_still_a_dataset(tmp_path, stages):
    """Every folder of the run with a card loads with `datasets` to exactly its manifest's rows (none,
    where it kept nothing: one shard of no rows), with the run's columns, as its card says to load it;
    pandas and pyarrow read its data/ alike. (`datasets` loads a split of no rows only streaming: it
    refuses one otherwise, "corresponds to no data", huggingface/datasets#8401.)"""
    import datasets

    _corpus(tmp_path / "pages.jsonl")
    out = tmp_path / "run"
    ylink_data.run({"name": "empty", "input": {"paths": [str(tmp_path / "pages.jsonl")]},
                    "output": {"path": str(out), "keep_rejected": True}, "stages": stages}, progress=False)
    folders = [out] + [out / t["path"] for t in json.loads((out / "manifest.json").read_text()).get("tiers", {}).values()]
    empty = 0
    for folder in folders:
        manifest = json.loads((folder / "manifest.json").read_text())
        ids = sorted(i for s in manifest["shards"] for i in pq.read_table(folder / s["path"]).column("id").to_pylist())
        assert len(ids) == manifest["rows"] and manifest["shards"]
        streaming = not ids
        assert ("load_dataset(RUN, streaming=True)" in (folder / "README.md").read_text()) == streaming
        loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf"), streaming=streaming)["train"]
        assert sorted(row["id"] for row in loaded) == ids
        assert {"id", "text", "url", "source"} <= set(loaded.features)
        data = sorted({(folder / s["path"]).parent for s in manifest["shards"]})  # data/, or each tier's
        assert sum(len(pandas.read_parquet(d)) for d in data) == len(ids)
        assert sum(pyarrow.dataset.dataset(d).count_rows() for d in data) == len(ids)
        empty += not ids
    assert empty >= 1
    rejected = json.loads((out / "manifest.json").read_text())["rejected"]["rows"]
    if rejected:  # the drops, of every stage, with every column
        dropped = datasets.load_dataset(str(out), "rejected", cache_dir=str(tmp_path / "hf"))["train"]
        assert len(dropped) == rejected
