"""input.sample: a seeded uniform sample of a pipeline's input (bottom-k over a hash of the seed and
each document's id, the cut found by a pass before phase 0), and a finished run folder as input (its
manifest's shards, read with their columns). Real data: the bundled sample crawl (106 documents
among 201 WARC records), the bundled Common Crawl JSONL excerpt, the Reuters corpus of ../shared/data.

The expected samples are computed here by brute force: every document id of an unsampled run,
ranked by the hash written out below, the N lowest."""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError, InputError, RunStateError
from ylink_data.engine.runner import Runner

from .chaos.processes import ylink
from .conftest import SAMPLES, TEST_DATA
from .test_resume import _counts

CRAWL = str(SAMPLES / "*.warc*")  # its 8 WARC and WET files
CRAWL_DOCUMENTS = 106  # of 201 records: the others are WARC requests, metadata, non-HTML (read's drops)
SPLIT = 60_000  # the sample crawl in a few dozen tasks (as tests/test_resume.py)


def _config(out: Path, paths: list[str], *, stages: list | None = None, execution: str = "local",
            num_cpus: int | None = None, **input_keys) -> dict:
    return {"name": "sample", "input": {"paths": paths, **input_keys}, "output": {"path": str(out)},
            "stages": stages or [], "ray": {"execution": execution, "num_cpus": num_cpus}}


def _run(out: Path, paths: list[str], **kwargs) -> ylink_data.RunResult:
    return ylink_data.run(_config(out, paths, **kwargs), progress=False)


def _ids(out: Path) -> list[str]:
    return ylink_data.open_run(str(out)).to_arrow(["id"]).column("id").to_pylist()


def _rank(seed: int, doc_id: str) -> tuple[int, str]:
    """A document's place in the sample of `seed`, as config.py describes it: a 64-bit BLAKE2b of the
    seed and the id, ties broken by the id."""
    digest = hashlib.blake2b(f"{seed}\x00{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big"), doc_id


def _expected(all_ids: list[str], n: int, seed: int) -> list[str]:
    """The brute-force sample, in input order (a run keeps the order it reads in)."""
    chosen = set(sorted(all_ids, key=lambda i: _rank(seed, i))[:n])
    return [i for i in all_ids if i in chosen]


def _read(stats: dict) -> dict:
    return stats["stages"][0]


@pytest.fixture(scope="module")
def crawl_run(tmp_path_factory) -> Path:
    """The sample crawl read whole, unsampled."""
    out = tmp_path_factory.mktemp("all") / "run"
    result = _run(out, [CRAWL])
    assert result.stats["output_records"] == CRAWL_DOCUMENTS
    return out


@pytest.fixture(scope="module")
def crawl_ids(crawl_run) -> list[str]:
    """Every document id of the sample crawl, in input order."""
    return _ids(crawl_run)


def test_a_sample_keeps_exactly_n_documents_the_n_lowest_ranked(crawl_run, crawl_ids, tmp_path):
    everything = ylink_data.open_run(str(crawl_run)).stats
    result = _run(tmp_path / "run", [CRAWL], sample=17, sample_seed=3)
    assert _ids(tmp_path / "run") == _expected(crawl_ids, 17, 3)
    read = _read(result.stats)
    assert result.stats["output_records"] == read["out"] == 17
    # Only documents are sampled: the records that are none keep their own reasons, and the
    # documents left out are counted as such.
    assert read["dropped"] == {**_read(everything)["dropped"], "not_sampled": CRAWL_DOCUMENTS - 17}
    assert result.stats["input_records"] == everything["input_records"] == 201


def test_a_sample_of_at_least_every_document_keeps_them_all(crawl_ids, tmp_path):
    for n in (CRAWL_DOCUMENTS, 1000):
        result = _run(tmp_path / f"n{n}", [CRAWL], sample=n, sample_seed=9)
        assert _ids(tmp_path / f"n{n}") == crawl_ids
        assert "not_sampled" not in _read(result.stats)["dropped"]


def test_the_same_seed_draws_the_same_sample_however_the_work_is_split(crawl_ids, tmp_path):
    """In the driver, in two or one worker processes over dozens of tasks of byte
    ranges of the WARCs, and in tasks of another size: one sample."""
    ways = {"local": {}, "two workers": {"execution": "processes", "num_cpus": 2, "split_bytes": SPLIT},
            "one worker": {"execution": "processes", "num_cpus": 1, "split_bytes": SPLIT},
            "other splits": {"split_bytes": 200_000}}
    tasks = {}
    for name, how in ways.items():
        out = tmp_path / name.replace(" ", "-")
        _run(out, [CRAWL], sample=25, sample_seed=11, **how)
        assert _ids(out) == _expected(crawl_ids, 25, 11), name
        tasks[name] = json.loads((out / "run.json").read_text())["tasks"]
    # three ways of cutting the work (input.split_bytes null sizes tasks from the input: a few here)
    assert tasks["two workers"] > 20 and 1 < tasks["other splits"] < tasks["two workers"]
    assert len({tasks["local"], tasks["other splits"], tasks["two workers"]}) == 3, tasks


def test_memory_inputs_are_ranked_in_worker_processes(tmp_path):
    """memory:// files live in the driver: the pass before phase 0 ships them to the worker processes
    as phase 0 does, and ranks the documents by the ids phase 0 gives them."""
    import fsspec

    mem = fsspec.filesystem("memory")
    for path in sorted(SAMPLES.glob("*.warc.gz"))[:3]:
        mem.pipe_file(f"/sample-test/{path.name}", path.read_bytes())
    paths = ["memory://sample-test/*.warc.gz"]
    _run(tmp_path / "all", paths)
    result = _run(tmp_path / "run", paths, sample=7, sample_seed=1, split_bytes=SPLIT, execution="processes",
                  num_cpus=2)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["tasks"] > 2
    assert _ids(tmp_path / "run") == _expected(_ids(tmp_path / "all"), 7, 1) and result.stats["output_records"] == 7


def test_another_seed_draws_another_sample(crawl_ids, tmp_path):
    samples = []
    for seed in (0, 1, -7):
        _run(tmp_path / f"seed{seed}", [CRAWL], sample=30, sample_seed=seed)
        samples.append(_ids(tmp_path / f"seed{seed}"))
        assert samples[-1] == _expected(crawl_ids, 30, seed)
    assert len({tuple(s) for s in samples}) == 3


def test_the_sample_is_uniform_over_the_input_not_its_first_documents(crawl_run, crawl_ids, tmp_path):
    """20 samples of 20 of the 106 documents (seeds 0-19). A uniform sample includes each document
    with probability p = 20/106: over 20 seeds ~3.8 times, 13 or more times with probability 8e-6
    (binomial), so for any of the 106 below 1e-3; it leaves out almost no document altogether
    (106 (1 - p)^20 = 1.6 expected); and half of its picks fall in each half of the input, in
    the first file as often as that file's share of the documents says. The first 20 documents
    every time would fail all four."""
    counts: Counter = Counter()
    for seed in range(20):
        out = tmp_path / f"seed{seed}"
        _run(out, [CRAWL], sample=20, sample_seed=seed)
        kept = _ids(out)
        assert len(kept) == 20
        counts.update(kept)
    position = {doc_id: i for i, doc_id in enumerate(crawl_ids)}
    assert max(counts.values()) <= 12
    assert len(counts) >= 95
    first_half = sum(n for doc_id, n in counts.items() if position[doc_id] < CRAWL_DOCUMENTS // 2)
    assert 0.35 <= first_half / 400 <= 0.65  # ~0.5 with a standard deviation of 0.023
    first_file = str(min(SAMPLES.glob("*.warc*")))
    rows = ylink_data.open_run(str(crawl_run)).to_arrow(["id", "source"]).to_pylist()
    first_ids = {r["id"] for r in rows if r["source"] == first_file}
    share = len(first_ids) / CRAWL_DOCUMENTS
    assert 0 < share < 0.5
    picked = sum(counts[i] for i in first_ids) / 400
    assert abs(picked - share) <= 0.1, (picked, share)


def test_every_input_record_is_accounted_for_and_the_sample_is_never_rejected(crawl_copy, tmp_path):
    """input records = kept + dropped (not_sampled and the rest) + quarantined. Unreadable records are
    quarantined whether or not they would have been sampled; documents left out of the sample are
    counted, never written to rejected/ (which holds the filter's drops) nor to quarantine/."""
    lines = gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes()).splitlines()
    (crawl_copy / "cc.jsonl").write_bytes(b"\n".join([*lines[:5], b"{not json", *lines[5:], b'{"text": 3}']) + b"\n")
    paths = [str(crawl_copy / "*.warc*"), str(crawl_copy / "cc.jsonl")]
    config = _config(tmp_path / "run", paths, stages=[{"langid": {"languages": ["en"]}}], sample=40,
                     sample_seed=2)
    config["output"]["keep_rejected"] = True
    stats = ylink_data.run(config, progress=False).stats
    run = ylink_data.open_run(str(tmp_path / "run"))
    dropped = sum(sum(s["dropped"].values()) for s in stats["stages"])
    assert stats["input_records"] == 201 + 12
    assert stats["input_records"] == stats["output_records"] + dropped + stats["quarantined"]
    assert _read(stats)["dropped"]["not_sampled"] == CRAWL_DOCUMENTS + 10 - 40
    assert _read(stats)["out"] == 40 and stats["quarantined"] == 2
    first_bad = sum(len(line) + 1 for line in lines[:5])  # byte offsets of the two unreadable lines
    second_bad = first_bad + len(b"{not json") + 1 + sum(len(line) + 1 for line in lines[5:])
    assert sorted(q["offset"] for q in run.quarantine()) == [first_bad, second_bad]
    reasons = set(run.rejected().column("reason").to_pylist())
    assert reasons and all(r.startswith("langid:") for r in reasons)
    assert stats["output_records"] + sum(stats["stages"][1]["dropped"].values()) == 40


def test_a_killed_run_resumes_with_the_same_sample_without_scanning_again(crawl_ids, tmp_path):
    """The run's cut is saved before phase 0 (_work/sample.json); the worker that runs phase 0's task
    3 dies (in the driver: the run stops, exit 137). Another sample never resumes it; the same
    sample resumes without its pass over the input and ends as an uninterrupted run does."""
    reference = tmp_path / "reference"
    _run(reference, [CRAWL], sample=20, sample_seed=5, split_bytes=SPLIT)
    out = tmp_path / "run"
    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump(_config(out, [CRAWL], sample=20, sample_seed=5, split_bytes=SPLIT)))
    crashed = ylink("run", config, "--no-progress", env={"YLINK_TEST_CRASH_TASK": "3"})
    assert crashed.returncode == 137, crashed.stderr
    assert "sample: rank every document" in crashed.stderr
    saved = json.loads((out / "_work" / "sample.json").read_text())
    assert saved["documents"] == CRAWL_DOCUMENTS and saved["cut"] == list(
        max(_rank(5, i) for i in _expected(crawl_ids, 20, 5)))
    assert len(list((out / "_work" / "phase0" / "done").glob("task-*.json"))) == 3
    # another sample is another input: with --no-reuse refused, else every phase recomputed (test_reuse.py)
    with pytest.raises(RunStateError, match="changed: input"):
        ylink_data.run(_config(out, [CRAWL], sample=21, sample_seed=5, split_bytes=SPLIT), progress=False, reuse=False)
    with pytest.raises(RunStateError, match="changed: input"):
        ylink_data.run(_config(out, [CRAWL], sample=20, sample_seed=6, split_bytes=SPLIT), progress=False, reuse=False)
    rerun = ylink("run", config, "--no-progress")
    assert rerun.returncode == 0 and "resuming" in rerun.stderr, rerun.stderr
    assert "sample:" not in rerun.stderr
    expected, got = ylink_data.open_run(str(reference)), ylink_data.open_run(str(out))
    assert got.to_arrow().equals(expected.to_arrow())
    assert _ids(out) == _expected(crawl_ids, 20, 5)
    assert _counts(got.stats) == _counts(expected.stats)


def test_the_fingerprint_holds_the_sample_and_nothing_without_one(tmp_path):
    """Without a sample the fingerprint is what it was before input.sample existed (runs made then
    stay complete and resume); with one, the size and the seed both change it."""
    def plan(**keys):
        return Runner(load_config(_config(tmp_path / "out", [CRAWL], **keys))).plan()

    plain, seeded = plan(), plan(sample_seed=4)
    assert "sample" not in plain.fingerprinted["input"] and "sample_seed" not in plain.fingerprinted["input"]
    assert plain.fingerprint == seeded.fingerprint
    prints = {plan(sample=10).fingerprint, plan(sample=11).fingerprint, plan(sample=10, sample_seed=1).fingerprint}
    assert len(prints) == 3 and plain.fingerprint not in prints
    assert {"sample": 10, "sample_seed": 1}.items() <= plan(sample=10, sample_seed=1).fingerprinted["input"].items()


@pytest.fixture
def finished_run(crawl_copy, tmp_path) -> Path:
    """A run of the sample crawl with its own quarantine (a broken JSONL line), rejected documents
    (not English) and languages found: everything a run folder holds besides its shards."""
    lines = gzip.decompress((TEST_DATA / "cc_en_head-0174.jsonl.gz").read_bytes()).splitlines()
    (crawl_copy / "cc.jsonl").write_bytes(b"\n".join([*lines, b"{not json"]) + b"\n")
    out = tmp_path / "first"
    config = _config(out, [str(crawl_copy / "*.warc*"), str(crawl_copy / "cc.jsonl")],
                     stages=[{"extract": {}}, {"langid": {"languages": ["en"], "min_score": 0.5}}], split_bytes=SPLIT)
    config["output"].update(keep_rejected=True, shard_bytes=100_000)  # several shards
    stats = ylink_data.run(config, progress=False).stats
    assert stats["quarantined"] == 1 and (out / "rejected").is_dir() and (out / "quarantine").is_dir()
    return out


def test_a_finished_run_folder_is_read_as_its_shards(finished_run, tmp_path):
    first = ylink_data.open_run(str(finished_run))
    shards = [str(Path(p)) for p in first.shard_paths]
    assert len(shards) >= 2
    out = tmp_path / "second"
    stats = _run(out, [str(finished_run)], sample=5, sample_seed=1).stats
    info = json.loads((out / "run.json").read_text())
    assert [f[0] for f in info["fingerprinted"]["input files"]] == shards  # no stats.json, rejected/, quarantine/
    assert [f[2] for f in info["fingerprinted"]["input files"]] == [s["sha256"] for s in first.manifest["shards"]]
    assert stats["input_records"] == first.stats["output_records"] and stats["quarantined"] == 0
    assert stats["output_records"] == 5 and _read(stats)["dropped"] == {"not_sampled": stats["input_records"] - 5}
    # Each document as the first run left it: text, url, language and metadata, with its id and
    # source there too.
    # The first run's id is found in the metadata, unless the input's own metadata had an `id`
    # (the JSONL lines): those are told apart by their text.
    rows = first.to_arrow().to_pylist()
    by_id = {r["id"]: r for r in rows if "id" not in json.loads(r["metadata"] or "{}")}
    by_text = {r["text"]: r for r in rows if r["id"] not in by_id}
    assert len(by_id) > 50 and len(by_text) == len(rows) - len(by_id)
    second = ylink_data.open_run(str(out)).to_arrow().to_pylist()
    for doc in second:
        old = by_id.get(json.loads(doc["metadata"])["id"]) or by_text[doc["text"]]
        assert doc["source"] in shards
        assert (doc["url"], doc["lang"], doc["lang_score"]) == (old["url"], old["lang"], old["lang_score"])
        assert doc["lang"] == "en"
        meta, old_meta = json.loads(doc["metadata"]), json.loads(old["metadata"] or "{}")
        assert meta == {**old_meta, "id": old_meta.get("id", old["id"]), "source": old_meta.get("source", old["source"])}
    # The sample is the brute-force one over the run's documents, whose ids name its shards' rows.
    everything = tmp_path / "all"
    _run(everything, [str(finished_run)], format="auto")
    assert [d["id"] for d in second] == _expected(_ids(everything), 5, 1)
    # Read alike with any input.format: a run's shards are Parquet.
    _run(tmp_path / "as-jsonl", [str(finished_run)], format="jsonl", sample=5, sample_seed=1)
    assert _ids(tmp_path / "as-jsonl") == [d["id"] for d in second]


def test_an_unfinished_or_damaged_run_folder_is_refused_naming_it(finished_run, tmp_path):
    unfinished = tmp_path / "unfinished"
    shutil.copytree(finished_run, unfinished)
    (unfinished / "manifest.json").unlink()
    with pytest.raises(InputError, match=r"input\.paths\[0\]: '.*unfinished' is an unfinished ylink run"):
        _run(tmp_path / "out1", [str(unfinished)])
    damaged = tmp_path / "damaged"
    shutil.copytree(finished_run, damaged)
    (damaged / "data" / "part-00001.parquet").unlink()
    with pytest.raises(InputError, match=r"damaged.*data/part-00001\.parquet .* missing or of another size"):
        _run(tmp_path / "out2", [str(damaged)])
    # A folder of a run's shards alone is plain Parquet input, read as any other.
    result = _run(tmp_path / "out3", [str(finished_run / "data")])
    assert result.stats["output_records"] == ylink_data.open_run(str(finished_run)).stats["output_records"]
    assert set(pq.read_table(tmp_path / "out3" / "data" / "part-00000.parquet").column("lang").to_pylist()) == {None}


def test_the_reuters_corpus_sampled_over_byte_ranges(shared_data, tmp_path):
    """10,788 newswire articles as two uncompressed JSONL files, cut into byte ranges of 300 kB or
    read whole: one sample of 100, the brute-force one."""
    lines = gzip.decompress((shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz").read_bytes()
                            ).splitlines(keepends=True)
    folder = tmp_path / "reuters"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(b"".join(lines[:6000]))
    (folder / "b.jsonl").write_bytes(b"".join(lines[6000:]))
    _run(tmp_path / "all", [str(folder)])
    all_ids = _ids(tmp_path / "all")
    assert len(all_ids) == 10_788
    for name, how in {"whole": {}, "ranges": {"split_bytes": 300_000, "execution": "processes", "num_cpus": 2}}.items():
        result = _run(tmp_path / name, [str(folder)], sample=100, sample_seed=42, **how)
        assert _ids(tmp_path / name) == _expected(all_ids, 100, 42), name
        assert _read(result.stats)["dropped"] == {"not_sampled": 10_688}


def test_validate_accepts_the_sample_keys_and_names_a_bad_one(tmp_path):
    config = _config(tmp_path / "out", [CRAWL], sample=5, sample_seed=-3)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(config))
    assert ylink("validate", good).returncode == 0
    config["input"]["sample"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    proc = ylink("validate", bad)
    assert proc.returncode == 2 and "input.sample: Input should be greater than 0 (got 0)" in proc.stderr, proc.stderr
    for value in (True, -1, 2.5, "many"):
        with pytest.raises(ConfigError, match=r"input\.sample: "):
            load_config({**config, "input": {**config["input"], "sample": value}})
