"""Issue 13, point 12: Chinese is kept by default. gopher_quality, gopher_repetition, c4_quality and
fineweb_quality defaulted to `language: en`, so a pipeline that lists them after `langid` measured
Chinese news in English words and dropped all of it (THUCNews: 0% kept). They now default to `auto`:
each document by its `lang`, else by its script; English decisions must not change."""
from __future__ import annotations

import gzip
import json

import pyarrow as pa

import ylink_data
from ylink_data.pipeline.stats import check_invariant
from ylink_data.stages import build_op

QUALITY_OPS = ("gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality")
# Measured: 159 of these 200 THUCNews articles kept (79.5%), exactly the ones the zh presets
# (gopher-zh, c4-fineweb-zh) keep; configs/filters/zh.yaml keeps 83.1% of all 1,000. Before: 0 kept.
MIN_CHINESE_KEPT = 0.75


def chinese_news(shared_data, n: int = 200) -> list[str]:
    """Every 5th article of THUCNews val: all 10 categories."""
    lines = (shared_data / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines[::5][:n]]


def english_news(shared_data, n: int = 200) -> list[str]:
    """Every 20th Reuters-21578 article: short items and long reports, which the rules drop and keep."""
    path = shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    return texts[::20][:n]


def run_decisions(tmp_path, name: str, inputs: list, params: dict) -> dict[str, tuple[str, str | None]]:
    """A real run of langid then the four ops with `params`: for each document id (the same in every
    run of the same files), its input file's stem and its drop reason (None: kept)."""
    out = tmp_path / name
    cfg = {"input": {"paths": [str(p) for p in inputs], "format": "jsonl"},
           "output": {"path": str(out), "keep_rejected": True},
           "stages": [{"langid": {}}, *({op: dict(params)} for op in QUALITY_OPS)]}
    _, stats = ylink_data.run(cfg)
    assert check_invariant(stats) is None and stats["quarantined"] == 0
    run = ylink_data.open_run(str(out))
    kept = [(doc, None) for doc in run.to_arrow().to_pylist()]
    dropped = [(doc, doc["reason"]) for doc in run.rejected().to_pylist()]
    return {doc["id"]: (doc["source"].rsplit("/", 1)[-1].removesuffix(".jsonl"), reason)
            for doc, reason in kept + dropped}


def test_chinese_news_is_kept_after_langid_and_english_decides_as_before(ray_session, shared_data, tmp_path):
    zh, en = chinese_news(shared_data), english_news(shared_data)
    inputs = []
    for name, texts in (("zh", zh), ("en", en)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
        inputs.append(path)

    by_default = run_decisions(tmp_path, "default", inputs, {})
    as_english = run_decisions(tmp_path, "english", inputs, {"language": "en"})

    assert set(by_default) == set(as_english) and len(by_default) == len(zh) + len(en)
    kept_zh = sum(reason is None for source, reason in by_default.values() if source == "zh")
    assert kept_zh / len(zh) >= MIN_CHINESE_KEPT, f"{kept_zh} of {len(zh)} Chinese articles kept"
    assert not any(reason is None for source, reason in as_english.values() if source == "zh")  # the old default
    english = {i for i, (source, _) in by_default.items() if source == "en"}
    assert {i: by_default[i] for i in english} == {i: as_english[i] for i in english}
    assert 0 < sum(by_default[i][1] is None for i in english) < len(english)  # the English rules did decide


def test_a_document_without_lang_goes_by_its_script(shared_data):
    """Without langid before them, the ops decide Chinese text as `language: zh` does and English
    text as `language: en` does."""
    zh, en = chinese_news(shared_data, 60), english_news(shared_data, 60)
    zh_dropped = set()
    for name in QUALITY_OPS:
        by_script, as_zh, as_en = (build_op(name, params) for params in ({}, {"language": "zh"}, {"language": "en"}))
        for op in (by_script, as_zh, as_en):
            op.setup()
        expected = verdicts(as_zh, zh) + verdicts(as_en, en)
        assert verdicts(by_script, zh + en) == expected, name
        zh_dropped.update(i for i, reason in enumerate(expected[:len(zh)]) if reason)
    assert 0 < len(zh_dropped) < len(zh) / 2  # the Chinese rules decided, and kept most


def verdicts(op, texts: list[str]) -> list[str | None]:
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts,
                      "lang": pa.nulls(len(texts), pa.string())})
    return op.process(table).dropped or [None] * len(texts)
