"""The `tokenize` op: ids exactly `Tokenizer.encode(text).ids` (plus the end-of-document id) on real
English and Chinese text, through a real pipeline on the bundled crawl, with the tokenizer read over
HTTP and S3; token counts in stats.json and the report equal the sums read back from the shards;
one tokenizer thread per Ray task."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

import ylink_data
from ylink_data.core.errors import ConfigError, InputError
from ylink_data.ops.tokenize import Tokenize
from ylink_data.ops.context import OpContext
from ylink_data.text.tokens.train import train_on_texts

from .conftest import SAMPLES, SHARED_DATA, TEST_DATA, quickstart_config
from .httpserver import FileServer

# Texts no corpus sample is sure to hold: nothing, emoji (with a skin-tone modifier and a ZWJ
# sequence), scripts mixed in one word, digits, controls and a lone combining mark.
EDGE_TEXTS = ["", " ", "\n\n", "🙂👍🏽👨‍👩‍👧", "混合mixed文本e.g.中文123", "Ελληνικά русский العربية हिन्दी 日本語",
              "tab\there\r\nCRLF", "\u0301", "1234567890", "<|endoftext|> in text"]


def _english() -> list[str]:
    with gzip.open(TEST_DATA / "cc_en_head-0174.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:150]


@pytest.fixture(scope="module")
def chinese() -> list[str]:
    """THUCNews articles (real Chinese news, research-only: read from ../shared/data)."""
    src = SHARED_DATA / "zh_thucnews_cnews" / "cnews.val.txt"
    if not src.exists():
        pytest.skip(f"research-only data not found at {src} (CI always has ../shared/data)")
    with open(src, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t", 1)[1] for line in f][:150]


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory, chinese) -> Path:
    """ylink's own trainer on real English and Chinese text (the op must work on what it makes)."""
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    path.write_text(train_on_texts(_english() + chinese, 3000, show_progress=False).to_str())
    return path


def _op_ids(op: Tokenize, texts: list) -> tuple[list[list[int]], list[int], pa.Table]:
    out = op.process(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})).table
    return out.column("token_ids").to_pylist(), out.column("num_tokens").to_pylist(), out


def test_ids_equal_encode_on_real_english_and_chinese(tokenizer_path, chinese):
    op = Tokenize(str(tokenizer_path))
    reference = Tokenizer.from_file(str(tokenizer_path))
    texts = _english() + chinese + EDGE_TEXTS + [None]
    ids, counts, table = _op_ids(op, texts)
    for text, got, n in zip(texts, ids, counts):
        want = reference.encode(text or "").ids + [0]  # <|endoftext|> is id 0
        assert got == want and n == len(want), text
    assert table.schema.field("token_ids").type == pa.list_(pa.uint16())
    assert table.schema.field("num_tokens").type == pa.int32()
    assert ids[texts.index("")] == [0]
    zh = ids[len(texts) - len(EDGE_TEXTS) - 1 - len(chinese):len(texts) - len(EDGE_TEXTS) - 1]
    assert len(zh) == 150 and all(len(x) > 10 for x in zh)  # the Chinese articles were tokenized
    # without the end-of-document id, and with another end token named
    plain, _, _ = _op_ids(Tokenize(str(tokenizer_path), append_eod=False), EDGE_TEXTS)
    assert plain == [reference.encode(t).ids for t in EDGE_TEXTS]
    padded, _, _ = _op_ids(Tokenize(str(tokenizer_path), eod_token="<|pad|>"), ["中文"])
    assert padded == [reference.encode("中文").ids + [1]]


def test_padding_and_truncation_of_an_inference_tokenizer_are_off(tokenizer_path, tmp_path, chinese):
    """A tokenizer.json that pads to the batch's longest and cuts at 16 tokens: a batch encode would
    pad every document, and training text must never be cut."""
    tok = Tokenizer.from_file(str(tokenizer_path))
    reference = Tokenizer.from_file(str(tokenizer_path))
    tok.enable_padding(pad_id=1, pad_token="<|pad|>")
    tok.enable_truncation(16)
    path = tmp_path / "inference.json"
    path.write_text(tok.to_str())
    texts = chinese[:20] + EDGE_TEXTS
    ids, _, _ = _op_ids(Tokenize(str(path)), texts)
    assert ids == [reference.encode(t).ids + [0] for t in texts]
    assert max(map(len, ids)) > 16


def test_tokenizer_over_http_and_s3(tokenizer_path, tmp_path):
    from .s3server import s3_server

    texts = _english()[:20] + EDGE_TEXTS
    want, _, _ = _op_ids(Tokenize(str(tokenizer_path)), texts)
    with FileServer(tokenizer_path.parent) as server:
        got, _, _ = _op_ids(Tokenize(server.url("tokenizer.json")), texts)
    assert got == want
    with s3_server(tmp_path / "s3") as s3:
        fs = s3.filesystem()
        fs.mkdir("models")
        fs.put_file(str(tokenizer_path), "models/tok/tokenizer.json")
        op = Tokenize("s3://models/tok/tokenizer.json")
        op.setup(OpContext(storage_options=lambda url: s3.storage_options()))  # as the runner gives `storage:`
        got, _, _ = _op_ids(op, texts)
    assert got == want


@pytest.mark.parametrize("case", ["missing", "invalid", "no such eod token"])
def test_a_bad_tokenizer_is_one_line_naming_the_key(tmp_path, tokenizer_path, case):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.0", "model": {"type": "Nothing"}}')
    params, key, what = {
        "missing": ({"tokenizer": str(tmp_path / "nope.json")}, "tokenize.tokenizer", "nope.json does not exist"),
        "invalid": ({"tokenizer": str(bad)}, "tokenize.tokenizer", "is not a Hugging Face tokenizer.json"),
        "no such eod token": ({"tokenizer": str(tokenizer_path), "eod_token": "</s>"}, "tokenize.eod_token", "</s>"),
    }[case]
    with pytest.raises(InputError) as err:
        Tokenize(**params).setup()
    message = str(err.value)
    assert message.startswith(f"{key}: ") and what in message and "\n" not in message


def test_one_tokenizer_thread_per_ray_task(ray_session, tokenizer_path, chinese):
    """Inside a 1-CPU task the batch is encoded on the task's own thread: the process gains no
    rayon threads (without the op's setting it gained two here, the library's pool on 2 cores)."""
    import ray

    @ray.remote(num_cpus=1)
    def encode_in_task(path: str, texts: list[str]) -> tuple[str | None, int, int, list[list[int]]]:
        import os

        from ylink_data.engine.tasks import cached_op  # as a pipeline's task builds it

        op = cached_op("tokenize", {"tokenizer": path})
        before = len(os.listdir("/proc/self/task"))
        ids = [op.process(pa.table({"text": texts})).table.column("token_ids").to_pylist() for _ in range(3)][0]
        return os.environ.get("TOKENIZERS_PARALLELISM"), before, len(os.listdir("/proc/self/task")), ids

    texts = chinese[:100]
    env, before, after, ids = ray.get(encode_in_task.remote(str(tokenizer_path), texts))
    reference = Tokenizer.from_file(str(tokenizer_path))
    assert ids == [reference.encode(t).ids + [0] for t in texts]
    assert env == "false" and after == before, (before, after)


def _pipeline(out: Path, tokenizer: str, tiers: bool) -> dict:
    cfg = quickstart_config(out)
    cfg["input"]["paths"] = [str(SAMPLES / "*.warc.gz")]
    quality = {"tiers": {"high": 0.5, "low": 0.0}} if tiers else {}
    cfg["stages"] = [{"extract": {}}, {"langid": {"languages": ["en", "zh"], "min_score": 0.5}},
                     {"quality_classifier": quality}, {"tokenize": {"tokenizer": tokenizer}}]
    return cfg


def test_pipeline_on_the_bundled_crawl_counts_tokens(ray_session, tokenizer_path, tmp_path):
    out = tmp_path / "run"
    with FileServer(tokenizer_path.parent) as server:  # every worker reads it over HTTP
        _, stats = ylink_data.run(_pipeline(out, server.url("tokenizer.json"), tiers=True))
    reference = Tokenizer.from_file(str(tokenizer_path))
    total, by_lang, by_tier, docs = 0, Counter(), Counter(), 0
    manifest = json.loads((out / "manifest.json").read_text())
    for shard in manifest["shards"]:
        table = pq.read_table(out / shard["path"])
        for row in table.select(["text", "lang", "token_ids", "num_tokens"]).to_pylist():
            assert row["token_ids"] == reference.encode(row["text"]).ids + [0]
            assert row["num_tokens"] == len(row["token_ids"])
            total += row["num_tokens"]
            by_lang[row["lang"] or "?"] += row["num_tokens"]
            by_tier[shard["tier"]] += row["num_tokens"]
            docs += 1
    assert stats["tokens"] == json.loads((out / "stats.json").read_text())["tokens"]
    assert stats["tokens"]["total"] == total > 10_000 and stats["tokens"]["documents"] == docs == stats["output_records"]
    assert stats["tokens"]["by_lang"] == dict(by_lang) and {"en", "zh"} <= set(by_lang)
    assert stats["tokens"]["by_tier"] == dict(by_tier) and set(by_tier) == {"high", "low"}

    html = Path(ylink_data.write_report(str(out))).read_text()
    section = html.split('<section id="tokens">', 1)[1].split("</section>", 1)[0]
    assert f"{total:,}" in section
    for lang, n in by_lang.items():
        assert f"<td class=\"l\">{lang}</td><td class=\"\">{n:,}</td>" in section
    for tier, n in by_tier.items():
        assert f"<td class=\"l\">{tier}</td><td class=\"\">{n:,}</td>" in section


def test_a_missing_tokenizer_stops_the_run_in_one_line(ray_session, tmp_path):
    # Found while planning, before any work (engine/files_read.py), naming the whole key.
    with pytest.raises(ConfigError) as err:
        ylink_data.run(_pipeline(tmp_path / "run", str(tmp_path / "missing.json"), tiers=False))
    assert str(err.value).startswith("stages[3].tokenize.tokenizer: ") and "missing.json" in str(err.value)
    assert "\n" not in str(err.value)
