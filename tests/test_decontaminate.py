"""decontaminate: real benchmark items (GSM8K, HumanEval, and Chinese sentences of THUCNews articles
used as a Chinese "benchmark") planted verbatim and lightly edited into real text (Reuters news,
THUCNews), through real pipeline runs. What must be dropped is computed independently: a brute-force
reference below (Python's unicodedata, token tuples, no hashing) that follows the documented rules,
down to which item and which n-gram a match reports. The index file each machine builds once and
its workers share: built by one of several processes that race for it, reused by later runs, built
again when a benchmark file changes or the file is damaged."""
from __future__ import annotations

import gzip
import json
import os
import pickle
import random
import re
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ylink_data
from ylink_data.engine.config import validate_config
from ylink_data.core.errors import ConfigError, InputError
from ylink_data.io.benchmarks import read_benchmark
from ylink_data.ops.decontaminate import CACHE_ENV, Decontaminate
from ylink_data.text.transform import ngrams
from ylink_data.text.transform.ngram_index import NgramIndex

from .httpserver import FileServer
from .s3server import s3_server

N = 13


@pytest.fixture(autouse=True)
def _index_cache(tmp_path, monkeypatch):
    """Index files of ops set up in this process go to the test's folder, not the home folder's cache
    (pipeline runs get `cache_dir` in their config: Ray's workers do not see this environment)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env-cache"))


# ----------------------------------------------------------------------------- the reference


def _cjk(ch: str) -> bool:
    name = unicodedata.name(ch, "")
    return name.startswith(("CJK UNIFIED IDEOGRAPH", "HIRAGANA", "KATAKANA"))


def ref_tokens(text: str) -> list[str]:
    """The documented normalisation, written out by hand: NFKC, lowercase, letters/digits/marks make
    words, every other character separates, each CJK character is a token."""
    out, word = [], ""
    for ch in unicodedata.normalize("NFKC", text).lower():
        if _cjk(ch):
            out += [word] if word else []
            out.append(ch)
            word = ""
        elif unicodedata.category(ch)[0] in "LNM":
            word += ch
        else:
            out += [word] if word else []
            word = ""
    return out + ([word] if word else [])


def ref_grams(items: list[str], n: int = N, min_tokens: int = 8) -> set[tuple[str, ...]]:
    grams = set()
    for item in items:
        t = ref_tokens(item)
        size = n if len(t) >= n else (len(t) if len(t) >= min_tokens else 0)
        grams |= {tuple(t[i:i + size]) for i in range(len(t) - size + 1)} if size else set()
    return grams


def ref_contaminated(text: str, grams: set[tuple[str, ...]]) -> bool:
    t = ref_tokens(text)
    sizes = {len(g) for g in grams}
    return any(tuple(t[i:i + s]) in grams for s in sizes for i in range(len(t) - s + 1))


# ----------------------------------------------------------------------------- the data


def _reuters(shared: Path, count: int) -> list[str]:
    with gzip.open(shared / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt") as f:
        return [json.loads(line)["text"] for line, _ in zip(f, range(count))]


def _thucnews(shared: Path) -> list[str]:
    lines = (shared / "zh_thucnews_cnews" / "cnews.val.txt").read_text().splitlines()
    return [line.split("\t", 1)[1] for line in lines]


def _gsm8k(shared: Path) -> list[dict]:
    return [json.loads(line) for line in (shared / "benchmarks" / "gsm8k" / "test.jsonl").read_text().splitlines()]


def _humaneval(shared: Path) -> list[dict]:
    with gzip.open(shared / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def _zh_items(articles: list[str]) -> list[str]:
    """A Chinese "benchmark": the first sentence of 30 to 60 characters of THUCNews articles 900+
    (articles the corpus below does not use)."""
    items = []
    for text in articles[900:]:
        for sentence in re.findall(r"[^。！？]{30,60}。", text):
            items.append(sentence)
            break
        if len(items) == 12:
            break
    return items


def _insert(text: str, planted: str, rng: random.Random) -> str:
    """`planted` inside `text`, at a paragraph or sentence boundary chosen by `rng`."""
    cuts = [m.end() for m in re.finditer(r"\n|。", text)] or [len(text)]
    at = rng.choice(cuts)
    return text[:at] + planted + "\n" + text[at:]


def _edit_en(question: str) -> str:
    """Light edits: upper case, punctuation removed, the 6th word changed."""
    words = question.upper().replace(",", "").replace(".", " ").replace("?", "").split()
    words[5] = "BANANAS"
    return " ".join(words)


def _edit_zh(sentence: str) -> str:
    """Light edits: punctuation changed to ASCII and full-width spacing, one character in the middle changed."""
    middle = len(sentence) // 2
    sentence = sentence[:middle] + ("的" if sentence[middle] != "的" else "了") + sentence[middle + 1:]
    return sentence.replace("，", ", ").replace("。", "．")


@pytest.fixture
def corpus(shared_data, tmp_path):
    """(input JSONL, zh benchmark file, {text: expected kind}, gsm8k, humaneval, zh items)."""
    rng = random.Random(16)
    news, zh = _reuters(shared_data, 80), _thucnews(shared_data)
    gsm8k, humaneval, zh_items = _gsm8k(shared_data), _humaneval(shared_data), _zh_items(zh)
    long_questions = [i for i, row in enumerate(gsm8k) if len(row["question"].split()) >= 40][:20]
    docs: dict[str, str] = {}
    for text in news[:40] + zh[:20]:
        docs[text] = "clean"
    for k, i in enumerate(long_questions[:10]):
        docs[_insert(news[40 + k], gsm8k[i]["question"], rng)] = f"verbatim:gsm8k:{i}"
    for k, i in enumerate(long_questions[10:20]):
        docs[_insert(news[50 + k], _edit_en(gsm8k[i]["question"]), rng)] = f"edited:gsm8k:{i}"
    for k, i in enumerate((3, 77)):
        docs[_insert(news[60 + k], humaneval[i]["prompt"], rng)] = f"verbatim:humaneval:{humaneval[i]['task_id']}"
    for k, i in enumerate(long_questions[:5]):  # look-alikes: a run of 12 words of a question, no more
        words = ref_tokens(gsm8k[i]["question"])[:12]
        docs[_insert(news[62 + k], " ".join(words), rng)] = "lookalike"
    for k, i in enumerate(range(0, 5)):
        docs[_insert(zh[20 + k], zh_items[i], rng)] = f"verbatim:zh:{i}"
    for k, i in enumerate(range(5, 10)):
        docs[_insert(zh[25 + k], _edit_zh(zh_items[i]), rng)] = f"edited:zh:{i}"
    for k, i in enumerate(range(10, 12)):  # 12 characters of an item: spared
        docs[_insert(zh[30 + k], zh_items[i][3:15], rng)] = "lookalike"
    path = tmp_path / "in" / "docs.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs))
    zh_bench = tmp_path / "bench" / "zh_news.jsonl"
    zh_bench.parent.mkdir()
    zh_bench.write_text("".join(json.dumps({"question": q}, ensure_ascii=False) + "\n" for q in zh_items))
    return path, zh_bench, docs, gsm8k, humaneval, zh_items


def _benchmarks(shared: Path, zh_bench: Path, gsm8k_url: str | None = None, humaneval_url: str | None = None):
    return [{"path": gsm8k_url or str(shared / "benchmarks" / "gsm8k" / "test.jsonl"), "fields": ["question"]},
            {"path": humaneval_url or str(shared / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"),
             "fields": ["prompt"], "id_field": "task_id"},
            {"path": str(zh_bench), "fields": ["question"]}]


def _config(inp: Path, out: Path, stage: dict, **extra) -> dict:
    stage = {"cache_dir": str(out.parent / "ngram-cache"), **stage}
    return {"name": "decont", "input": {"paths": [str(inp)]}, "output": {"path": str(out), "keep_rejected": True},
            "stages": [{"decontaminate": stage}], **extra}


# ----------------------------------------------------------------------------- runs


def test_drop_mode_drops_planted_items_and_spares_look_alikes(ray_session, corpus, shared_data, tmp_path):
    path, zh_bench, docs, gsm8k, humaneval, zh_items = corpus
    grams = ref_grams([r["question"] for r in gsm8k] + [r["prompt"] for r in humaneval] + zh_items)
    expected = {t for t in docs if ref_contaminated(t, grams)}
    planted = {t for t, kind in docs.items() if kind.startswith(("verbatim", "edited"))}
    assert planted == expected  # the reference agrees with what was planted: every edit still matches,
    #                             look-alikes and the clean news share no 13-gram with any item

    ylink_data.run(_config(path, tmp_path / "out", {"benchmarks": _benchmarks(shared_data, zh_bench)}))
    run = ylink_data.open_run(tmp_path / "out")
    rejected = run.rejected("decontaminate").to_pylist()
    assert {r["text"] for r in rejected} == expected
    kept = run.to_arrow().to_pylist()
    assert {r["text"] for r in kept} == set(docs) - expected
    assert all(r["decontaminate_item"] is None for r in kept)
    reasons = {"gsm8k": "decontaminate:test.jsonl", "humaneval": "decontaminate:HumanEval.jsonl.gz",
               "zh": "decontaminate:zh_news.jsonl"}
    for row in rejected:
        kind, bench, item = docs[row["text"]].split(":", 2)
        assert row["reason"] == reasons[bench] and row["decontaminate_item"] == item, (row["reason"], kind)
        assert row["decontaminate_benchmark"] == reasons[bench].split(":", 1)[1]
        assert row["decontaminate_ngram"] and " ".join(ref_tokens(row["decontaminate_ngram"])) in " ".join(
            ref_tokens(row["text"]))
    stage = run.stats["stages"][1]
    assert stage["name"] == "decontaminate"
    want = {}
    for t in expected:
        want[reasons[docs[t].split(":")[1]]] = want.get(reasons[docs[t].split(":")[1]], 0) + 1
    assert stage["dropped"] == want and stage["out"] == len(docs) - len(expected)


def test_annotate_mode_over_http_and_s3_keeps_everything_and_marks_matches(ray_session, corpus, shared_data,
                                                                             tmp_path):
    path, zh_bench, docs, gsm8k, humaneval, zh_items = corpus
    served = tmp_path / "served"
    served.mkdir()
    (served / "gsm8k.jsonl").write_bytes((shared_data / "benchmarks" / "gsm8k" / "test.jsonl").read_bytes())
    with FileServer(served) as http, s3_server(tmp_path / "s3") as s3:
        fs = s3.filesystem()
        fs.mkdir("evals")
        fs.put_file(str(shared_data / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"), "evals/he/HumanEval.jsonl.gz")
        benchmarks = _benchmarks(shared_data, zh_bench, http.url("gsm8k.jsonl"), "s3://evals/he/HumanEval.jsonl.gz")
        ylink_data.run(_config(path, tmp_path / "out", {"benchmarks": benchmarks, "mode": "annotate"},
                               storage={"s3": s3.storage_options()}))
        assert http.gets("gsm8k.jsonl")
    run = ylink_data.open_run(tmp_path / "out")
    rows = run.to_arrow().to_pylist()
    assert len(rows) == len(docs) and run.stats["stages"][1]["dropped"] == {}
    names = {"gsm8k": "gsm8k.jsonl", "humaneval": "HumanEval.jsonl.gz", "zh": "zh_news.jsonl"}
    counts: dict[str, int] = {}
    for row in rows:
        kind = docs[row["text"]]
        if kind.startswith(("verbatim", "edited")):
            _, bench, item = kind.split(":", 2)
            assert (row["decontaminate_benchmark"], row["decontaminate_item"]) == (names[bench], item)
            counts[f"matched:{names[bench]}"] = counts.get(f"matched:{names[bench]}", 0) + 1
        else:
            assert row["decontaminate_benchmark"] is None and row["decontaminate_ngram"] is None, kind
    assert run.stats["stages"][1]["counters"] == counts


def test_a_missing_benchmark_stops_the_run_in_one_line_naming_the_key(ray_session, corpus, tmp_path):
    path, zh_bench, *_ = corpus
    missing = str(tmp_path / "nope" / "mmlu.jsonl")
    # Found while planning, before any work (engine/files_read.py), as `ylink validate` finds it.
    with pytest.raises(ConfigError) as err:
        ylink_data.run(_config(path, tmp_path / "out", {"benchmarks": [{"path": missing, "fields": ["question"]}]}))
    message = str(err.value)
    assert message.startswith("stages[0].decontaminate.benchmarks[0].path: ") and "mmlu.jsonl does not exist" in message
    assert "\n" not in message


# ----------------------------------------------------------------------------- config errors


@pytest.mark.parametrize("stage, key, words", [
    ({"benchmarks": [{"path": "x.jsonl", "fields": ["q"]}], "mode": "delete"}, "stages[0].decontaminate.mode",
     "'drop' or 'annotate'"),
    ({"benchmarks": [{"path": "x.jsonl", "feilds": ["q"]}]}, "stages[0].decontaminate: benchmarks[0].feilds",
     "did you mean 'fields'"),
    ({"benchmarks": [{"path": "x.jsonl", "fields": []}]}, "stages[0].decontaminate: benchmarks[0].fields", "e.g."),
    ({"benchmarks": [{"fields": ["q"]}]}, "stages[0].decontaminate: benchmarks[0].path", "JSONL"),
    ({"benchmarks": []}, "stages[0].decontaminate.benchmarks", "at least 1"),
    ({"benchmarks": [{"path": "x.jsonl", "fields": ["q"]}], "ngram": 1}, "stages[0].decontaminate.ngram", "2"),
])
def test_config_errors_point_at_the_key(stage, key, words):
    with pytest.raises(ConfigError) as err:
        validate_config({"input": {"paths": ["x.jsonl"]}, "output": {"path": "out"},
                         "stages": [{"decontaminate": stage}]})
    assert key in str(err.value) and words in str(err.value), str(err.value)


def test_an_unknown_field_names_the_key_and_the_fields_the_file_has(shared_data, tmp_path):
    op = Decontaminate(benchmarks=[{"path": str(shared_data / "benchmarks" / "gsm8k" / "test.jsonl"),
                                    "fields": ["questoin"]}], cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError) as err:
        op.setup()
    assert str(err.value).startswith("decontaminate.benchmarks[0].fields: 'questoin' is not a field of ")
    assert "did you mean 'question'" in str(err.value) and "answer, question" in str(err.value)
    assert list((tmp_path / "cache").iterdir()) == []  # the failed build leaves no file, lock or index


def test_a_missing_column_names_the_column_parameter(shared_data):
    op = Decontaminate(benchmarks=[{"path": str(shared_data / "benchmarks" / "gsm8k" / "test.jsonl"),
                                    "fields": ["question"]}], column="instruction")
    with pytest.raises(InputError, match=r"^decontaminate\.column: the documents have no column 'instruction'"):
        op.process(pa.table({"id": ["a"], "text": ["x"]}))


# ----------------------------------------------------------------------------- the parts


def test_the_vectorised_hashes_equal_the_hash_of_each_ngram_computed_alone(shared_data):
    texts = _reuters(shared_data, 5) + _thucnews(shared_data)[:3] + ["", "one two"]
    tokens = ngrams.token_hashes(pa.array(texts, pa.large_string()))
    words = tokens.words.to_pylist()
    starts, hashes = ngrams.ngram_hashes(tokens, N)
    assert len(starts) == sum(max(0, len(ref_tokens(t)) - N + 1) for t in texts)
    for k in range(0, len(starts), 97):
        assert ngrams.hash_ngram(words[starts[k]:starts[k] + N]) == int(hashes[k])
    for text, d in zip(texts, range(len(texts))):  # the normalisation is the reference's
        assert words[tokens.offsets[d]:tokens.offsets[d + 1]] == ref_tokens(text)


def test_normalisation_ignores_case_punctuation_width_and_spacing():
    assert ref_tokens("Janet’s ducks, ＬＡＹ １６ eggs!") == ["janet", "s", "ducks", "lay", "16", "eggs"]
    assert ngrams.tokenize(pa.array(["Janet’s ducks, ＬＡＹ １６ eggs!", "小明有３个苹果。"])).to_pylist() == [
        ["janet", "s", "ducks", "lay", "16", "eggs"], ["小", "明", "有", "3", "个", "苹", "果"]]


def test_short_items_are_matched_whole_from_eight_tokens_and_skipped_below(shared_data):
    news = _reuters(shared_data, 3)
    nine = "The bakery sold forty two loaves on Tuesday morning"  # 9 words: matched whole
    five = "the total number of apples"  # 5 words: skipped, too generic
    index = NgramIndex.build([("short", [nine, five], ["0", "1"])])
    assert index.lengths == (9,) and index.skipped == 1
    texts = [news[0] + " " + nine.upper() + "!", news[1] + " " + five, news[2] + " " + " ".join(nine.split()[:8])]
    matches = index.find(pa.array(texts, pa.large_string()))
    assert matches[0] is not None and matches[0].item == "0" and matches[0].ngram == nine.lower()
    assert matches[1] is None and matches[2] is None


def test_an_english_item_quoted_in_a_chinese_page_is_found(shared_data):
    zh = _thucnews(shared_data)[0]
    question = _gsm8k(shared_data)[0]["question"]
    index = NgramIndex.build([("gsm8k", [question], ["0"])])
    page = zh[:200] + "原题如下：" + question + zh[200:400]
    assert [m is not None for m in index.find(pa.array([page, zh]))] == [True, False]


def test_instruction_data_is_checked_in_the_column_named(shared_data):
    gsm8k = _gsm8k(shared_data)
    op = Decontaminate(benchmarks=[{"path": str(shared_data / "benchmarks" / "gsm8k" / "test.jsonl"),
                                    "fields": ["question"]}], column="instruction", mode="drop")
    table = pa.table({"id": ["a", "b"], "text": [gsm8k[4]["question"], "an answer"],
                      "instruction": ["Solve: " + gsm8k[4]["question"].lower(), gsm8k[4]["answer"]]})
    result = op.process(table)
    assert result.dropped == ["decontaminate:test.jsonl", None]
    assert result.table.column("decontaminate_item").to_pylist() == ["4", None]


def test_a_hash_without_its_ngram_in_the_item_is_not_a_match(shared_data):
    """A 64-bit hash collision must not drop a document: force one by giving a clean text's n-gram
    hash to the index, pointing at an item that does not hold that n-gram."""
    question = _gsm8k(shared_data)[0]["question"]
    clean = _reuters(shared_data, 1)[0]
    index = NgramIndex.build([("gsm8k", [question], ["0"])])
    _, hashes = ngrams.ngram_hashes(ngrams.token_hashes(pa.array([clean])), N)
    collided = index.with_hashes(np.sort(np.append(index.hashes, hashes[0])), np.zeros(index.size + 1, np.int32))
    assert collided.find(pa.array([clean])) == [None]
    assert index.find(pa.array([clean + " " + question])) != [None]  # the same index finds the item itself



# ----------------------------------------------------------------------------- against brute force


def ref_text(gram: tuple[str, ...]) -> str:
    """An n-gram as the op reports it: tokens joined by spaces, none between two CJK characters."""
    out = gram[0]
    for before, token in zip(gram, gram[1:]):
        out += ("" if _cjk(before[-1]) and _cjk(token[0]) else " ") + token
    return out


def ref_first_items(benchmarks: list[tuple[str, list[str], list[str], int]], min_tokens: int) -> dict:
    """{n-gram: (benchmark, item id)} of every item's n-grams (n given per benchmark; an item shorter
    than n whole from `min_tokens`), the first item in config and file order kept for each."""
    first: dict[tuple[str, ...], tuple[str, str]] = {}
    for name, texts, ids, n in benchmarks:
        for text, item in zip(texts, ids):
            t = ref_tokens(text)
            size = n if len(t) >= n else (len(t) if len(t) >= min_tokens else 0)
            for i in range(len(t) - size + 1 if size else 0):
                first.setdefault(tuple(t[i:i + size]), (name, item))
    return first


def ref_match(text: str, first: dict, sizes: list[int]) -> tuple[str, str, str] | None:
    """(benchmark, item, n-gram) of the first n-gram of the text an item holds: in text order, the
    longer first where two start together."""
    t = ref_tokens(text)
    for i in range(len(t)):
        for size in sizes:
            gram = tuple(t[i:i + size])
            if len(gram) == size and gram in first:
                return (*first[gram], ref_text(gram))
    return None


@pytest.mark.parametrize("ngram, ngram_zh", [(13, 13), (8, 10)])
def test_matches_are_the_brute_force_search_s_down_to_the_item_and_the_ngram(corpus, shared_data, tmp_path,
                                                                              ngram, ngram_zh):
    """Four real benchmarks (one of short items: each GSM8K answer's first line, 5 to 30 words, so
    several n-gram lengths take part), against real documents that hold them whole, edited, in part
    (GSM8K answers restate their questions; 8-grams are shared by many questions, so which item is
    first matters) or not at all; through the op, its index file built from the files."""
    _, zh_bench, docs, gsm8k, humaneval, zh_items = corpus
    lines = tmp_path / "bench" / "gsm8k_answer_lines.jsonl"
    lines.write_text("".join(json.dumps({"line": r["answer"].split("\n")[0], "n": f"a{i}"}) + "\n"
                             for i, r in enumerate(gsm8k)))
    benchmarks = _benchmarks(shared_data, zh_bench) + [{"path": str(lines), "fields": ["line"], "id_field": "n"}]
    op = Decontaminate(benchmarks=benchmarks, ngram=ngram, ngram_zh=ngram_zh, cache_dir=str(tmp_path / "cache"))
    texts = list(docs) + _reuters(shared_data, 300)[80:] + [r["answer"] for r in gsm8k[:300]]
    texts += [r["question"] + "\n" + r["answer"] for r in gsm8k[300:340]]
    texts += [r["prompt"] + r["canonical_solution"] for r in humaneval[:20]]
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": pa.array(texts, pa.large_string())})
    result = op.process(table)
    got = list(zip(*(result.table.column(c).to_pylist()
                     for c in ("decontaminate_benchmark", "decontaminate_item", "decontaminate_ngram"))))

    read = [read_benchmark(b["path"], b["fields"], id_field=b.get("id_field")) for b in benchmarks]
    first = ref_first_items([(r.name, r.texts, r.ids, ngram_zh if r.name == "zh_news.jsonl" else ngram)
                             for r in read], min_tokens=8)
    sizes = sorted({len(g) for g in first}, reverse=True)
    expected = [ref_match(t, first, sizes) for t in texts]
    assert [None if g[0] is None else g for g in got] == expected
    # The comparison covers what it claims: every benchmark matched, several n-gram lengths, and
    # documents whose match is another item than their own (a shared n-gram, the first item kept).
    matched = [m for m in expected if m]
    assert {m[0] for m in matched} == {"test.jsonl", "HumanEval.jsonl.gz", "zh_news.jsonl", "gsm8k_answer_lines.jsonl"}
    lengths = {len(ref_tokens(m[2])) for m in matched}
    # 13: 386 matches of lengths 8 to 13 (short items whole); 8 and 10: 392 of lengths 8 and 10.
    assert len(lengths) >= (3 if ngram == 13 else 2) and len(matched) >= 350
    answers = [expected[len(docs) + 220 + i] for i in range(300)]
    assert any(m and m[1] != f"a{i}" for i, m in enumerate(answers))  # 4 with 13-grams, 10 with 8-grams


# ----------------------------------------------------------------------------- the shared index file

_RACER = """
import json, sys, time
from ylink_data.ops.decontaminate import Decontaminate
op = Decontaminate(benchmarks=json.loads(sys.argv[1]), cache_dir=sys.argv[2])
time.sleep(max(0.0, float(sys.argv[3]) - time.time()))
op.setup()
print(json.dumps({"built": op.index_built, "path": op.index.path, "size": op.index.size}))
"""


def _cache_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_processes_that_set_up_at_once_build_the_index_once_and_map_it(shared_data, tmp_path):
    """Four processes set up the op together on an empty cache folder, as a machine's workers do: one
    builds the file, the others wait on its lock and map what it wrote (whichever order they come in)."""
    cache = tmp_path / "cache"
    benchmarks = json.dumps(_benchmarks(shared_data, tmp_path / "none")[:2])
    start = time.time() + 3  # after every process has imported; the assertions hold at any timing
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, benchmarks, str(cache), str(start)],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    results = [json.loads(proc.communicate(timeout=300)[0]) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert sum(r["built"] for r in results) == 1
    assert len({r["path"] for r in results}) == 1 and {r["size"] for r in results} == {56051}
    assert _cache_files(cache) == [Path(results[0]["path"]).name]  # no lock or temporary file left


def test_the_index_file_is_reused_and_built_again_when_a_benchmark_changes(shared_data, tmp_path):
    gsm8k = _gsm8k(shared_data)
    bench = tmp_path / "gsm8k.jsonl"
    bench.write_bytes((shared_data / "benchmarks" / "gsm8k" / "test.jsonl").read_bytes())
    cache = tmp_path / "cache"

    def setup() -> Decontaminate:
        op = Decontaminate(benchmarks=[{"path": str(bench), "fields": ["question"]}], cache_dir=str(cache))
        op.setup()
        return op

    first = setup()
    assert first.index_built and _cache_files(cache) == [Path(first.index.path).name]
    stamp = os.stat(first.index.path)
    again = setup()  # another worker, a rerun, a resumed run: the same file, mapped
    assert not again.index_built and again.index.path == first.index.path
    now = os.stat(first.index.path)
    assert (now.st_ino, now.st_mtime_ns) == (stamp.st_ino, stamp.st_mtime_ns)
    copy = pickle.loads(pickle.dumps(again))  # an op sent to another process maps the file there
    assert copy.index is None
    docs = pa.table({"id": ["a", "b"], "text": [gsm8k[0]["question"], gsm8k[1]["question"]]})
    assert copy.process(docs).table.column("decontaminate_item").to_pylist() == ["0", "1"]

    bench.write_text("".join(json.dumps(r) + "\n" for r in gsm8k[1:]))  # question 0 removed: the others move up
    changed = setup()
    assert changed.index_built and changed.index.path != first.index.path
    assert changed.process(docs).table.column("decontaminate_item").to_pylist() == [None, "0"]
    assert len(_cache_files(cache)) == 2  # the first file stays (runs of the first version may use it)


def test_a_damaged_index_file_or_a_builder_s_leftover_is_replaced(shared_data, tmp_path):
    """A file that is not a whole index (a disk that filled up, a copy cut short) is built again, and a
    temporary file that a killed builder left is removed by the next builder."""
    cache = tmp_path / "cache"
    bench = [{"path": str(shared_data / "benchmarks" / "gsm8k" / "test.jsonl"), "fields": ["question"]}]
    op = Decontaminate(benchmarks=bench, cache_dir=str(cache))
    op.setup()
    path = Path(op.index.path)
    whole = path.read_bytes()
    key = path.name.removesuffix(".ngrams")
    for damaged in (whole[:len(whole) // 2], whole[:-1], b""):
        path.write_bytes(damaged)
        (cache / f"{key}.4242.tmp").write_bytes(whole[:100])
        again = Decontaminate(benchmarks=bench, cache_dir=str(cache))
        again.setup()
        assert again.index_built and path.read_bytes() == whole
        assert _cache_files(cache) == [path.name]


def test_an_index_whose_body_is_zeroed_is_built_again_not_used(shared_data, tmp_path):
    """Header, footer and size intact, every byte between zeroed: the footer's checksum tells, so the
    file is built again and the op still finds GSM8K's questions (it found none from the zeroed file)."""
    cache = tmp_path / "cache"
    bench = [{"path": str(shared_data / "benchmarks" / "gsm8k" / "test.jsonl"), "fields": ["question"]}]
    op = Decontaminate(benchmarks=bench, cache_dir=str(cache))
    op.setup()
    path = Path(op.index.path)
    whole = path.read_bytes()
    body = len(whole) - 16 - int.from_bytes(whole[-16:-8], "little")  # the footer: JSON, its length, MAGIC
    path.write_bytes(whole[:64] + bytes(body - 64) + whole[body:])
    again = Decontaminate(benchmarks=bench, cache_dir=str(cache))
    questions = [r["question"] for r in _gsm8k(shared_data)[:40]]
    result = again.process(pa.table({"id": [str(i) for i in range(40)], "text": questions}))
    assert again.index_built and path.read_bytes() == whole
    assert result.dropped == ["decontaminate:test.jsonl"] * 40


def test_a_cache_folder_that_cannot_be_written(shared_data, tmp_path, monkeypatch):
    """Named in the config: the run stops in one line naming the key. The default one (environment or
    home): each worker builds the index in its own memory and the run goes on."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    bench = [{"path": str(shared_data / "benchmarks" / "gsm8k" / "test.jsonl"), "fields": ["question"]}]
    with pytest.raises(InputError, match=r"^decontaminate\.cache_dir: cannot write the n-gram index into .*a-file"):
        Decontaminate(benchmarks=bench, cache_dir=str(blocker / "cache")).setup()
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    op = Decontaminate(benchmarks=bench)
    question = _gsm8k(shared_data)[7]["question"]
    assert op.process(pa.table({"id": ["a"], "text": [question]})).dropped == ["decontaminate:test.jsonl"]
    assert op.index_built and op.index.path is None
    with pytest.raises(ConfigError, match="cache_dir"):
        validate_config({"input": {"paths": ["x.jsonl"]}, "output": {"path": "out"},
                         "stages": [{"decontaminate": {"benchmarks": bench, "cache_dir": "s3://bucket/cache"}}]})


def test_pipeline_runs_on_worker_processes_share_one_index_file_and_a_rerun_reuses_it(corpus, shared_data,
                                                                                    tmp_path):
    path, zh_bench, docs, *_ = corpus
    cache = tmp_path / "ngram-cache"
    stage = {"benchmarks": _benchmarks(shared_data, zh_bench), "cache_dir": str(cache)}
    runs = {}
    for name in ("first", "second"):
        cfg = _config(path, tmp_path / name, stage, ray={"execution": "processes", "num_cpus": 2})
        cfg["input"]["split_bytes"] = 20_000
        ylink_data.run(cfg, progress=False)
        assert json.loads((tmp_path / name / "run.json").read_text())["tasks"] > 2
        files = _cache_files(cache)
        assert len(files) == 1 and files[0].endswith(".ngrams")  # no lock or temporary file left
        stamp = os.stat(cache / files[0])
        dropped = ylink_data.open_run(tmp_path / name).rejected("decontaminate").to_pylist()
        runs[name] = ((stamp.st_ino, stamp.st_mtime_ns), sorted(r["text"] for r in dropped))
    assert runs["first"] == runs["second"]  # the same file, untouched, and the same drops
    assert len(runs["first"][1]) == sum(kind.startswith(("verbatim", "edited")) for kind in docs.values())
    # Where the index is kept is no part of the run's configuration: the finished run stays finished.
    other = {**stage, "cache_dir": str(tmp_path / "elsewhere")}
    ylink_data.run(_config(path, tmp_path / "first", other, ray={"execution": "processes", "num_cpus": 2})
                   | {"input": {"paths": [str(path)], "split_bytes": 20_000}}, progress=False)
    assert not (tmp_path / "elsewhere").exists()


def test_a_jsonl_benchmark_with_a_line_separator_inside_a_string(shared_data, tmp_path):
    """U+2028 may stand raw inside a JSON string (json.dumps writes it so with ensure_ascii=False):
    it is no line break of JSONL (reading the file with str.splitlines cut such a row in two)."""
    rows = _gsm8k(shared_data)[:3]
    rows[1] = {**rows[1], "question": rows[1]["question"].replace(". ", ".\u2028", 1)}
    bench = tmp_path / "sep.jsonl"
    bench.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert "\u2028" in bench.read_text(encoding="utf-8")
    assert read_benchmark(str(bench), ["question"]).texts == [r["question"] for r in rows]
