"""`ylink tokenizer train`: a byte-level BPE from runs and any input format, reproducible to the
byte, with a pre-tokenizer that never lets a merge cross punctuation in Chinese."""
from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, decoders

from ylink_data.cli import main
from ylink_data.text.tokens.train import MIN_VOCAB, sample, train_on_texts

from .conftest import SAMPLES, TEST_DATA
from .shardruns import write_run

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _is_punct(c: str) -> bool:  # Chinese and ASCII punctuation and symbols: Unicode P* and S*
    return unicodedata.category(c)[0] in "PS"


@pytest.fixture(scope="module")
def cnews_jsonl(tmp_path_factory) -> Path:
    """THUCNews articles (real Chinese news, research-only: read from ../shared/data) as JSONL."""
    from .conftest import SHARED_DATA

    src = SHARED_DATA / "zh_thucnews_cnews" / "cnews.val.txt"
    if not src.exists():
        pytest.skip(f"research-only data not found at {src} (CI always has ../shared/data)")
    out = tmp_path_factory.mktemp("cnews") / "cnews.jsonl"
    with open(src, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in list(f)[:400]:
            o.write(json.dumps({"text": line.rstrip("\n").split("\t", 1)[1]}, ensure_ascii=False) + "\n")
    return out


def _train(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["tokenizer", "train", *args, "--no-progress"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_same_input_and_seed_give_byte_identical_files(cnews_jsonl, tmp_path, capsys):
    english = str(TEST_DATA / "cc_en_head-0174.jsonl.gz")
    outs = [tmp_path / f"t{i}.json" for i in range(2)]
    for out in outs:
        code, stdout, err = _train(capsys, str(cnews_jsonl), english, "--vocab-size", "2000", "--output", str(out))
        assert code == 0, err
    assert outs[0].read_bytes() == outs[1].read_bytes()
    sha = hashlib.sha256(outs[0].read_bytes()).hexdigest()
    assert f"sha256 {sha}" in stdout and "2,000 tokens" in stdout
    tok = Tokenizer.from_file(str(outs[0]))
    assert tok.get_vocab_size() == 2000
    assert tok.token_to_id("<|endoftext|>") == 0 and tok.token_to_id("<|pad|>") == 1
    text = "新浪体育讯 北京时间3月5日，Hello world! 🙂"
    assert tok.decode(tok.encode(text).ids) == text  # byte-level: lossless, no normaliser


def test_seed_chooses_the_sample_of_max_documents(cnews_jsonl, tmp_path, capsys):
    def train(name: str, seed: int) -> bytes:
        out = tmp_path / name
        code, stdout, err = _train(capsys, str(cnews_jsonl), "--vocab-size", "600", "--output", str(out),
                                   "--max-documents", "50", "--seed", str(seed))
        assert code == 0, err
        assert f"trained on 50 of 400 documents (sampled, seed {seed})" in stdout
        return out.read_bytes()

    assert train("a.json", 1) == train("b.json", 1)
    assert train("c.json", 2) != train("a.json", 1)  # another sample of the documents, another vocabulary


def test_sample_is_a_uniform_reservoir():
    items = [f"doc{i}" for i in range(20)]
    assert sample(iter(items), 50, seed=0) == items  # fewer than k: all, in order
    picks = {x: 0 for x in items}
    for seed in range(2000):
        chosen = sample(iter(items), 5, seed)
        assert len(set(chosen)) == 5 and set(chosen) <= set(items)
        for x in chosen:
            picks[x] += 1
    # each item is kept with probability 5/20: 500 times of 2,000 expected, sd ~19
    assert all(400 < n < 600 for n in picks.values()), picks


def test_chinese_merges_never_cross_punctuation_and_digits_stay_single(cnews_jsonl, tmp_path, capsys):
    out = tmp_path / "zh.json"
    code, _, err = _train(capsys, str(cnews_jsonl), "--vocab-size", "3000", "--output", str(out))
    assert code == 0, err
    tok = Tokenizer.from_file(str(out))
    byte_level = decoders.ByteLevel()
    whole = []  # vocabulary entries that are whole UTF-8 characters
    for piece in tok.get_vocab():
        text = byte_level.decode([piece])
        if "\ufffd" not in text:
            whole.append(text)
    assert sum(bool(HAN.search(t)) and len(t) >= 3 for t in whole) > 100  # Han runs were merged into words
    for text in whole:
        assert not (HAN.search(text) and any(_is_punct(c) for c in text)), text
        if any(c.isdigit() for c in text):
            assert len(text) == 1, text
    # The same on real text, each token's characters found by its offsets (a token that is part of
    # a character covers the whole character).
    articles = [json.loads(line)["text"] for line in open(cnews_jsonl, encoding="utf-8")][:50]
    mixed = digits = 0
    for article in articles:
        enc = tok.encode(article)
        for start, end in enc.offsets:
            piece = article[start:end]
            mixed += bool(HAN.search(piece) and any(_is_punct(c) for c in piece))
            digits += sum(c.isdigit() for c in piece) > 1
        assert tok.decode(enc.ids) == article
    assert mixed == 0 and digits == 0


def test_a_run_folder_is_read_through_its_manifest(tmp_path, capsys):
    run = tmp_path / "run"
    write_run(run, shards=2, docs_per_shard=30)
    out = tmp_path / "from-run.json"
    code, stdout, err = _train(capsys, str(run), "--vocab-size", "800", "--output", str(out))
    assert code == 0, err
    assert "trained on 60 documents" in stdout
    texts = [t for p in sorted((run / "data").glob("*.parquet")) for t in pq.read_table(p)["text"].to_pylist()]
    expected = train_on_texts(texts, 800, show_progress=False).to_str()
    assert out.read_text() == expected


def test_any_input_format(tmp_path, capsys):
    out = tmp_path / "wet.json"
    code, stdout, err = _train(capsys, str(SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.wet.gz"),
                               "--vocab-size", "500", "--output", str(out))
    assert code == 0, err
    from warcio.archiveiterator import ArchiveIterator

    with open(SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.wet.gz", "rb") as f:
        n = sum(1 for r in ArchiveIterator(f) if r.rec_type == "conversion" and r.content_stream().read().strip())
    assert f"trained on {n:,} documents" in stdout
    assert Tokenizer.from_file(str(out)).get_vocab_size() == 500


@pytest.mark.parametrize("case", ["missing input", "vocab too small", "output not writable", "empty input"])
def test_one_line_errors(tmp_path, capsys, case):
    good = str(TEST_DATA / "cc_en_head-0174.jsonl.gz")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    args, expect = {
        "missing input": ([str(tmp_path / "nope.jsonl"), "--vocab-size", "300"], "nope.jsonl"),
        "vocab too small": ([good, "--vocab-size", "100"], f"at least {MIN_VOCAB}"),
        "output not writable": ([good, "--vocab-size", "300", "--output", str(blocker / "t.json")], "a-file"),
        "empty input": ([str(empty), "--vocab-size", "300"], "no documents in"),
    }[case]
    if "--output" not in args:
        args += ["--output", str(tmp_path / "t.json")]
    code, _, err = _train(capsys, *args)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and expect in err, err
    assert not (tmp_path / "t.json").exists()


def test_skipped_input_says_what_and_why(tmp_path, capsys):
    """A 200 MB single-line file (over input.max_record_bytes) and binary bytes named .txt are not
    documents: the error says which files were skipped and why, not only "no documents"."""
    huge, binary = tmp_path / "one-line.txt", tmp_path / "binary.txt"
    line = (SAMPLES.parent / "documents" / "poetry-faq.md").read_bytes().replace(b"\n", b" ")
    with open(huge, "wb") as f:
        for _ in range(200 * 2**20 // len(line) + 1):
            f.write(line)
    binary.write_bytes(hashlib.sha256(b"seed").digest() * 4096)  # 128 KiB that are not UTF-8
    code, _, err = _train(capsys, str(huge), str(binary), "--vocab-size", "300", "--output", str(tmp_path / "t.json"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no documents in" in err and "skipped 2 record(s)" in err
    assert "larger than input.max_record_bytes" in err and f"{huge}@0" in err
    assert "binary content" in err and f"{binary}@" in err
    # Beside a readable input, training goes on and the skipped files are still named.
    good = str(TEST_DATA / "cc_en_head-0174.jsonl.gz")
    code, out, err = _train(capsys, good, str(binary), "--vocab-size", "300", "--output", str(tmp_path / "t.json"))
    assert code == 0 and "trained on" in out
    assert "skipped 1 record(s)" in err and "binary content" in err and str(binary) in err


@pytest.mark.parametrize("vocab", [300, 1000, 32000])
def test_a_vocabulary_smaller_than_asked_is_noticed(tmp_path, capsys, vocab):
    """The BPE trainer stops when no pair of tokens is frequent enough: a small corpus gives fewer
    tokens than --vocab-size. The command says so, with the reason; a vocabulary of the size asked
    gets no notice."""
    good = str(TEST_DATA / "cc_en_head-0174.jsonl.gz")
    code, out, err = _train(capsys, good, "--vocab-size", str(vocab), "--output", str(tmp_path / "t.json"))
    assert code == 0, err
    got = Tokenizer.from_file(str(tmp_path / "t.json")).get_vocab_size()
    assert f"{got:,} tokens" in out
    if got < vocab:
        assert f"notice: the vocabulary has {got:,} tokens, not the {vocab:,} asked" in err
        assert "corpus is too small" in err and len(err.strip().splitlines()) == 1
    else:
        assert got == vocab and "notice" not in err
    assert (vocab == 32000) == (got < vocab)  # 10 documents: a few thousand merges at most


@pytest.mark.parametrize("output", ["folder", "folder/tokenizer.json", "named.json"])
def test_a_folder_output_declares_the_special_tokens(tmp_path, capsys, output):
    """`--output FOLDER` (and a file named tokenizer.json) is a Hugging Face tokenizer folder that
    declares its end-of-document and padding tokens, which transformers' AutoTokenizer reads (and
    megatron-core's tokenizers with it: tests/test_megatron_handoff.py); another .json name is the
    file alone."""
    from transformers import AutoTokenizer

    good = str(TEST_DATA / "cc_en_head-0174.jsonl.gz")
    code, out, err = _train(capsys, good, "--vocab-size", "600", "--output", str(tmp_path / output))
    assert code == 0, err
    written = tmp_path / (output if output.endswith(".json") else f"{output}/tokenizer.json")
    assert out.startswith(f"{written}: 600 tokens")
    folder = written.parent
    beside = sorted(p.name for p in folder.iterdir())
    if written.name != "tokenizer.json":
        assert beside == ["named.json"]
        return
    assert beside == ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "tokenizer_metadata.json"]
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token, tok.pad_token_id) == ("<|endoftext|>", 0, "<|pad|>", 1)
    text = "Hello, 世界. Ids as tokenizers gives them."
    assert tok(text)["input_ids"] == Tokenizer.from_file(str(written)).encode(text).ids
