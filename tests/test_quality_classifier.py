"""The quality_classifier op in real runs: a fastText model trained here on real text (Reuters news
as good, Common Crawl boilerplate-heavy pages as bad), min_score, top_fraction over the whole run,
tiers written as separate output folders with their own manifests, and a model read from s3://."""
from __future__ import annotations

import gzip
import json
import math

import pyarrow.compute as pc
import pytest

import ylink_data
from ylink_data.core.errors import ConfigError
from ylink_data.engine.config import load_config
from ylink_data.engine.stats import check_invariant

from .conftest import SHARED_DATA
from .s3server import s3_server
from .test_gopher import thucnews, web_spam


def _reuters(shared, n):
    with gzip.open(shared / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        return [t for t in (json.loads(line)["text"] for line in f) if len(t) > 300][:n]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """A small real classifier from `ylink quality train`'s function: THUCNews news and Reuters
    (good) against the ChineseWebText pages (bad)."""
    from ylink_data.train.quality import train_classifier

    if not SHARED_DATA.is_dir():
        pytest.skip(f"research-only data not found at {SHARED_DATA} (CI always has ../shared/data)")
    folder = tmp_path_factory.mktemp("model")
    for name, texts in (("good", thucnews(SHARED_DATA)[:300] + _reuters(SHARED_DATA, 300)),
                        ("bad", web_spam(SHARED_DATA))):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n"
                                                      for t in texts), encoding="utf-8")
    path = folder / "quality.bin"
    train_classifier([str(folder / "good.jsonl")], [str(folder / "bad.jsonl")], str(path), epoch=10, test_fraction=0.1)
    return path


def _docs(shared):
    texts = thucnews(shared)[300:360] + _reuters(shared, 400)[340:400] + web_spam(shared)
    return texts


def _run(tmp_path, shared, name, **params):
    path = tmp_path / "docs.jsonl"
    if not path.exists():
        path.write_text("".join(json.dumps({"text": t, "url": f"doc/{i}"}, ensure_ascii=False) + "\n"
                                for i, t in enumerate(_docs(shared))), encoding="utf-8")
    out, stats = ylink_data.run({"name": name, "input": {"paths": [str(path)], "split_bytes": 60_000},
                                 "output": {"path": str(tmp_path / name), "keep_rejected": True},
                                 "stages": [{"quality_classifier": params}], **params.pop("_extra", {})},
                                progress=False)
    assert check_invariant(stats) is None
    return ylink_data.open_run(out), stats


def test_min_score_scores_and_drops(ray_session, shared_data, model_path, tmp_path):
    run, stats = _run(tmp_path, shared_data, "min", model=str(model_path), min_score=0.5)
    kept, rejected = run.to_arrow(), run.rejected()
    assert pc.min(kept.column("quality_score")).as_py() >= 0.5
    assert set(rejected.column("reason").to_pylist()) == {"quality_classifier:low_score"}
    news_kept = sum(not u.startswith("doc/") or int(u.split("/")[1]) < 120 for u in kept.column("url").to_pylist())
    spam = [int(u.split("/")[1]) >= 120 for u in rejected.column("url").to_pylist()]
    assert news_kept >= 100                                      # unseen news passes (measured 111 of 120)
    assert sum(spam) >= 50  # most web pages go (in-sample: the model saw them; this tests the op)


def test_top_fraction_keeps_the_best_of_the_whole_run(ray_session, shared_data, model_path, tmp_path):
    run, stats = _run(tmp_path, shared_data, "top", model=str(model_path), top_fraction=0.3)
    kept, rejected = run.to_arrow(), run.rejected()
    total = kept.num_rows + rejected.num_rows
    assert kept.num_rows == math.ceil(0.3 * total)  # scores are distinct: no bin holds two at the cut
    assert pc.min(kept.column("quality_score")).as_py() >= pc.max(rejected.column("quality_score")).as_py()
    assert set(rejected.column("reason").to_pylist()) == {"quality_classifier:below_top_fraction"}
    assert [s["name"] for s in stats["stages"]] == ["read", "quality_classifier"]


def test_tiers_are_written_as_separate_runs(ray_session, shared_data, model_path, tmp_path):
    tiers = {"high": 0.9, "medium": 0.5, "low": 0.1}
    run, stats = _run(tmp_path, shared_data, "tiers", model=str(model_path), tiers=tiers)
    root = tmp_path / "tiers"
    manifest = json.loads((root / "manifest.json").read_text())
    assert set(manifest["tiers"]) == set(tiers)
    everything = run.to_arrow()
    assert everything.num_rows == stats["output_records"] == sum(t["rows"] for t in manifest["tiers"].values())
    for name, low in tiers.items():
        tier = ylink_data.open_run(root / "tiers" / name).to_arrow()
        assert tier.num_rows == manifest["tiers"][name]["rows"] > 0
        assert set(tier.column("quality_tier").to_pylist()) == {name}
        scores = tier.column("quality_score").to_pylist()
        assert min(scores) >= low
        higher = [v for v in tiers.values() if v > low]
        assert all(s < min(higher) for s in scores) if higher else True
    below = run.rejected()
    assert set(below.column("reason").to_pylist()) <= {"quality_classifier:below_tiers"}
    assert all(s < 0.1 for s in below.column("quality_score").to_pylist())


def test_model_from_s3(ray_session, shared_data, model_path, tmp_path_factory, tmp_path):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        fs = server.filesystem()
        fs.mkdir("models")
        fs.put_file(str(model_path), "models/quality.bin")
        local, _ = _run(tmp_path, shared_data, "local", model=str(model_path))
        remote, _ = _run(tmp_path, shared_data, "remote", model="s3://models/quality.bin",
                         _extra={"storage": {"s3": server.storage_options()}})
        assert remote.to_arrow().column("quality_score").equals(local.to_arrow().column("quality_score"))


def test_config_errors_name_the_op(tmp_path):
    base = {"input": {"paths": ["x.jsonl"]}, "output": {"path": str(tmp_path / "o")}}
    with pytest.raises(ConfigError, match=r"stages\[0\]\.quality_classifier: choose one of min_score, top_fraction"):
        load_config(base | {"stages": [{"quality_classifier": {"min_score": 0.5, "tiers": {"a": 0.5}}}]})
    with pytest.raises(ConfigError, match=r"tiers: give names"):
        load_config(base | {"stages": [{"quality_classifier": {"tiers": {"a/b": 0.5}}}]})


def test_tiers_after_an_op_that_drops_a_whole_batch(ray_session, tmp_path):
    """langid drops every document of some batches of the sample crawl: such an empty batch never
    reached quality_classifier, lacked its `quality_tier` column, and failed the task (KeyError)."""
    from .conftest import quickstart_config

    cfg = quickstart_config(tmp_path / "run", input__split_bytes=60_000)
    cfg["stages"] = [{"extract": {}}, {"langid": {"languages": ["zh"], "min_score": 0.5}},
                     {"quality_classifier": {"tiers": {"high": 0.5, "low": 0.0}}}]
    out, stats = ylink_data.run(cfg, progress=False)
    langid = stats["stages"][2]
    assert check_invariant(stats) is None and langid["name"] == "langid" and langid["out"] < langid["in"]
    manifest = ylink_data.open_run(out).manifest
    assert sum(t["rows"] for t in manifest["tiers"].values()) == stats["output_records"] > 0
