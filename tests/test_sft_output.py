"""output.sft_format: a run's question-answer rows also as fine-tuning JSONL, in each of the three
layouts, on real FAQ pages (qa_extract's schema.org pairs): one record per kept row, in shard order,
with its provenance; the files listed in the manifest with their sha256 and served by the manifest
reader; a run that makes no pairs refused with one line."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest

import ylink_data
from ylink_data.core.errors import YlinkError
from ylink_data.io.manifest import read_manifest

FAQ_PAGES = "documents/html_faq/recipe_scrapers"


def faq_pages(shared, tmp_path, n=4):
    pages = tmp_path / "pages"
    pages.mkdir()
    for path in sorted((shared / FAQ_PAGES).glob("*.html"))[:n]:
        shutil.copy(path, pages / path.name)
    return pages


def qa_config(pages, out, fmt):
    return {"name": "faq-sft", "input": {"paths": [str(pages)], "format": "html"},
            "output": {"path": str(out), "sft_format": fmt}, "stages": [{"qa_extract": {}}]}


@pytest.mark.parametrize("fmt", ["alpaca", "sharegpt", "messages"])
def test_pairs_become_fine_tuning_jsonl(shared_data, ray_session, tmp_path, fmt):
    pages = faq_pages(shared_data, tmp_path)
    result = ylink_data.run(qa_config(pages, tmp_path / "out", fmt))
    rows = ylink_data.open_run(result.path).to_arrow().to_pylist()
    assert len(rows) > 10
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    section = manifest["sft"]
    assert section["format"] == fmt and section["rows"] == len(rows)
    records = []
    for f in section["files"]:
        data = (tmp_path / "out" / f["path"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (f["bytes"], f["sha256"])
        lines = [json.loads(line) for line in data.decode("utf-8").splitlines()]
        assert len(lines) == f["rows"]
        records += lines
    for row, record in zip(rows, records, strict=True):
        q, a = row["question"], row["answer"]
        if fmt == "alpaca":
            assert (record["instruction"], record["input"], record["output"]) == (q, "", a)
        elif fmt == "sharegpt":
            assert record["conversations"] == [{"from": "human", "value": q}, {"from": "gpt", "value": a}]
        else:
            assert record["messages"] == [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        assert record["meta"]["id"] == row["id"] and record["meta"]["source"] == row["source"]
        assert record["meta"]["qa_method"] == row["qa_method"]
    # the manifest reader checks and lists the JSONL files too (the cache and the mount serve them)
    listed = read_manifest(str(tmp_path / "out")).sft
    assert [f.path for f in listed] == [f["path"] for f in section["files"]]


def test_sft_format_without_pairs_is_one_line(shared_data, ray_session, tmp_path):
    pages = faq_pages(shared_data, tmp_path, n=1)
    cfg = qa_config(pages, tmp_path / "out", "messages")
    cfg["stages"] = [{"extract": {}}]  # text, but no question-answer pairs
    # refused before any work (issue 39 point 19), not when the first shard is published
    with pytest.raises(YlinkError, match=r"output\.sft_format: no stage makes the columns .*question and answer.*qa_extract"):
        ylink_data.run(cfg)
    assert not (tmp_path / "out" / "manifest.json").exists()
