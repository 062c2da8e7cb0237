"""Everything ylink reads back that it (or a finished run) wrote earlier is checked before it is trusted
(issue 33, points 2 and 3), whatever the damage: for every kind of file read back, damages generated
with a fixed seed (bytes flipped in place, runs of bytes zeroed, the body zeroed with its head and tail
intact, cut short) are each refused, or the file is made again from its source, never used as it is.

Kinds: a finished run's shard read as input, the decontamination index in its cache folder, an LLM
response cache entry, a quality model's local copy of a remote file, a saved minhash index's file.
"""
from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Callable

import fsspec
import pytest

import ylink_data
from ylink_data.core.errors import InputError, YlinkError
from ylink_data.io.readers import Split, open_split
from ylink_data.io.llm.cache import CachedAnswer, ResponseCache, request_key
from ylink_data.text.transform.ngram_index import IndexWriter, NgramIndex, NotAnIndex

from ..conftest import REPO, TEST_DATA

SEED = 33


def _damages(size: int, rng: random.Random, tail: int) -> list[Callable[[bytes], bytes]]:
    """Damages of a file of `size` bytes that keep its last `tail` bytes (a footer) unless cut short."""
    def flip(at: int) -> Callable[[bytes], bytes]:
        return lambda b: b[:at] + bytes([b[at] ^ (1 << rng.randrange(8))]) + b[at + 1:]

    def zero(start: int, end: int) -> Callable[[bytes], bytes]:
        return lambda b: b[:start] + bytes(end - start) + b[end:] if any(b[start:end]) else flip(start)(b)

    body = max(size - tail, 2)
    out = [flip(rng.randrange(body)) for _ in range(6)]
    for _ in range(3):
        start = rng.randrange(body - 1)
        out.append(zero(start, min(body, start + rng.randrange(1, 64))))
    out.append(zero(min(64, body - 1), body))  # the body zeroed, head and tail intact
    out.append(lambda b: b[:len(b) // 2])  # cut short
    return out


def _index_file(tmp: Path) -> Path:
    with gzip.open(TEST_DATA / "cc_en_head-0174.jsonl.gz", "rt") as f:
        texts = [line[:400] for line in f][:60]
    path = tmp / "index.ngrams"
    with open(path, "wb") as out:
        writer = IndexWriter(out)
        writer.add("cc", [(texts, [str(i) for i in range(len(texts))])])
        writer.finish({"key": "k"})
    return path


def _cache_entry(tmp: Path) -> tuple[ResponseCache, str, Path]:
    cache = ResponseCache(str(tmp / "llm-cache"))
    key = request_key("m", [{"role": "user", "content": "Name the capital of France."}], {"temperature": 0})
    cache.put(key, CachedAnswer("The capital of France is Paris.", "stop", 12, 8))
    return cache, key, next((tmp / "llm-cache").rglob("*.json"))


def test_a_damaged_index_is_never_opened(tmp_path):
    rng = random.Random(SEED)
    path = _index_file(tmp_path)
    whole = path.read_bytes()
    NgramIndex.open(path)
    tail = 16 + int.from_bytes(whole[-16:-8], "little")  # the footer: JSON, its length, MAGIC
    for damage in _damages(len(whole), rng, tail):
        path.write_bytes(damage(whole))
        assert path.read_bytes() != whole
        with pytest.raises(NotAnIndex):
            NgramIndex.open(path)
        path.write_bytes(whole)
        NgramIndex.open(path)  # whole again: opened


def test_a_damaged_llm_cache_entry_is_asked_again(tmp_path):
    rng = random.Random(SEED)
    cache, key, path = _cache_entry(tmp_path)
    whole = path.read_bytes()
    assert cache.get(key) == CachedAnswer("The capital of France is Paris.", "stop", 12, 8)
    edits = [lambda b: b.replace(b"Paris", b"Lyon!"),  # JSON still, the answer changed
             lambda b: b.replace(b'"prompt_tokens": 12', b'"prompt_tokens": 99')]
    for damage in [*edits, *_damages(len(whole), rng, 0)]:
        path.write_bytes(damage(whole))
        assert path.read_bytes() != whole
        assert cache.get(key) is None
    path.write_bytes(whole)
    other = request_key("m", [{"role": "user", "content": "Name the capital of Spain."}], {"temperature": 0})
    moved = Path(cache._path(other))  # a whole entry filed under another request's name
    moved.parent.mkdir(parents=True, exist_ok=True)
    moved.write_bytes(whole)
    assert cache.get(other) is None and cache.get(key) is not None


def test_a_damaged_local_copy_of_a_remote_model_is_fetched_again(tmp_path, monkeypatch):
    from ylink_data.text.quality.model import local_copy

    rng = random.Random(SEED)
    monkeypatch.setenv("YLINK_QUALITY_CACHE", str(tmp_path / "qcache"))
    model = (REPO / "ylink_data" / "assets" / "models" / "quality-en.bin").read_bytes()
    fsspec.filesystem("memory").pipe_file("/models/q.bin", model)
    try:
        copy = Path(local_copy("memory://models/q.bin"))
        assert copy.read_bytes() == model
        for damage in _damages(len(model), rng, 0):
            copy.write_bytes(damage(model))
            assert Path(local_copy("memory://models/q.bin")).read_bytes() == model
    finally:
        fsspec.filesystem("memory").rm("/models/q.bin")


@pytest.fixture
def finished_run(tmp_path, shared_data) -> Path:
    with gzip.open(shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        (tmp_path / "docs.jsonl").write_text("".join(f.readlines()[:200]))
    out = tmp_path / "run"
    ylink_data.run({"name": "r", "input": {"paths": [str(tmp_path / "docs.jsonl")]}, "output": {"path": str(out)},
                    "stages": [{"minhash_dedup": {"save_index": str(tmp_path / "saved")}}]}, progress=False)
    return out


def test_a_damaged_shard_of_a_finished_run_is_refused_naming_it(finished_run):
    rng = random.Random(SEED)
    run = ylink_data.open_run(str(finished_run))
    shard = run.manifest["shards"][0]
    path = finished_run / shard["path"]
    whole = path.read_bytes()
    split = Split(str(path), "parquet", len(whole), run_shard=True, sha256=shard["sha256"])
    with open_split(split, {}) as f:
        assert f.read() == whole
    for damage in _damages(len(whole), rng, 8):
        path.write_bytes(damage(whole))
        with pytest.raises(InputError, match=f"^{path}: its sha256 is not the one its run's manifest.json lists"):
            with open_split(split, {}):
                pass


def test_a_damaged_file_of_a_saved_minhash_index_is_refused(finished_run, tmp_path):
    rng = random.Random(SEED)
    saved = tmp_path / "saved"
    part = sorted(p for p in saved.rglob("*.parquet"))[0]
    whole = part.read_bytes()
    for n, damage in enumerate(_damages(len(whole), rng, 8)[::3]):  # each case is a run: a few of them
        part.write_bytes(damage(whole))
        with pytest.raises(YlinkError, match="does not match"):
            ylink_data.run({"name": "again", "input": {"paths": [str(tmp_path / "docs.jsonl")]},
                            "output": {"path": str(tmp_path / f"again{n}")},
                            "stages": [{"minhash_dedup": {"index": str(saved)}}]}, progress=False)
