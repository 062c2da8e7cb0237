"""MinHash signatures (ylink_data.text.dedup.minhash) on real text: equal to datasketch's for the same
shingles, the same in another process, estimates as close to the exact Jaccard as num_perm allows,
character shingles for Chinese and word shingles for English, datasketch's LSH parameters."""
from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
from datasketch import LeanMinHash, MinHash, MinHashLSH

from ylink_data.text.dedup import (estimate_jaccard, from_datasketch, hash32, is_empty, lsh_params, normalize,
                              shingle_hashes, shingle_unit, shingles, signatures, to_datasketch)
from ylink_data.text.dedup.minhash import sha1_hash32

from .conftest import REPO, TEST_DATA


# ----------------------------------------------------------------------------- real text


def bundled_english() -> list[str]:
    """10 real Common Crawl documents (tests/data, always present)."""
    with gzip.open(TEST_DATA / "cc_en_head-0174.jsonl.gz", "rt") as f:
        return [json.loads(line)["text"] for line in f]


def bundled_chinese() -> list[str]:
    """Real Chinese text always present, if short: trafilatura's evaluation snippets of the Chinese
    pages (tests/data), each page's snippets joined with a newline."""
    data = json.loads((TEST_DATA / "trafilatura_eval_snippets.json").read_text(encoding="utf-8"))
    docs = []
    for entry in data.values():
        text = "\n".join(entry["with"] + entry["without"])
        if sum("\u4e00" <= ch <= "\u9fff" for ch in text) >= 18:
            docs.append(text)
    assert len(docs) >= 4
    return docs


def reuters(shared_data, min_words: int = 0) -> list[str]:
    with gzip.open(shared_data / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        docs = [json.loads(line)["text"] for line in f]
    return [d for d in docs if len(d.split()) >= min_words]


def thucnews(shared_data, min_chars: int = 0) -> list[str]:
    lines = (shared_data / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    docs = [line.split("\t", 1)[1] for line in lines if "\t" in line]
    return [d for d in docs if len(d) >= min_chars]


def datasketch_signature(text: str, lang: str | None, *, num_perm=128, seed=1, scheme="affine32", **kw):
    m = MinHash(num_perm=num_perm, seed=seed, scheme=scheme, hashfunc=hash32)
    m.update_batch(shingles(text, lang, **kw))
    return m.hashvalues


# ----------------------------------------------------------------------------- datasketch compatibility


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_signatures_equal_datasketch_on_bundled_text(scheme):
    texts = bundled_english() + bundled_chinese()
    langs = ["en"] * len(bundled_english()) + ["zh"] * len(bundled_chinese())
    sig = signatures(texts, langs, scheme=scheme)
    assert sig.dtype == (np.uint32 if scheme == "affine32" else np.uint64)
    for row, text, lang in zip(sig, texts, langs):
        assert shingles(text, lang)
        np.testing.assert_array_equal(row, datasketch_signature(text, lang, scheme=scheme))


def test_signatures_equal_datasketch_on_reuters_and_thucnews(shared_data):
    en, zh = reuters(shared_data)[::40], thucnews(shared_data)[::10]
    # Interleaved languages in one batch, two num_perm/seed settings.
    texts = [t for pair in zip(en, zh) for t in pair]
    langs = ["en", "zh"] * min(len(en), len(zh))
    for num_perm, seed in [(128, 1), (64, 42)]:
        sig = signatures(texts, langs, num_perm=num_perm, seed=seed)
        assert sig.shape == (len(texts), num_perm)
        for row, text, lang in zip(sig, texts, langs):
            np.testing.assert_array_equal(row, datasketch_signature(text, lang, num_perm=num_perm, seed=seed))


def test_vectorised_shingle_hashes_are_hash32_of_the_shingle_strings(shared_data):
    texts = reuters(shared_data)[:200] + thucnews(shared_data)[::20]
    langs = ["en"] * 200 + ["zh"] * (len(texts) - 200)
    hashes, offsets = shingle_hashes(texts, langs)
    assert offsets[0] == 0 and offsets[-1] == len(hashes) and np.all(np.diff(offsets) >= 0)
    for i, (text, lang) in enumerate(zip(texts, langs)):
        expected = [hash32(s) for s in shingles(text, lang)]
        assert hashes[offsets[i]:offsets[i + 1]].tolist() == expected


def test_sha1_hashfunc_equals_datasketch_defaults():
    texts = bundled_english()[:4] + bundled_chinese()[:2]
    langs = ["en"] * 4 + ["zh"] * 2
    sig = signatures(texts, langs, hashfunc="sha1")
    for row, text, lang in zip(sig, texts, langs):
        m = MinHash(num_perm=128, seed=1)        # datasketch's defaults: SHA-1 hash, affine32
        m.update_batch([s.encode("utf-8") for s in shingles(text, lang)])
        np.testing.assert_array_equal(row, m.hashvalues)
    from datasketch.hashfunc import sha1_hash32 as ds_sha1

    assert all(sha1_hash32(s) == ds_sha1(s.encode()) for s in shingles(texts[0], "en")[:50])


def test_long_documents_and_small_groups_give_the_same_signatures(monkeypatch):
    """Batches are cut into groups of code points and blocks of shingles; where the cuts fall must
    not change any signature (a document longer than a group, or than a block, included)."""
    from ylink_data.text.dedup import minhash

    long_doc = "\n\n".join(bundled_english() * 4)
    assert len(long_doc) > 1 << 17          # longer than the hashing groups and the cached powers
    texts = bundled_english() + bundled_chinese() + [long_doc]
    langs = ["en"] * len(bundled_english()) + ["zh"] * len(bundled_chinese()) + ["en"]
    whole = signatures(texts, langs)
    np.testing.assert_array_equal(whole[-1], datasketch_signature(long_doc, "en"))
    monkeypatch.setattr(minhash, "_GROUP_CODEPOINTS", 1000)
    monkeypatch.setattr(minhash, "_BLOCK_SHINGLES", 100)
    np.testing.assert_array_equal(signatures(texts, langs), whole)
    one_by_one = np.vstack([signatures([t], lang) for t, lang in zip(texts, langs)])
    np.testing.assert_array_equal(one_by_one, whole)


def test_to_and_from_datasketch_and_lsh_interoperate(shared_data):
    docs = reuters(shared_data, min_words=300)[:40]
    edited = [delete_sentences(d, every=7) for d in docs]
    sig = signatures(docs, "en")
    lean = to_datasketch(sig, seed=1)
    assert all(isinstance(m, LeanMinHash) for m in lean)
    np.testing.assert_array_equal(from_datasketch(lean), sig)
    # Serialised by datasketch and read back.
    buf = bytearray(lean[0].bytesize())
    lean[0].serialize(buf)
    np.testing.assert_array_equal(from_datasketch(LeanMinHash.deserialize(buf)), sig[0])
    # Our signatures in datasketch's LSH index, queried with datasketch's own MinHash of the edits.
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    for i, m in enumerate(lean):
        lsh.insert(i, m)
    found = 0
    for i, text in enumerate(edited):
        query = MinHash(num_perm=128, seed=1, hashfunc=hash32)
        query.update_batch(shingles(text, "en"))
        exact = exact_jaccard(docs[i], text, "en")
        if exact >= 0.7:
            found += i in lsh.query(query)
    assert found >= 0.9 * sum(exact_jaccard(d, e, "en") >= 0.7 for d, e in zip(docs, edited)) > 0
    # And back: datasketch's MinHash into ours.
    np.testing.assert_array_equal(from_datasketch(query), signatures([edited[-1]], "en")[0])


# ----------------------------------------------------------------------------- determinism


def test_same_signatures_in_another_process():
    """Seeded hashes only: a fresh interpreter with a different PYTHONHASHSEED gets the same bits."""
    texts = bundled_english() + bundled_chinese()
    langs = ["en"] * len(bundled_english()) + ["zh"] * len(bundled_chinese())
    here = hashlib.sha256(signatures(texts, langs).tobytes()).hexdigest()
    code = ("import json, sys, hashlib\n"
            "from ylink_data.text.dedup import signatures\n"
            "texts, langs = json.load(sys.stdin)\n"
            "print(hashlib.sha256(signatures(texts, langs).tobytes()).hexdigest())\n")
    for hash_seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps([texts, langs]), text=True,
                             capture_output=True, env=env, cwd=REPO, check=True)
        assert out.stdout.strip() == here


# ----------------------------------------------------------------------------- accuracy on near-duplicates


def sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?。！？])\s*", text)
    return [p for p in parts if p.strip()]


def delete_sentences(text: str, every: int, offset: int = 1) -> str:
    sents = sentences(text)
    return " ".join(s for i, s in enumerate(sents) if (i + offset) % every)


def insert_sentences(text: str, donor: str, every: int) -> str:
    """Every `every`-th sentence followed by one from another real document."""
    sents, extra = sentences(text), sentences(donor)
    out = []
    for i, s in enumerate(sents):
        out.append(s)
        if i % every == every - 1 and extra:
            out.append(extra.pop(0))
    return ("" if any("\u4e00" <= c <= "\u9fff" for c in text[:50]) else " ").join(out)


def exact_jaccard(a: str, b: str, lang: str) -> float:
    sa, sb = set(shingles(a, lang)), set(shingles(b, lang))
    return len(sa & sb) / len(sa | sb)


def near_duplicate_pairs(docs: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for i, doc in enumerate(docs):
        donor = docs[(i + 7) % len(docs)]
        pairs.append((doc, delete_sentences(doc, every=3 + i % 5, offset=i)))
        pairs.append((doc, insert_sentences(doc, donor, every=2 + i % 4)))
    return pairs


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_estimated_jaccard_is_close_to_exact_on_edited_real_articles(shared_data, lang):
    docs = (reuters(shared_data, min_words=250)[:60] if lang == "en"
            else thucnews(shared_data, min_chars=800)[::6][:60])
    pairs = near_duplicate_pairs(docs)
    num_perm = 256
    a = signatures([p[0] for p in pairs], lang, num_perm=num_perm)
    b = signatures([p[1] for p in pairs], lang, num_perm=num_perm)
    est = estimate_jaccard(a, b)
    exact = np.array([exact_jaccard(x, y, lang) for x, y in pairs])
    assert 0.2 < exact.mean() < 0.95 and exact.std() > 0.05     # the edits span a range of similarity
    # Each estimate is a mean of num_perm Bernoulli(J) draws: standard error sqrt(J(1-J)/num_perm).
    se = np.sqrt(exact * (1 - exact) / num_perm)
    assert np.all(np.abs(est - exact) <= 4.5 * se + 1e-9), np.max(np.abs(est - exact) / (se + 1e-12))
    # No bias: the mean error is within 4 standard errors of the mean.
    assert abs(np.mean(est - exact)) <= 4 * math.sqrt(np.sum(se ** 2)) / len(pairs)
    # Unrelated articles of the same corpus are far apart.
    unrelated = estimate_jaccard(a[::2][:-1], a[::2][1:])
    assert np.median(unrelated) < 0.05


# ----------------------------------------------------------------------------- shingles


def test_chinese_gets_character_shingles_and_english_word_shingles():
    en, zh = bundled_english()[0], bundled_chinese()[0]
    en_sh, zh_sh = shingles(en, "en"), shingles(zh, "zh")
    assert all(s.count(" ") == 4 for s in en_sh)                  # five words
    assert all(len(s) == 5 and " " not in s for s in zh_sh)       # five characters
    words = normalize(en).split(" ")
    assert en_sh[0] == " ".join(words[:5]) and len(en_sh) == len(words) - 4
    chars = normalize(zh).replace(" ", "")
    assert zh_sh[1] == chars[1:6] and len(zh_sh) == len(chars) - 4
    # The language picks the unit; `unit` forces it.
    np.testing.assert_array_equal(signatures([zh], "zh"), signatures([zh], None, unit="char"))
    np.testing.assert_array_equal(signatures([zh], ["zh-Hans"]), signatures([zh], "zh"))
    assert not np.array_equal(signatures([zh], "zh"), signatures([zh], "en"))
    np.testing.assert_array_equal(signatures([en], "zh", unit="word"), signatures([en], "en"))
    np.testing.assert_array_equal(signatures([en], "en", word_ngram=3),
                                  datasketch_signature(en, "en", ngram=3)[None, :])


@pytest.mark.parametrize("lang,unit", [("zh", "char"), ("zh-Hant", "char"), ("zh_TW", "char"), ("ja", "char"),
                                       ("jpn", "char"), ("yue", "char"), ("__label__zh", "char"), ("en", "word"),
                                       ("jv", "word"), ("jav", "word"), ("ko", "word"), (None, "word"), ("", "word")])
def test_shingle_unit_by_language(lang, unit):
    assert shingle_unit(lang) == unit
    assert shingle_unit(lang, "word") == "word" and shingle_unit(lang, "char") == "char"


def reference_normalize(text: str) -> str:
    """The normalisation as the docstring states it, character by character with unicodedata."""
    out = []
    for ch in text:
        if unicodedata.category(ch)[0] in "LMN":
            low = ch.lower()
            out.append(low if len(low) == 1 else ch)
        else:
            out.append(" ")
    return re.sub(" +", " ", "".join(out)).strip(" ")


def test_normalize_matches_its_definition_on_real_text():
    texts = bundled_english() + bundled_chinese() + [
        "Ünïcode: café — naïve; İstanbul ΣΊΣΥΦΟΣ 𠀀𠀁 emoji 😀👍 ＡＢＣ１２３ x_y\tnew\nline\u00a0nbsp",
        "हिन्दी में लिखा गया पाठ", "日本語のテキスト、カタカナとひらがな。"]
    for text in texts:
        assert normalize(text) == reference_normalize(text)
    assert normalize("Hello,   WORLD!! 1,000\n") == "hello world 1 000"
    assert shingles("हिन्दी में लिखा गया पाठ है", "hi")[0] == "हिन्दी में लिखा गया पाठ"   # marks stay in words


def test_empty_and_short_documents():
    texts = ["", "   \n\t ", "!!! ... ---", "Hello, world!", "你好！", "a b c d e", "深度学习", "word"]
    langs = ["en", "en", "en", "en", "zh", "en", "zh", "en"]
    sig = signatures(texts, langs)
    assert is_empty(sig).tolist() == [True, True, True, False, False, False, False, False]
    assert np.all(sig[:3] == np.iinfo(np.uint32).max)
    # A document shorter than the n-gram gets one shingle, all of it.
    assert shingles("Hello, world!", "en") == ["hello world"]
    assert shingles("你好！", "zh") == ["你好"]
    assert shingles("a b c d e", "en") == ["a b c d e"]
    assert shingles("", "en") == [] and shingles("!!!", "zh") == []
    for row, text, lang in zip(sig, texts, langs):
        np.testing.assert_array_equal(row, datasketch_signature(text, lang))
    assert is_empty(signatures(["?"], "en")[0]) is True
    assert signatures([], "en").shape == (0, 128)
    hashes, offsets = shingle_hashes(texts, langs)
    assert np.diff(offsets).tolist() == [0, 0, 0, 1, 1, 1, 1, 1]
    # Empty signatures agree with each other everywhere, which is why they are flagged.
    assert estimate_jaccard(sig[0], sig[1]) == 1.0
    assert estimate_jaccard(sig[3], sig[5]) < 0.1


def test_estimate_jaccard_counts_agreeing_positions():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2 ** 32, size=(3, 128), dtype=np.uint32)
    b = a.copy()
    b[0, :32] += 1
    b[1] += 1
    assert estimate_jaccard(a, b).tolist() == [0.75, 0.0, 1.0]
    assert estimate_jaccard(a[0], b[0]) == 0.75
    with pytest.raises(ValueError):
        estimate_jaccard(a[0], a[0][:64])


# ----------------------------------------------------------------------------- LSH parameters


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.75, 0.8, 0.9])
@pytest.mark.parametrize("num_perm", [64, 112, 128, 256])
@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.3, 0.7), (0.8, 0.2)])
def test_lsh_params_equal_datasketch(threshold, num_perm, weights):
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=weights)
    assert lsh_params(threshold, num_perm, *weights) == (lsh.b, lsh.r)


def test_lsh_params_overrides():
    assert lsh_params(0.8, 128, bands=14, rows=8) == (14, 8)
    with pytest.raises(ValueError):
        lsh_params(0.8, 128, bands=20, rows=8)
    with pytest.raises(ValueError):
        lsh_params(0.8, 128, bands=14)
    with pytest.raises(ValueError):
        lsh_params(1.5, 128)
