"""Issue 23, points 5-7: whatever a model server answers, a run quarantines the row it was asked for
and goes on, within `llm.timeout_s` per request and bounded memory, and no credential reaches an
output.

Each test is one real pipeline run (qa_generate, real Parquet) against the real test server
(tests/llmserver.py), whose failure modes play the hostile server: HTTP 200 answers that are no
chat completion, an answer sent a byte a second, one that never ends, and answers quoting the key.
Before: each unusable answer stopped the run (and every rerun), a trickled answer held its row for
minutes, an endless one held the run forever, and the key reached data/, llm-cache/ and quarantine/.
"""
from __future__ import annotations

import json
import random
import re
import socket
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from tests.chaos.hostile_answers import (ISSUE_39_SCORES, ISSUE_39_VERDICTS, json_score_shapes, junk, score_lines,
                                         score_shapes, scores, strings, verdict_shapes, verdicts)
from tests.chaos.processes import ylink
from tests.llmserver import UNUSABLE, LLMServer
from ylink_data import run
from ylink_data.core.digest import seal, unseal
from ylink_data.io.llm.answer import Unusable, read
from ylink_data.io.llm.client import MAX_BODY_BYTES, RAW_CHARS, Reply
from ylink_data.ops.judge_parse import parse_score, parse_winner
from ylink_data.engine.stats import check_invariant

# No well-known token shape and letters in it, so that its upper and lower case differ from it.
KEY = "ylinkTest-Key-0123456789abcdefghij"
HEADER_KEY = "HdrSecret-9876543210zyxwvu"  # a credential sent in a header of the `llm:` block
TOPICS = ("lighthouses", "glaciers", "bee keeping", "tide tables", "paper mills", "sundials", "bell foundries",
          "salt pans", "windmills", "canal locks", "ice houses", "rope walks")


def _chunk(k: int) -> str:
    topic = TOPICS[k % len(TOPICS)]
    return (f"Chunk {k} talks about {topic} in some detail. It says that {topic} were once common in many "
            f"coastal towns. It also says that few people still know how {topic} worked.")


def _mark(k: int) -> str:
    return re.escape(f"Chunk {k} talks")


def _pipeline(tmp_path: Path, server: LLMServer, n: int, **llm) -> dict:
    data = tmp_path / "chunks.jsonl"
    data.write_text("".join(json.dumps({"text": _chunk(k)}) + "\n" for k in range(n)), encoding="utf-8")
    return {"input": {"paths": [str(data)], "format": "jsonl"},
            "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
            "llm": {"base_url": server.base_url, "model": "ylink-test", "backoff_s": 0.01, **llm},
            "stages": [{"qa_generate": {"pairs": 2}}]}


def _rows(out: Path) -> list[dict]:
    return [r for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _quarantine(out: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((out / "quarantine").glob("*.jsonl")) for line in f.read_text().splitlines()]


def _stage(stats: dict) -> dict:
    return next(s for s in stats["stages"] if s["name"] == "qa_generate")


def test_every_unusable_answer_quarantines_its_row_and_the_run_goes_on(tmp_path):
    n = len(UNUSABLE) + 2  # and two chunks answered well
    with LLMServer() as server:
        for k, kind in enumerate(UNUSABLE):
            server.fail(kind, match=_mark(k))
        cfg = _pipeline(tmp_path, server, n, max_retries=2)
        result = run(cfg, progress=False)
        out = tmp_path / "out"
        stats = result.stats
        assert check_invariant(stats) is None
        # Not retried (the server answered; a rerun asks again): one request per chunk.
        assert server.requests == n
        entries = _quarantine(out)
        assert sorted(e["reason"] for e in entries) == ["unusable_response"] * len(UNUSABLE)
        assert _stage(stats)["counters"]["quarantined_unusable_response"] == len(UNUSABLE)
        # Each entry quotes the body that was sent, in one bounded line.
        quoted = {"not_json": "502 Bad Gateway", "no_choices": '"choices": []', "empty_choice": '"choices": [{}]',
                  "null_message": '"message": null', "choices_not_list": '"choices": "oops"',
                  "object_content": '"content": {"text": ', "bad_usage": '"prompt_tokens": "many"',
                  "not_utf8": "caf\ufffd"}
        assert set(quoted) == set(UNUSABLE)
        for kind in UNUSABLE:
            [entry] = [e for e in entries if quoted[kind] in e["error"]]
            assert entry["error"].startswith("unusable_response: HTTP 200 from ") and "raw: " in entry["error"]
            assert "\n" not in entry["error"] and len(entry["error"]) < RAW_CHARS + 400
        # The two good chunks gave their pairs.
        assert {r["context"] for r in _rows(out)} == {_chunk(len(UNUSABLE)), _chunk(len(UNUSABLE) + 1)}

        # A rerun asks again for what was unusable (never cached) and, answered well now, keeps it.
        again = run(cfg, fresh=True, progress=False)
        assert server.requests == n + len(UNUSABLE)
        assert _stage(again.stats)["counters"]["llm_cache_hits"] == 2
        assert again.stats["quarantined"] == 0 and {r["context"] for r in _rows(out)} == {_chunk(k) for k in range(n)}


def test_timeout_bounds_the_whole_request_and_memory(tmp_path):
    """`timeout_s: 1` and one retry: a trickled answer and an endless slow one are each cut off twice,
    after ~1 s each, and quarantined as `timeout`; an endless fast one is cut off at MAX_BODY_BYTES and
    quarantined as `unusable_response`. Before, the trickled answer (its ~590 bytes at two a second,
    each read well within the 1 s the old client gave a read) held its row ~5 minutes per attempt,
    and the endless ones held the run until the server stopped (after ENDLESS_CAP_S, or
    ENDLESS_CAP_BYTES read whole into memory)."""
    with LLMServer() as server:
        server.fail("trickle", times=99, match=_mark(0), seconds=0.5)
        server.fail("endless", times=99, match=_mark(1), seconds=0.1)  # ~640 KB/s: the deadline comes first
        server.fail("endless", times=99, match=_mark(2), seconds=0)  # as fast as loopback goes: the size bound first
        cfg = _pipeline(tmp_path, server, 4, timeout_s=1, max_retries=1)
        began = time.monotonic()
        result = run(cfg, progress=False)
        took = time.monotonic() - began
        assert took < 60, took  # deadline x attempts is 2 s; the old client took minutes
        assert check_invariant(result.stats) is None
        entries = {e["id"]: e for e in _quarantine(tmp_path / "out")}
        reasons = sorted(e["reason"] for e in entries.values())
        assert reasons == ["timeout", "timeout", "unusable_response"], entries
        for e in entries.values():
            if e["reason"] == "timeout":
                assert "llm.timeout_s=1" in e["error"] and "gave up after 2 attempts" in e["error"]
            else:
                assert f"a body of over {MAX_BODY_BYTES // 2**20} MiB" in e["error"]
                assert len(e["error"]) < RAW_CHARS + 400
        assert {r["context"] for r in _rows(tmp_path / "out")} == {_chunk(3)}
        # Every hostile request was cancelled: the client hung up (the server saw it, so no request
        # nor thread of it is left running), within a few seconds of its deadline.
        hostile = [r for r in server.log if r.kind in ("trickle", "endless")]
        assert len(hostile) == 2 + 2 + 1
        ends = time.monotonic() + 30
        while any(r.ended == 0 for r in hostile) and time.monotonic() < ends:
            time.sleep(0.1)
        assert all(r.hung_up and 0 < r.ended - r.began < 10 for r in hostile), hostile
        # What was read of the fast endless answer stayed bounded: the server could write no more than
        # the client read plus what the sockets buffer (a few MB), where the old client read it all.
        [fast] = [r for r in hostile if r.kind == "endless" and _chunk(2)[:20] in r.prompt]
        assert fast.sent < MAX_BODY_BYTES + 48 * 2**20


def _assert_no_secret_in(out: Path, console: str) -> None:
    files = [f for f in out.rglob("*") if f.is_file()]
    for secret in (KEY, HEADER_KEY):
        for f in files:
            assert secret.lower().encode() not in f.read_bytes().lower(), f
            if f.suffix == ".parquet":  # compressed: its values are searched too
                assert secret.lower() not in json.dumps(pq.read_table(f).to_pylist(), default=str).lower(), f
        assert secret.lower() not in console.lower()


def test_the_key_reaches_no_output_whatever_the_server_says(tmp_path, capfd):
    """The key (in the Authorization header) and a header's credential, quoted back by the server in
    its answers as sent, upper- and lower-cased, and in an upper-cased 401 body: in no file of the
    run folder, in any case, nor on the console. Both are written into the pipeline as they are (no
    ${VAR}), so that only the LLM layer can mask them."""
    out = tmp_path / "out"
    with LLMServer(api_key=KEY) as server:
        server.fail("quote_auth", match=_mark(0))
        server.fail("401_upper", match=_mark(1))
        cfg = _pipeline(tmp_path, server, 3, api_key=KEY, headers={"X-Api-Key": HEADER_KEY}, max_retries=0)
        result = run(cfg, progress=False)
        assert check_invariant(result.stats) is None
        rows = _rows(out)
        quoting = [r for r in rows if r["context"] == _chunk(0)]
        assert quoting and all("X-Api-Key: ***" in r["question"] and "BEARER ***" in r["question"] for r in quoting)
        [entry] = _quarantine(out)
        assert entry["error"].startswith("HTTP 401") and "INCORRECT API KEY PROVIDED: ***" in entry["error"]
        files = {f.relative_to(out).parts[0] for f in out.rglob("*") if f.is_file()}
        assert {"data", "llm-cache", "quarantine"} <= files
        console = capfd.readouterr()
        _assert_no_secret_in(out, console.out + console.err)

        # The cache holds the masked answers: a rerun from it gives the same rows (and asks again
        # for the chunk refused with a 401, answered now).
        again = run(cfg, fresh=True, progress=False)
        assert _stage(again.stats)["counters"]["llm_cache_hits"] == 2
        assert [r for r in _rows(out) if r["context"] != _chunk(1)] == rows
    console = capfd.readouterr()
    _assert_no_secret_in(out, console.out + console.err)


# ----------------------------------------------------------------------------- issue 33, points 5 and 10
# Whatever a model answers, its row is kept with what the answer says, or quarantined as
# `unusable_response` with one bounded line; the run goes on, and so does a rerun that reads the same
# answers from the response cache. The answers are generated (tests/chaos/hostile_answers.py) for
# every op that reads one: the judge's scores in every form and reasons holding every kind of string
# and junk, qa_generate's pairs, respond's responses. Before: a 5,000-digit score stopped the run
# (ValueError from json), a lone surrogate too (UnicodeEncodeError from Arrow), and every rerun the
# same way; "3/10" on a 0-5 scale was stored as 3, per-criterion lines under a total as the first one.

def _real_sentences(shared_data: Path, n: int) -> list[str]:
    import gzip
    out = []
    with gzip.open(shared_data / "en_reuters21578_nltk/reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            text = " ".join(json.loads(line)["text"].split())
            if 300 <= len(text) <= 2000:
                out.append(text)
                if len(out) == n:
                    return out
    return out


def _case_doc(k: int, text: str) -> str:
    return f"Case {k}. {text}"


def _case_match(k: int) -> str:
    return re.escape(f"Case {k}. ")


def _run_cases(tmp_path: Path, server: LLMServer, docs: list[str], stage: dict) -> tuple[dict, Path]:
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    cfg = {"input": {"paths": [str(data)], "format": "jsonl"}, "output": {"path": str(tmp_path / "out")},
           "llm": {"base_url": server.base_url, "model": "ylink-test", "max_retries": 0}, "stages": [stage]}
    return cfg, tmp_path / "out"


def _check_quarantine(entries: list[dict], stage: str, prefixes: tuple[str, ...] = ("unusable answer: ",)) -> None:
    for e in entries:
        assert e["stage"] == stage and e["reason"] == "unusable_response", e
        assert e["error"].startswith(prefixes) and "\n" not in e["error"], e["error"][:300]
        assert len(e["error"]) < 2 * RAW_CHARS + 600, len(e["error"])


def _outcomes(out: Path, key: str, columns: tuple[str, ...]) -> tuple[dict, set]:
    """{key column value: (columns...)} of the kept rows, and the ids quarantined."""
    rows = {r[key]: tuple(r[c] for c in columns) for r in _rows(out)}
    return rows, {e["id"] for e in _quarantine(out)}


def test_every_generated_judge_answer_is_kept_as_said_or_quarantined(tmp_path, shared_data):
    rng = random.Random(33)
    real = _real_sentences(shared_data, 80)
    reasons = strings(rng, real[:40]) + junk(rng)
    cases: list[tuple[str, str, float | None, str | None]] = []  # (name, answer, score, reason) None: unusable
    for v in scores(rng, 0, 5):
        reason = rng.choice(real[:40])
        cases.append((f"score {v.name}", f'{{"reason": {json.dumps(reason)}, "score": {v.literal}}}', v.stored, reason))
    for v in reasons:
        k = rng.randint(0, 5)
        answer = f'{{"score": {k}, "reason": {v.literal}}}'
        if rng.random() < 0.5:
            answer = f"```json\n{answer}\n```"
        cases.append((f"reason {v.name}", answer, float(k) if v.stored is not None else None, v.stored))
    for c in score_lines(rng, real[:40], 0, 5):
        cases.append((c.name, c.text, c.score, None))
    # Fences around nothing but whitespace: what made the old fence pattern backtrack for minutes.
    cases.append(("a fence of whitespace", "```" + " " * rng.randrange(50_000, 100_000) + "x", None, None))
    docs = [_case_doc(k, real[40 + k % 40]) for k in range(len(cases))]
    with LLMServer() as server:
        for k, (_, answer, _, _) in enumerate(cases):
            server.answer(answer, match=_case_match(k))
        cfg, out = _run_cases(tmp_path, server, docs, {"judge": {"rubric": "edu"}})
        first = run(cfg, progress=False)
        assert check_invariant(first.stats) is None
        kept, quarantined = _outcomes(out, "text", ("judge_score", "judge_reason"))
        for k, (name, answer, score, reason) in enumerate(cases):
            if score is None:
                assert docs[k] not in kept, name
            else:
                assert kept[docs[k]][0] == score, (name, kept[docs[k]][0])
                if reason is not None:
                    assert kept[docs[k]][1] == reason.strip(), name
        unusable = sum(score is None for _, _, score, _ in cases)
        assert len(quarantined) == unusable and len(kept) == len(cases) - unusable
        _check_quarantine(_quarantine(out), "judge")
        # A rerun reads every answer from the cache, the unusable ones too, and ends the same way.
        asked = server.requests
        again = run(cfg, fresh=True, progress=False)
        assert server.requests == asked == len(cases)
        assert _outcomes(out, "text", ("judge_score", "judge_reason")) == (kept, quarantined)
        assert _stage_named(again.stats, "judge")["counters"]["llm_cache_hits"] == len(cases)


def _stage_named(stats: dict, name: str) -> dict:
    return next(s for s in stats["stages"] if s["name"] == name)


def test_every_generated_pairs_answer_is_kept_as_said_or_quarantined(tmp_path, shared_data):
    rng = random.Random(3305)
    real = _real_sentences(shared_data, 60)
    values = strings(rng, real[:30]) + junk(rng)
    cases: list[tuple[str, str, tuple[str, str] | None]] = []
    for v in values:
        question, answer = rng.choice(real[:30]), rng.choice(real[:30])
        cases.append((f"question {v.name}", f'{{"pairs": [{{"question": {v.literal}, "answer": {json.dumps(answer)}}}]}}',
                      None if v.stored is None else (v.stored.strip(), answer)))
        cases.append((f"answer {v.name}", f'{{"pairs": [{{"question": {json.dumps(question)}, "answer": {v.literal}}}]}}',
                      None if v.stored is None else (question, v.stored.strip())))
    docs = [_case_doc(k, real[30 + k % 30]) for k in range(len(cases))]
    with LLMServer() as server:
        for k, (_, answer, _) in enumerate(cases):
            server.answer(answer, match=_case_match(k))
        cfg, out = _run_cases(tmp_path, server, docs, {"qa_generate": {"pairs": 1, "min_support": 0}})
        first = run(cfg, progress=False)
        assert check_invariant(first.stats) is None
        kept, quarantined = _outcomes(out, "context", ("question", "answer"))
        for k, (name, _, pair) in enumerate(cases):
            assert kept.get(docs[k]) == pair, name
        assert len(quarantined) == sum(pair is None for _, _, pair in cases)
        _check_quarantine(_quarantine(out), "qa_generate")
        asked = server.requests
        run(cfg, fresh=True, progress=False)
        assert server.requests == asked and _outcomes(out, "context", ("question", "answer")) == (kept, quarantined)


def test_every_generated_response_is_kept_as_said_or_quarantined(tmp_path, shared_data):
    """A response is any text: junk is text too; only what UTF-8 cannot hold (a lone surrogate, which
    the client already finds in the chat completion) is quarantined."""
    rng = random.Random(3306)
    real = _real_sentences(shared_data, 60)
    cases = [(v.name, json.loads(v.literal), v.stored is not None) for v in strings(rng, real[:30])]
    cases += [(v.name, v.literal, True) for v in junk(rng)]
    docs = [_case_doc(k, real[30 + k % 30]) for k in range(len(cases))]
    with LLMServer() as server:
        for k, (_, content, _) in enumerate(cases):
            server.answer(content, match=_case_match(k))
        cfg, out = _run_cases(tmp_path, server, docs, {"respond": {}})
        result = run(cfg, progress=False)
        assert check_invariant(result.stats) is None
        kept, quarantined = _outcomes(out, "instruction", ("response",))
        for k, (name, content, storable) in enumerate(cases):
            assert kept.get(docs[k]) == ((content.strip(),) if storable else None), name
        assert len(quarantined) == sum(not s for _, _, s in cases)
        _check_quarantine(_quarantine(out), "respond", ("unusable_response: ", "unusable answer: "))


# ----------------------------------------------------------------------------- issue 33, point 11 (LLM)
def test_a_server_that_cannot_be_reached_leaves_the_run_unfinished(tmp_path, shared_data):
    """Every request of a step refused (a port bound and never listening): before, each row was
    quarantined and the run recorded as complete (exit 0), so a rerun asked nothing and the flow's
    next step failed on a missing column. Now the run ends non-zero with one line naming the server
    (without its credentials) and the count, and a rerun, the server fixed, asks again: no --fresh."""
    docs = [_case_doc(k, t) for k, t in enumerate(_real_sentences(shared_data, 3))]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "out"
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        url = f"http://someone:{KEY}@127.0.0.1:{dead.getsockname()[1]}/v1"
        pipeline = tmp_path / "judge.yaml"
        pipeline.write_text(yaml.safe_dump({
            "input": {"paths": [str(data)], "format": "jsonl"}, "output": {"path": str(out)},
            "llm": {"base_url": url, "model": "ylink-test", "max_retries": 1, "backoff_s": 0.01},
            "stages": [{"judge": {"rubric": "edu"}}]}), encoding="utf-8")
        proc = ylink("run", pipeline, "--no-progress")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    port = url.rsplit(":", 1)[1]
    assert f"3 of 3 requests could not reach the model server at http://***@127.0.0.1:{port}" in line, line
    assert KEY not in proc.stderr and "someone" not in proc.stderr
    assert not (out / "manifest.json").exists() and not list(out.glob("quarantine/*.jsonl"))
    with LLMServer() as server:
        rerun = ylink("run", pipeline, "--no-progress", "--set", f"llm.base_url={server.base_url}")
        assert rerun.returncode == 0, rerun.stderr
        assert server.requests == len(docs)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["quarantined"] == 0 and _stage_named(stats, "judge")["counters"]["scored"] == len(docs)


def test_every_generated_pairwise_verdict_is_counted_as_said_or_quarantined(shared_data):
    """judge's pairwise mode asks each pair in both orders: the two generated answers of a pair give
    its Copeland wins (a win only when both orders agree) or, either one unusable, quarantine both
    rows of the group."""
    import pyarrow as pa

    from ylink_data.ops import build_op

    rng = random.Random(3310)
    real = _real_sentences(shared_data, 40)
    said = verdicts(rng, real[:20])
    good = [s for s in said if s.winner is not None]
    pairs = [(s, rng.choice(good)) for s in said] + [(rng.choice(good), s) for s in said if s.winner is None]
    rows = []
    for g in range(len(pairs)):
        instruction = real[20 + g % 20]
        for x in "ab":
            rows.append({"id": f"g{g}{x}", "text": instruction, "instruction": instruction, "instruction_id": f"g{g}",
                         "response": f"Response {g}{x}. {rng.choice(real)}"})
    with LLMServer() as server:
        for g, (first, second) in enumerate(pairs):  # response a shown first, then b shown first
            server.answer(first.text, match=re.escape(f"<response_a>\nResponse {g}a. "))
            server.answer(second.text, match=re.escape(f"<response_a>\nResponse {g}b. "))
        op = build_op("judge", {"mode": "pairwise", "llm": {"base_url": server.base_url, "model": "ylink-test",
                                                               "max_retries": 0, "cache": False}})
        try:
            result = op.process(pa.Table.from_pylist(rows))
        finally:
            op.teardown()
        assert server.requests == 2 * len(pairs)
    scores, errors = result.table.column("judge_score").to_pylist(), result.errors or [None] * len(rows)
    for g, (first, second) in enumerate(pairs):
        a, b = 2 * g, 2 * g + 1
        if first.winner is None or second.winner is None:
            assert scores[a] is None and scores[b] is None, (first.name, second.name)
            assert errors[a] == errors[b] and errors[a].startswith("unusable answer: ") and "\n" not in errors[a]
            continue
        swapped = {"A": "B", "B": "A", "tie": "tie"}[second.winner]  # b shown first: its "A" is b
        expected = ((1.0, 0.0) if first.winner == "A" else (0.0, 1.0)) if first.winner == swapped != "tie" else (0.0, 0.0)
        assert (scores[a], scores[b]) == expected and errors[a] is errors[b] is None, (first.name, second.name)


def test_every_generated_evolution_is_a_candidate_as_said_or_counted(tmp_path, shared_data):
    """instruct_generate (evol) reads each answer as the evolved instruction: any text is a candidate
    row (kept, or dropped by a heuristic, as it said it); an answer no row can hold (a lone
    surrogate) is counted as a failed prompt, and its seed stays."""
    rng = random.Random(3311)
    real = _real_sentences(shared_data, 60)
    cases = [(v.name, json.loads(v.literal), v.stored is not None) for v in strings(rng, real[:30])]
    cases += [(v.name, v.literal, True) for v in junk(rng)]
    seeds = [_case_doc(k, real[30 + k % 30][:200].strip()) for k in range(len(cases))]
    data = tmp_path / "seeds.jsonl"
    data.write_text("".join(json.dumps({"instruction": s}) + "\n" for s in seeds), encoding="utf-8")
    with LLMServer() as server:
        for k, (_, content, _) in enumerate(cases):
            server.answer(content, match=_case_match(k))
        cfg = {"input": {"paths": [str(data)], "format": "jsonl", "text_field": "instruction"},
               "output": {"path": str(tmp_path / "out"), "keep_rejected": True},
               "llm": {"base_url": server.base_url, "model": "ylink-test", "max_retries": 0},
               "stages": [{"instruct_generate": {"mode": "evol", "seed": 1}}]}
        result = run(cfg, progress=False)
    assert check_invariant(result.stats) is None and result.stats["quarantined"] == 0
    out = tmp_path / "out"
    made = [r for r in _rows(out) + [r for f in sorted((out / "rejected").glob("*.parquet"))
                                     for r in pq.read_table(f).to_pylist()] if r["origin"] != "seed"]
    assert sorted(r["instruction"] for r in made) == sorted(c.strip() for _, c, ok in cases if ok)
    counters = _stage_named(result.stats, "instruct_generate")["counters"]
    assert counters.get("prompts_failed", 0) == sum(not ok for _, _, ok in cases)
    assert {r["instruction"] for r in _rows(out) if r["origin"] == "seed"} == set(seeds)


def test_a_cached_answer_no_row_holds_is_quarantined_again_and_a_damaged_entry_asked_again(tmp_path, shared_data):
    """The response cache is read back on every rerun. An entry whose text holds a lone surrogate
    (its JSON escape, as another writer may leave it) quarantines its row as unusable on each rerun
    (before: UnicodeEncodeError from Arrow in respond, every rerun); an entry of another shape (no
    text, a count that is no count) is a miss, asked again (before: KeyError, every rerun)."""
    docs = [_case_doc(k, t) for k, t in enumerate(_real_sentences(shared_data, 3))]
    with LLMServer() as server:
        cfg, out = _run_cases(tmp_path, server, docs, {"respond": {}})
        run(cfg, progress=False)
        entries = {json.loads(f.read_text())["text"].split(". ")[0]: f for f in (out / "llm-cache").rglob("*.json")}
        assert sorted(entries) == ["echo: Case 0", "echo: Case 1", "echo: Case 2"]
        # Sealed again (io.digest.seal): an entry whose checksum fails is a miss, never read.
        broken = unseal(json.loads(entries["echo: Case 0"].read_text())) | {"text": "echo: half a pair \ud800 here"}
        broken = seal(broken)
        entries["echo: Case 0"].write_text(json.dumps(broken), encoding="ascii")  # the escape, as JSON allows
        entries["echo: Case 1"].write_text(json.dumps({"format": 1, "prompt_tokens": "many"}), encoding="ascii")
        again = run(cfg, fresh=True, progress=False)
        assert server.requests == 3 + 1  # the damaged entry asked again, the others read
    assert check_invariant(again.stats) is None
    [entry] = _quarantine(out)
    assert entry["reason"] == "unusable_response" and entry["error"].startswith("unusable answer: ")
    assert "lone surrogate" in entry["error"] and "\n" not in entry["error"]
    assert sorted(r["response"] for r in _rows(out)) == [f"echo: {docs[1]}", f"echo: {docs[2]}"]


def test_a_flow_whose_judge_cannot_reach_its_server_stops_there(tmp_path, shared_data):
    """The issue's flow: annotate with the judge, then train on its scores. Before, the judge step
    was recorded complete with every row quarantined, and the flow stopped at the training step with
    "no document has a 'judge_score' value", the cause hidden in quarantine/. Now it stops at the
    judge step with the server's line, and nothing of that step is recorded as done."""
    docs = [_case_doc(k, t) for k, t in enumerate(_real_sentences(shared_data, 4))]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{dead.getsockname()[1]}/v1"
        flow = tmp_path / "flow.yaml"
        flow.write_text(yaml.safe_dump({"name": "distill", "steps": [
            {"run": {"name": "annotate", "input": {"paths": [str(data)], "format": "jsonl"},
                     "output": {"path": str(tmp_path / "annotated")},
                     "llm": {"base_url": url, "model": "ylink-test", "max_retries": 0},
                     "stages": [{"judge": {"rubric": "edu"}}]}},
            {"quality_train": {"from": str(tmp_path / "annotated"), "label_column": "judge_score", "threshold": 3,
                               "output": str(tmp_path / "model.bin")}}]}), encoding="utf-8")
        proc = ylink("run", flow, "--no-progress")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ylink:")]
    assert len(errors) == 1 and f"4 of 4 requests could not reach the model server at {url}" in errors[0], proc.stderr
    assert "judge_score" not in proc.stderr and not (tmp_path / "annotated" / "manifest.json").exists()


# ----------------------------------------------------------------------------- issue 39, point 10
# One strict grammar for scores and verdicts (ops/judge_parse.py), generated as a product of label
# forms, values and what follows them (tests/chaos/hostile_answers.py). Before, "Score: 1e309" was
# stored as 1, "8e-1" as 8, "4,5" as 4, "2-5" as 2, "7 / 10 / 2" as 7, {"score":0,"score":5} as 5,
# "Winner: A or B" as A, "-0" as -0.0; and an answer cut at max_tokens was scored as it was.

def _said(reply: Reply, parse) -> object:
    value = read(reply, parse)
    return None if isinstance(value, Unusable) else value[0]


def test_every_generated_answer_shape_is_read_by_one_strict_grammar(shared_data):
    rng = random.Random(39)
    real = _real_sentences(shared_data, 40)
    for low, high in ((0, 5), (1, 10)):
        cases = score_shapes(rng, real, low, high) + json_score_shapes(rng, real, low, high)
        assert len(cases) > 1000 and sum(c.score is None for c in cases) > len(cases) // 3
        for c in cases:
            got = _said(Reply(c.text, finish_reason="stop"), lambda t: parse_score(t, low, high))
            assert got == c.score and (got is None or str(got) != "-0.0"), (c.name, c.text, got, c.score)
            cut = read(Reply(c.text, finish_reason="length"), lambda t: parse_score(t, low, high))
            assert isinstance(cut, Unusable) and cut.error.startswith("truncated answer: "), c.name
    for answer in ISSUE_39_SCORES:
        assert _said(Reply(answer), lambda t: parse_score(t, 0, 10)) is None, answer
    assert _said(Reply("Score: -0"), lambda t: parse_score(t, 0, 10)) == 0.0
    assert str(_said(Reply("Score: -0"), lambda t: parse_score(t, 0, 10))) == "0.0"
    said = verdict_shapes(rng, real)
    assert len(said) > 200 and sum(s.winner is None for s in said) > len(said) // 3
    for s in said:
        assert _said(Reply(s.text), parse_winner) == s.winner, (s.name, s.text)
        if s.winner is not None:
            assert read(Reply(s.text, finish_reason="length"), parse_winner).error.startswith("truncated answer: ")
    for answer in ISSUE_39_VERDICTS:
        assert _said(Reply(answer), parse_winner) is None, answer


def test_generated_answer_shapes_in_a_run_kept_as_said_or_quarantined(tmp_path, shared_data):
    """The grammar's shapes through the real server in one judge run (a sample of them), each also
    cut at max_tokens: a row keeps the score its answer states, or is quarantined, `unusable_response`
    or `truncated`; respond and qa_generate quarantine a cut answer the same way."""
    rng = random.Random(3910)
    real = _real_sentences(shared_data, 80)
    shapes = score_shapes(rng, real[:40], 0, 5)
    cases = rng.sample(shapes, 150) + json_score_shapes(rng, real[:40], 0, 5)
    cases += [c for c in score_lines(rng, real[:40], 0, 5)]
    cut = [c for c in rng.sample(shapes, 60) if c.score is not None][:20]
    docs = [_case_doc(k, real[40 + k % 40]) for k in range(len(cases) + len(cut))]
    with LLMServer() as server:
        for k, c in enumerate(cases):
            server.answer(c.text, match=_case_match(k))
        for k, c in enumerate(cut, start=len(cases)):
            server.answer(c.text, match=_case_match(k), finish_reason="length")
        cfg, out = _run_cases(tmp_path, server, docs, {"judge": {"rubric": "edu"}})
        result = run(cfg, progress=False)
    assert check_invariant(result.stats) is None
    kept, _ = _outcomes(out, "text", ("judge_score",))
    reasons = {e["id"]: e["reason"] for e in _quarantine(out)}
    for k, c in enumerate(cases):
        assert kept.get(docs[k], (None,))[0] == c.score, (c.name, c.text)
    assert all(docs[k] not in kept for k in range(len(cases), len(docs)))
    assert sorted(reasons.values()) == sorted(["unusable_response"] * sum(c.score is None for c in cases)
                                              + ["truncated"] * len(cut))
    counters = _stage_named(result.stats, "judge")["counters"]
    assert counters["truncated"] == len(cut) and counters["quarantined_truncated"] == len(cut)

    for stage, good in (({"respond": {}}, "an answer"), ({"qa_generate": {"pairs": 1, "min_support": 0}},
                                                         json.dumps({"pairs": [{"question": "q?", "answer": "a"}]}))):
        name = next(iter(stage))
        docs = [_case_doc(k, t) for k, t in enumerate(real[:4])]
        with LLMServer() as server:
            for k in range(4):
                server.answer(good, match=_case_match(k), finish_reason="length" if k % 2 else "stop")
            (tmp_path / name).mkdir()
            cfg, out = _run_cases(tmp_path / name, server, docs, stage)
            result = run(cfg, progress=False)
        entries = _quarantine(out)
        assert sorted(e["reason"] for e in entries) == ["truncated", "truncated"], (name, entries)
        assert all(e["error"].startswith("truncated answer: ") and "llm.max_tokens" in e["error"] for e in entries)
        assert result.stats["quarantined"] == 2 and check_invariant(result.stats) is None
