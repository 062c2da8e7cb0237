"""Megatron-LM output (issue 14 point 3): `output.megatron: {}` in a real pipeline run on the bundled
crawl, and `ylink export megatron` for an existing run. The files are read back with megatron-core's
own IndexedDataset, and every document's tokens are compared with the tokenizer's own
`Tokenizer.encode(text).ids` plus the end-of-document id, for the Parquet row the pair mirrors."""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from tokenizers import Tokenizer

import ylink_data
from ylink_data.core.errors import ConfigError
from ylink_data.io.manifest import read_manifest

from .chaos.processes import needs_mount_namespace, ylink, ylink_in_mount_namespace
from .conftest import quickstart_config
from .tokenruns import crawl_tokenizer

SPLIT, SHARD_BYTES = 60_000, 20_000  # the sample crawl in dozens of tasks and of shards
TIERS = {"high": 0.5, "low": 0.0}


def _indexed_dataset(prefix: str):
    with warnings.catch_warnings():  # megatron-core warns that Apex/Transformer Engine are absent (CPU)
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    return IndexedDataset(prefix)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    return crawl_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def _config(out: Path, tokenizer: Path, tiers: bool = False, **megatron) -> dict:
    cfg = quickstart_config(out, input__split_bytes=SPLIT, output__shard_bytes=SHARD_BYTES)
    cfg["name"] = "megatron"
    cfg["output"]["megatron"] = megatron
    cfg["stages"] = [{"extract": {}}, {"langid": {"languages": ["en", "zh"], "min_score": 0.5}},
                     *([{"quality_classifier": {"tiers": TIERS}}] if tiers else []),
                     {"tokenize": {"tokenizer": str(tokenizer)}}]
    return cfg


def _write_config(folder: Path, cfg: dict) -> Path:
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def run(ray_session, tmp_path_factory, tokenizer) -> Path:
    out = tmp_path_factory.mktemp("megatron") / "run"
    ylink_data.run(_config(out, tokenizer), progress=False)
    return out


def _megatron_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "megatron").iterdir()) if p.suffix in (".bin", ".idx")}


def _without_time(manifest: dict) -> dict:
    return {k: v for k, v in manifest.items() if k != "created"}


def _assert_pairs_mirror_shards(folder: Path, tokenizer: Path) -> int:
    """Every pair of the run (or tier) at `folder`, read by megatron-core, holds its shard's documents
    in row order, each `Tokenizer.encode(text).ids + [eod]`; returns the documents checked."""
    manifest = json.loads((folder / "manifest.json").read_text())
    tok = Tokenizer.from_file(str(tokenizer))
    eod = tok.token_to_id("<|endoftext|>")
    pairs = manifest["megatron"]["files"]
    assert len(pairs) == len(manifest["shards"]) >= 2
    checked = 0
    for shard, pair in zip(manifest["shards"], pairs):
        assert pair["prefix"] == "megatron/" + Path(shard["path"]).stem  # part-NNNNN next to data/part-NNNNN
        texts = pq.read_table(folder / shard["path"], columns=["text"]).column("text").to_pylist()
        dataset = _indexed_dataset(str(folder / pair["prefix"]))
        assert len(dataset) == len(texts) == pair["documents"] == shard["rows"]
        for i, text in enumerate(texts):
            got = dataset[i]
            assert got.dtype.name == manifest["megatron"]["dtype"] == "uint16"
            assert got.tolist() == tok.encode(text).ids + [eod], f"{pair['prefix']} document {i}"
        checked += len(texts)
    return checked


def test_megatron_core_reads_every_document_as_the_tokenizer_encodes_it(run, tokenizer):
    checked = _assert_pairs_mirror_shards(run, tokenizer)
    assert checked == json.loads((run / "stats.json").read_text())["output_records"] > 50
    langs = set(ylink_data.open_run(str(run)).to_arrow(columns=["lang"]).column("lang").to_pylist())
    assert langs == {"en", "zh"}  # English and Chinese documents both went through


def test_manifest_lists_sizes_tokens_and_sha256_of_the_files(run, tokenizer):
    manifest = json.loads((run / "manifest.json").read_text())
    section = manifest["megatron"]
    tokens_column = ylink_data.open_run(str(run)).to_arrow(columns=["num_tokens"]).column("num_tokens")
    for pair in section["files"]:
        dataset = _indexed_dataset(str(run / pair["prefix"]))
        assert pair["tokens"] == int(dataset.sequence_lengths.sum())
        for kind in ("bin", "idx"):
            data = (run / pair[kind]["path"]).read_bytes()
            assert pair[kind]["bytes"] == len(data)
            assert pair[kind]["sha256"] == hashlib.sha256(data).hexdigest()
    assert section["tokens"] == sum(p["tokens"] for p in section["files"]) == sum(tokens_column.to_pylist())
    assert section["documents"] == manifest["rows"]
    assert section["tokenizer"]["sha256"] == hashlib.sha256(tokenizer.read_bytes()).hexdigest()
    # The checked reader takes it: every pair is a file of the run, with its digest.
    checked = read_manifest(str(run))
    assert [p.prefix for p in checked.megatron] == [p["prefix"] for p in section["files"]]
    assert checked.megatron_dtype == "uint16"


def test_data_path_file_is_megatron_weighted_data_path(run):
    """megatron/data-path.txt: "TOKENS PREFIX" pairs, absolute prefixes (a local run), weights by tokens."""
    words = (run / "megatron" / "data-path.txt").read_text().split()
    weights, prefixes = [int(w) for w in words[0::2]], words[1::2]
    section = json.loads((run / "manifest.json").read_text())["megatron"]
    assert sum(weights) == section["tokens"]
    assert prefixes == [str(run / p["prefix"]) for p in section["files"]]
    assert all(os.path.isabs(p) and Path(p + ".bin").is_file() and Path(p + ".idx").is_file() for p in prefixes)


def test_parquet_shards_keep_or_drop_token_ids(ray_session, run, tokenizer, tmp_path):
    """keep_token_ids: false leaves token_ids out of the shards; the Megatron files are the same."""
    assert "token_ids" in pq.read_schema(run / "data" / "part-00000.parquet").names
    out = tmp_path / "dropped"
    ylink_data.run(_config(out, tokenizer, keep_token_ids=False), progress=False)
    names = pq.read_schema(out / "data" / "part-00000.parquet").names
    assert "token_ids" not in names and "num_tokens" in names
    assert _megatron_files(out) == _megatron_files(run)


def test_megatron_without_a_tokenize_stage_is_a_config_error(tmp_path, tokenizer):
    cfg = _config(tmp_path / "out", tokenizer)
    cfg["stages"] = cfg["stages"][:-1]
    with pytest.raises(ConfigError, match=r"output\.megatron: .*add a stage `- tokenize: \{tokenizer: "):
        ylink_data.run(cfg)
    cfg = _config(tmp_path / "out", tokenizer, dtype="uint32")
    with pytest.raises(ConfigError, match=r"output\.megatron\.dtype: Megatron's \.idx has no uint32"):
        ylink_data.run(cfg)


def test_output_tiers_get_their_own_pairs_and_manifests(ray_session, tmp_path, tokenizer):
    out = tmp_path / "tiered"
    ylink_data.run(_config(out, tokenizer, tiers=True), progress=False)
    top = json.loads((out / "manifest.json").read_text())
    seen = []
    for tier in TIERS:
        folder = out / "tiers" / tier
        _assert_pairs_mirror_shards(folder, tokenizer)
        section = json.loads((folder / "manifest.json").read_text())["megatron"]
        assert read_manifest(str(folder)).megatron  # a tier is a run of its own for readers
        words = (folder / "megatron" / "data-path.txt").read_text().split()
        assert sum(map(int, words[0::2])) == section["tokens"]
        assert words[1::2] == [str(folder / p["prefix"]) for p in section["files"]]
        seen += [f"tiers/{tier}/{p['prefix']}" for p in section["files"]]
    assert [p["prefix"] for p in top["megatron"]["files"]] == seen  # the run's manifest lists every pair
    assert not list((out / "megatron").glob("*.bin"))  # a tiered run's pairs live in its tiers


def test_resume_after_a_stop_mid_publish_writes_the_same_files(run, tokenizer, tmp_path):
    out = tmp_path / "resumed"
    path = _write_config(tmp_path, _config(out, tokenizer))
    tasks = json.loads((run / "run.json").read_text())["tasks"]
    shards = len(json.loads((run / "manifest.json").read_text())["shards"])
    assert shards > 10
    stopped = ylink("run", path, "--no-progress", env={"YLINK_FAIL_AFTER_TASKS": str(tasks + 5)})
    assert stopped.returncode == 75, stopped.stderr
    assert not (out / "manifest.json").exists()
    written = len(list((out / "megatron").glob("*.bin")))
    assert 5 <= written < shards  # stopped with part of the pairs written

    resumed = ylink("run", path, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert _megatron_files(out) == _megatron_files(run)
    assert _without_time(json.loads((out / "manifest.json").read_text())) == \
        _without_time(json.loads((run / "manifest.json").read_text()))
    assert (out / "megatron" / "data-path.txt").read_text() == \
        (run / "megatron" / "data-path.txt").read_text().replace(str(run), str(out))


def test_a_missing_megatron_file_makes_the_run_incomplete(run, tokenizer, tmp_path, capfd):
    out = tmp_path / "run"
    cfg = _config(out, tokenizer)
    ylink_data.run(cfg, progress=False)
    (out / "megatron" / "part-00002.bin").unlink()
    capfd.readouterr()
    ylink_data.run(cfg, progress=False)
    err = capfd.readouterr().err
    assert "already complete" not in err and "(megatron/part-00002.bin)" in err
    assert _megatron_files(out) == _megatron_files(run)


def test_fresh_stopped_in_megatron_folder_leaves_no_manifest_behind(run, tokenizer, tmp_path):
    """--fresh is stopped for real while it removes the old run: megatron/ is read-only in its mount
    namespace. No manifest may be left listing Megatron files that are gone."""
    needs_mount_namespace()
    out = tmp_path / "run"
    path = _write_config(tmp_path, _config(out, tokenizer))
    assert ylink("run", path, "--no-progress").returncode == 0
    other = yaml.safe_load(path.read_text())
    other["output"]["megatron"] = {"dtype": "int32"}
    other_path = tmp_path / "other.yaml"
    other_path.write_text(yaml.safe_dump(other))

    megatron = out / "megatron"
    stopped = ylink_in_mount_namespace(f"mount --bind {megatron} {megatron}; mount -o remount,bind,ro {megatron}",
                                       "run", other_path, "--fresh", "--no-progress")
    assert stopped.returncode == 2 and "Traceback" not in stopped.stderr, stopped.stderr
    assert "is not writable" in stopped.stderr
    assert not (out / "data").exists() and not (out / "manifest.json").exists()

    rerun = ylink("run", path, "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    assert "already complete" not in rerun.stderr
    assert _megatron_files(out) == _megatron_files(run)


# ------------------------------------------------------------------ ylink export megatron


def test_export_gives_the_bytes_of_output_megatron(run, tokenizer, tmp_path):
    out = tmp_path / "export"
    done = ylink("export", "megatron", run, "--tokenizer", tokenizer, "--output", out, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert _megatron_files(out) == _megatron_files(run)
    manifest = json.loads((out / "manifest.json").read_text())
    section = json.loads((run / "manifest.json").read_text())["megatron"]
    assert manifest["version"] == 1 and manifest["shards"] == [] and manifest["megatron"] == section
    assert [p.prefix for p in read_manifest(str(out)).megatron] == [p["prefix"] for p in section["files"]]
    words = (out / "megatron" / "data-path.txt").read_text().split()
    assert sum(map(int, words[0::2])) == section["tokens"] and words[1] == str(out / "megatron" / "part-00000")

    # Without --tokenizer, the run's own token_ids: the same bytes.
    from_ids = tmp_path / "from-ids"
    assert ylink("export", "megatron", run, "--output", from_ids, "--no-progress").returncode == 0
    assert _megatron_files(from_ids) == _megatron_files(run)

    again = ylink("export", "megatron", run, "--tokenizer", tokenizer, "--output", out, "--no-progress")
    assert again.returncode == 0 and "already holds this export" in again.stderr
    other = ylink("export", "megatron", run, "--tokenizer", tokenizer, "--dtype", "int32", "--output", out)
    assert other.returncode == 2 and other.stderr.count("\n") == 1 and "holds another export" in other.stderr
    into_run = ylink("export", "megatron", run, "--output", run)
    assert into_run.returncode == 2 and "holds a ylink run" in into_run.stderr


def test_export_resumes_without_redoing_recorded_pairs(run, tokenizer, tmp_path):
    out = tmp_path / "export"
    stopped = ylink("export", "megatron", run, "--tokenizer", tokenizer, "--output", out, "--no-progress",
                    env={"YLINK_FAIL_AFTER_TASKS": "4"})
    assert stopped.returncode == 75, stopped.stderr
    assert not (out / "manifest.json").exists()
    recorded = {json.loads(m.read_text())["entry"]["bin"]["path"] for m in (out / "_work").glob("part-*.json")}
    assert len(recorded) >= 4
    stamps = {p: (out / p).stat().st_ino for p in recorded}

    resumed = ylink("export", "megatron", run, "--tokenizer", tokenizer, "--output", out, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert {p: (out / p).stat().st_ino for p in recorded} == stamps  # not written again
    assert _megatron_files(out) == _megatron_files(run)
    assert not (out / "_work").exists()


def test_export_errors_are_one_line(run, tmp_path):
    plain = tmp_path / "plain"
    ylink_data.run(quickstart_config(plain, input__split_bytes=SPLIT) | {"stages": [{"extract": {}}]}, progress=False)
    no_ids = ylink("export", "megatron", plain, "--output", tmp_path / "x")
    assert no_ids.returncode == 2 and no_ids.stderr.count("\n") == 1
    assert "has no token_ids column" in no_ids.stderr and "give --tokenizer" in no_ids.stderr
    missing = ylink("export", "megatron", run, "--tokenizer", tmp_path / "none.json", "--output", tmp_path / "y")
    assert missing.returncode == 2 and "none.json does not exist" in missing.stderr


def test_output_megatron_and_export_on_s3(ray_session, tmp_path, tokenizer):
    """A run written to a real S3 server with output.megatron, then exported from S3: the same bytes.
    Its data-path.txt holds prefixes relative to the run folder (for a training job's mount)."""
    from .s3server import s3_server

    with s3_server(tmp_path / "s3") as server:
        fs = server.filesystem()
        fs.mkdir("corpus")
        cfg = _config(tmp_path / "unused", tokenizer)
        cfg["output"]["path"] = "s3://corpus/run"
        cfg["storage"] = {"s3": server.storage_options()}
        ylink_data.run(cfg, progress=False)
        manifest = json.loads(fs.cat_file("corpus/run/manifest.json"))
        pairs = manifest["megatron"]["files"]
        assert len(pairs) == len(manifest["shards"]) >= 2
        words = fs.cat_file("corpus/run/megatron/data-path.txt").decode().split()
        assert words[1::2] == [p["prefix"] for p in pairs] and sum(map(int, words[0::2])) == manifest["megatron"]["tokens"]
        for pair in pairs:
            for kind in ("bin", "idx"):
                assert hashlib.sha256(fs.cat_file(f"corpus/run/{pair[kind]['path']}")).hexdigest() == pair[kind]["sha256"]

        out = tmp_path / "export"
        done = ylink("export", "megatron", "s3://corpus/run", "--tokenizer", tokenizer, "--output", out,
                     "--storage-options", json.dumps(server.storage_options()), "--no-progress")
        assert done.returncode == 0, done.stderr
        assert _megatron_files(out) == {Path(p[k]["path"]).name: fs.cat_file(f"corpus/run/{p[k]['path']}")
                                        for p in pairs for k in ("bin", "idx")}
        _assert_pairs_mirror_shards_of_export(out, tokenizer, fs, manifest)


def _assert_pairs_mirror_shards_of_export(out: Path, tokenizer: Path, fs, manifest: dict) -> None:
    tok = Tokenizer.from_file(str(tokenizer))
    eod = tok.token_to_id("<|endoftext|>")
    for i, shard in enumerate(manifest["shards"]):
        with fs.open(f"corpus/run/{shard['path']}", "rb") as f:
            texts = pq.read_table(f, columns=["text"]).column("text").to_pylist()
        dataset = _indexed_dataset(str(out / "megatron" / f"part-{i:05d}"))
        assert [dataset[j].tolist() for j in range(len(dataset))] == [tok.encode(t).ids + [eod] for t in texts]
