"""Issue 39, point 18: the width of a token id came from the tokenizer's number of tokens, not from its
largest id. A tokenizer with few tokens but ids above 65,535 (a vocabulary trimmed to one language
keeps the ids of the model it came from; special tokens sit at fixed high ids, as Llama 3's
<|end_of_text|> at 128001) made uint16 token ids, and every task failed on the overflow, on every rerun.

The tokenizers are real: a byte-level BPE trained by `tokenizers` on the bundled crawl, its ids then
laid out the ways real trimmed tokenizers have them (generated below, each one a function from an id to
its new id): the end-of-document token moved up, every id moved up, and the end-of-document id at
the uint16 limit and one past it (it ends every document: each of them holds the largest id). Each
runs through a real pipeline with `tokenize` and `output.megatron`; the ids in the Parquet shards and
the Megatron pairs (read by megatron-core) are `Tokenizer.encode(text).ids` and the end-of-document
id, in the narrowest type that holds the largest id."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

import ylink_data
from ylink_data.core.errors import ConfigError
from ylink_data.text.tokens.load import load_tokenizer

from .conftest import REPO, quickstart_config
from .tokenruns import crawl_tokenizer_json

CRAWL = REPO / "samples" / "crawl"
UINT16_MAX = 2 ** 16 - 1
EOD = "<|endoftext|>"


def _layouts() -> dict[str, Callable[[int, str], int]]:
    """How ids are laid out, as a function of (old id, token)."""
    return {
        "end of document at 128001": lambda i, t: 128001 if t == EOD else i,
        "every id past 100000": lambda i, t: 100_000 + i,
        "end of document at 65535, the largest uint16": lambda i, t: UINT16_MAX if t == EOD else i,
        "end of document at 65536": lambda i, t: UINT16_MAX + 1 if t == EOD else i,
    }


def _relaid(layout: Callable[[int, str], int]) -> str:
    """The trained tokenizer.json with every id of its vocabulary and added tokens moved by `layout`."""
    spec = json.loads(crawl_tokenizer_json())
    spec["model"]["vocab"] = {token: layout(i, token) for token, i in spec["model"]["vocab"].items()}
    for added in spec["added_tokens"]:
        added["id"] = layout(added["id"], added["content"])
    return json.dumps(spec)


@pytest.mark.parametrize("name", sorted(_layouts()))
def test_ids_are_as_wide_as_the_largest_id_in_shards_and_megatron_pairs(name, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(_relaid(_layouts()[name]))
    tok = Tokenizer.from_file(str(path))
    largest = max(tok.get_vocab(with_added_tokens=True).values())
    assert tok.get_vocab_size(with_added_tokens=True) < 2000  # few tokens, whatever their ids
    wide = largest > UINT16_MAX
    assert load_tokenizer(str(path)).dtype == ("uint32" if wide else "uint16")

    cfg = quickstart_config(tmp_path / "out")
    cfg["input"]["paths"] = [str(CRAWL / "CC-MAIN-2020-34-excerpt.warc.gz")]
    cfg["output"]["megatron"] = {}
    cfg["stages"] = [{"extract": {}}, {"tokenize": {"tokenizer": str(path)}}]
    out = Path(ylink_data.run(cfg, progress=False).path)

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["megatron"]["dtype"] == ("int32" if wide else "uint16")  # Megatron's .idx has no uint32
    eod = tok.token_to_id(EOD)
    with warnings.catch_warnings():  # megatron-core warns that Apex/Transformer Engine are absent (CPU)
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    seen = set()
    for shard, pair in zip(manifest["shards"], manifest["megatron"]["files"], strict=True):
        table = pq.read_table(out / shard["path"], columns=["text", "token_ids"])
        assert table.schema.field("token_ids").type.value_type == (pa.uint32() if wide else pa.uint16())
        pairs = IndexedDataset(str(out / pair["prefix"]))
        for i, (text, ids) in enumerate(zip(table.column("text").to_pylist(), table.column("token_ids").to_pylist())):
            assert ids == tok.encode(text).ids + [eod] == pairs[i].tolist()
            seen.update(ids)
    assert eod in seen


def test_megatron_refuses_ids_past_int32_before_any_work(tmp_path):
    """Megatron's widest id type is int32: a tokenizer with an id past it is refused when the run
    plans its outputs, naming the largest id, not in a task."""
    path = tmp_path / "tokenizer.json"
    path.write_text(_relaid(lambda i, t: 2 ** 31 if t == EOD else i))
    cfg = quickstart_config(tmp_path / "out")
    cfg["input"]["paths"] = [str(CRAWL / "CC-MAIN-2020-34-excerpt.warc.gz")]
    cfg["output"]["megatron"] = {}
    cfg["stages"] = [{"extract": {}}, {"tokenize": {"tokenizer": str(path)}}]
    with pytest.raises(ConfigError, match="token id 2,147,483,648 does not fit int32"):
        ylink_data.run(cfg, progress=False)
    assert not (tmp_path / "out" / "data").exists()
