"""Small real token runs for the token loader's and mixtures' tests: documents of the bundled crawl
(`shardruns.crawl_documents`) tokenized by a real byte-level BPE trained on them, written as Megatron
pairs by ylink's own writer, with the manifest a run writes."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

from ylink_data.text.tokens.encode import encode_texts
from ylink_data.text.tokens.load import load_tokenizer
from ylink_data.io.megatron.write import megatron_section, write_pair

from .shardruns import crawl_documents


@lru_cache(maxsize=1)
def crawl_tokenizer_json() -> str:
    """A 1,000-token byte-level BPE trained on the bundled crawl's documents (JSON text)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<|endoftext|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(crawl_documents(), trainer)
    return tok.to_str()


def crawl_tokenizer(folder: Path) -> Path:
    path = folder / "tokenizer.json"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(crawl_tokenizer_json())
    return path


def write_token_run(root: Path, docs_per_shard: list[int], start: int = 0) -> dict:
    """A run folder whose shard i holds `docs_per_shard[i]` crawl documents (from document `start`),
    as Megatron pairs only; returns its manifest. Token ids come from the real tokenizer."""
    tok = load_tokenizer(str(crawl_tokenizer(root.parent / "tokenizer")))
    docs = crawl_documents()
    assert start + sum(docs_per_shard) <= len(docs)
    fs, files, at = LocalFileSystem(), [], start
    for i, n in enumerate(docs_per_shard):
        token_ids, _ = encode_texts(tok, list(docs[at:at + n]))
        at += n
        files.append(write_pair(fs, str(root), f"megatron/part-{i:05d}", pa.chunked_array([token_ids]), tok.dtype))
    manifest = {"version": 1, "shards": [], "megatron": megatron_section(files, tok.dtype, tok.describe())}
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest
