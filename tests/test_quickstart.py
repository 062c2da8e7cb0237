"""The quickstart end to end on the bundled real crawl: manifest, stats, accounting, stable ids."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import ylink_data
from ylink_data.core.errors import RunStateError
from ylink_data.engine.stats import check_invariant

from .conftest import QUICKSTART, REPO, quickstart_config

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def quickstart_run(ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("qs") / "run"
    path, stats = ylink_data.run(quickstart_config(out))
    return out, stats


def test_manifest_and_stats_are_complete(quickstart_run):
    out, stats = quickstart_run
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = json.loads((out / "stats.json").read_text())
    assert on_disk == stats
    assert manifest["version"] == 1 and manifest["shards"]
    assert sum(s["rows"] for s in manifest["shards"]) == stats["output_records"] > 50
    for shard in manifest["shards"]:
        data = (out / shard["path"]).read_bytes()
        assert len(data) == shard["bytes"]
        assert hashlib.sha256(data).hexdigest() == shard["sha256"]
        assert pq.ParquetFile(out / shard["path"]).metadata.num_rows == shard["rows"]
    # once the run is complete, _work/ holds only the reuse files: the phases that end in a global op
    # (exact_dedup, minhash_dedup), never the final phase's parts nor the publish markers (engine/reuse.py)
    assert sorted(p.name for p in (out / "_work").iterdir()) == ["phase0", "phase1"]


def test_accounting_invariant_holds(quickstart_run):
    _, stats = quickstart_run
    assert check_invariant(stats) is None
    dropped = sum(sum(s["dropped"].values()) for s in stats["stages"])
    assert stats["input_records"] == stats["output_records"] + dropped + stats["quarantined"]
    names = [s["name"] for s in stats["stages"]]
    assert names == ["read", "extract", "normalize", "langid", "url_filter", "gopher_quality", "exact_dedup",
                     "minhash_dedup", "quality_classifier"]
    read = stats["stages"][0]
    # WARC requests, metadata and warcinfo records are accounted for, not silently skipped.
    assert read["dropped"]["warc_request"] > 0 and read["dropped"]["warc_metadata"] > 0
    for before, after in zip(stats["stages"], stats["stages"][1:]):
        assert after["in"] == before["out"]
        assert after["bytes_in"] == before["bytes_out"]  # text bytes flow from stage to stage
    assert read["bytes_in"] == stats["input_bytes"] > 0 and read["bytes_out"] > 0  # compressed in, text out
    extract = stats["stages"][1]
    assert extract["bytes_out"] < extract["bytes_in"] / 2  # HTML in, main text out
    for stage in stats["stages"][2:]:
        if stage["name"] != "normalize":  # filters drop whole documents: never more bytes out
            assert stage["bytes_out"] <= stage["bytes_in"]


def test_bytes_out_of_the_last_stage_are_the_kept_text(quickstart_run):
    out, stats = quickstart_run
    texts = ylink_data.open_run(str(out)).to_arrow().column("text").to_pylist()
    assert stats["stages"][-1]["bytes_out"] == sum(len(t.encode()) for t in texts)


def test_documents_follow_the_schema_with_english_and_chinese(quickstart_run):
    out, stats = quickstart_run
    table = ylink_data.open_run(str(out)).to_arrow()
    for column in ("id", "text", "url", "source", "lang", "lang_score", "metadata"):
        assert column in table.column_names
    langs = table.column("lang").to_pylist()
    assert set(langs) == {"en", "zh"} and langs.count("en") >= 30 and langs.count("zh") >= 5
    assert min(table.column("lang_score").to_pylist()) >= 0.5
    for text, lang in zip(table.column("text").to_pylist(), langs):
        assert "<html" not in text.lower() and "<div" not in text.lower()  # main text, not markup
        if lang == "zh":
            assert len(CJK.findall(text)) > 0.3 * len(text.replace(" ", ""))
    dropped = {s["name"]: s["dropped"] for s in stats["stages"]}
    assert dropped["langid"].get("langid:language", 0) > 0  # other languages are in the crawl
    ids = table.column("id").to_pylist()
    assert len(set(ids)) == len(ids)
    metadata = [json.loads(m) for m in table.column("metadata").to_pylist()]
    assert all(m["warc_record_id"] for m in metadata)
    assert {m.get("extractor") for m in metadata if m["content_type"] != "text/plain"} <= {"hybrid", "hybrid:trafilatura"}


def test_ids_and_rows_are_stable_across_runs(quickstart_run, tmp_path):
    out, _ = quickstart_run
    # A second run with another task layout (small splits: more tasks, split .warc.gz files).
    _, stats2 = ylink_data.run(quickstart_config(tmp_path / "again"), **{"input.split_bytes": 60_000})
    first = ylink_data.open_run(str(out)).to_arrow().sort_by("id")
    second = ylink_data.open_run(str(tmp_path / "again")).to_arrow().sort_by("id")
    assert first.column("id").to_pylist() == second.column("id").to_pylist()
    assert first.equals(second)


def test_exact_duplicates_across_files_are_dropped_keeping_the_first(quickstart_run):
    out, stats = quickstart_run
    run = ylink_data.open_run(str(out))
    texts = run.to_arrow().column("text").to_pylist()
    assert len(set(texts)) == len(texts)
    rejected = run.rejected("exact_dedup")
    stage = next(s for s in stats["stages"] if s["name"] == "exact_dedup")
    assert rejected.num_rows == stage["dropped"].get("exact_dedup", 0) >= 1
    kept = set(texts)
    assert all(t in kept for t in rejected.column("text").to_pylist())


def test_completed_run_is_not_redone_and_changed_config_is_refused_with_no_reuse(quickstart_run):
    out, stats = quickstart_run
    manifest_before = (out / "manifest.json").read_bytes()
    _, again = ylink_data.run(quickstart_config(out))
    assert again == stats and (out / "manifest.json").read_bytes() == manifest_before
    with pytest.raises(RunStateError, match=r"different configuration .*stages.* --no-reuse .*--fresh"):
        ylink_data.run(quickstart_config(out) | {"stages": ["extract"]}, reuse=False)
    assert (out / "manifest.json").read_bytes() == manifest_before


def test_fresh_replaces_a_run_of_another_config(ray_session, tmp_path):
    out = tmp_path / "run"
    ylink_data.run(quickstart_config(out))
    _, stats = ylink_data.run(quickstart_config(out) | {"stages": []}, fresh=True)
    assert [s["name"] for s in stats["stages"]] == ["read"]
    assert not (out / "rejected").exists()


def test_quickstart_command_from_the_readme(tmp_path):
    """`ylink run pipelines/quickstart.yaml` as a user types it (with --set for the output)."""
    ylink = [sys.executable, "-m", "ylink_data.cli"]
    out = tmp_path / "cli"
    proc = subprocess.run([*ylink, "run", str(QUICKSTART), "--no-progress", "--set", f"output.path={out}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)
    assert (out / "manifest.json").exists()


def make_run_steps() -> list[list[str]]:
    """The commands of the Makefile's `run` target, as `make run` runs them."""
    lines = (REPO / "Makefile").read_text().split("\nrun: install\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [line.strip().split() for line in lines if line.startswith("\t")]


def test_make_run_ends_with_a_tokenizer_and_megatron_files(quickstart_run, tmp_path):
    """`make run`'s last steps on the quickstart's output: a tokenizer trained on it, Megatron files
    that megatron-core reads, each document exactly the tokenizer's ids of its text and the EOD."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from tokenizers import Tokenizer

    run_dir, _ = quickstart_run
    steps = make_run_steps()
    assert steps[0][1:] == ["run", "pipelines/quickstart.yaml"] and len(steps) == 3
    for step in steps[1:]:
        args = [a.replace("out/quickstart", str(tmp_path / "qs")) for a in step[1:]]
        args = [str(run_dir) if a == str(tmp_path / "qs") else a for a in args]
        assert step[0] == "$(BIN)/ylink"
        proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    tok = Tokenizer.from_file(str(tmp_path / "qs-tokenizer" / "tokenizer.json"))
    eod = tok.token_to_id("<|endoftext|>")
    texts = ylink_data.open_run(run_dir).to_arrow().column("text").to_pylist()
    manifest = json.loads((tmp_path / "qs-megatron" / "manifest.json").read_text())
    got = []
    for pair in manifest["megatron"]["files"]:
        ds = IndexedDataset(str(tmp_path / "qs-megatron" / pair["prefix"]))
        got += [ds[i].tolist() for i in range(len(ds))]
    assert got == [tok.encode(t).ids + [eod] for t in texts]
    assert any(CJK.search(t) for t in texts)  # Chinese went through the trained tokenizer too
    # getting-started's --tokenizer-type HuggingFaceTokenizer --tokenizer-model out/quickstart-tokenizer
    from megatron.core.tokenizers.text.libraries.huggingface_tokenizer import HuggingFaceTokenizer

    assert HuggingFaceTokenizer(str(tmp_path / "qs-tokenizer")).eod == eod == manifest["megatron"]["tokenizer"]["eod_id"]
