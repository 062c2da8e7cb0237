"""Supervised fine-tuning data on real chat examples: the Self-Instruct sample in all three formats
(samples/chat, Apache-2.0), real multi-turn FAQ threads of recipe pages (en, fr, es, da) and
Chinese news with their categories (both from ../shared/data). Rendering is checked against a
hand-written expected string and a plain-Python ChatML; masks by decoding the masked tokens
(exactly each assistant content and its end-of-turn); malformed rows by their reasons in
stats.json; packing by its invariants on a real pipeline run read back through ShardLoader."""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from tokenizers import Tokenizer

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError, InputError
from ylink_data.io.readers.base import Bad, Record, Split
from ylink_data.io.readers.jsonl import read_jsonl, record_from_mapping
from ylink_data.engine.stats import check_invariant
from ylink_data.ops.sft import SftTokenize
from ylink_data.text.tokens.chat import to_messages
from ylink_data.cache.packed import PackedBatches
from ylink_data.text.tokens.pack import IGNORE_INDEX, pack, plan_bins
from ylink_data.text.tokens.sft import load_chat_template, render_with_spans

from .conftest import REPO

CHAT = REPO / "samples" / "chat"
TOKENIZER = CHAT / "tokenizer.json"
PIPELINE = REPO / "pipelines" / "sft.yaml"
FORMATS = {"alpaca.jsonl": "alpaca", "messages.jsonl": "messages", "sharegpt.jsonl": "sharegpt"}


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (CHAT / name).read_text(encoding="utf-8").splitlines()]


def _chat_text(row: dict) -> str:
    """What the reader makes of a chat row (input.chat: true)."""
    record = record_from_mapping(dict(row), 0, None, None, chat=True)
    assert isinstance(record, Record)
    return record.text


def _chatml(messages: list[dict]) -> str:
    """ChatML written out in plain Python, independently of any template engine."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def _expected_messages(row: dict) -> list[dict]:
    """The messages of a sample row, worked out from the row's own fields."""
    if "messages" in row:
        return [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
    if "conversations" in row:
        roles = {"human": "user", "gpt": "assistant"}
        return [{"role": roles[t["from"]], "content": t["value"]} for t in row["conversations"]]
    user = row["instruction"] + ("\n\n" + row["input"] if row["input"].strip() else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": row["output"]}]


def _sample() -> list[dict]:
    return [row for name in FORMATS for row in _rows(name)]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(str(TOKENIZER))


def _tokenize(texts: list[str], **params) -> tuple[pa.Table, list[str | None]]:
    op = SftTokenize(tokenizer=str(TOKENIZER), **params)
    result = op.process(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}))
    assert result.errors is None
    return result.table, result.dropped or [None] * len(texts)


def _answer_runs(ids: list[int], mask: list[int]) -> list[list[int]]:
    """The maximal runs of consecutive masked tokens."""
    runs, current = [], []
    for i, m in zip(ids, mask):
        if m:
            current.append(i)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def _check_masks(tok: Tokenizer, table: pa.Table, conversations: list[list[dict]], chatml: bool = True,
                 end: str = "<|im_end|>", before: str = "") -> None:
    """Every row: ids are the tokenizer's own for the independent ChatML rendering (`chatml`), and
    the masked tokens decode to exactly each assistant content, after `before` and followed by `end`."""
    for i, messages in enumerate(conversations):
        ids, mask = table["token_ids"][i].as_py(), table["loss_mask"][i].as_py()
        assert len(ids) == len(mask) == table["num_tokens"][i].as_py() > 0
        assert set(mask) == {0, 1}
        if chatml:
            assert ids == tok.encode(_chatml(messages), add_special_tokens=False).ids
        answers = [before + m["content"] + end for m in messages if m["role"] == "assistant"]
        decoded = [tok.decode(run, skip_special_tokens=False) for run in _answer_runs(ids, mask)]
        assert decoded == answers, f"row {i}"


# ----------------------------------------------------------------------------- reading


def test_reader_keeps_each_format_intact_and_other_fields_as_metadata(tmp_path):
    for name in FORMATS:
        path = CHAT / name
        records = list(read_jsonl(Split(str(path), "jsonl"), path.open("rb"), 1 << 20, None, None, chat=True))
        rows = _rows(name)
        assert len(records) == len(rows) and all(isinstance(r, Record) for r in records)
        for record, row in zip(records, rows):
            conversation = {k: v for k, v in row.items() if k in ("messages", "conversations", "instruction",
                                                                  "input", "output")}
            assert json.loads(record.text) == conversation
            assert record.metadata == {k: v for k, v in row.items() if k not in conversation}
    # Without input.chat a chat row has no text field, as before; a row with no conversation is Bad.
    row = _rows("messages.jsonl")[0]
    assert isinstance(record_from_mapping(dict(row), 0, None, None), Bad)
    bad = record_from_mapping({"text": "plain"}, 7, None, None, chat=True)
    assert isinstance(bad, Bad) and "no conversation field" in bad.error
    # input.chat on a WARC input is refused up front, naming the file and the fix.
    with pytest.raises(InputError, match=r"input.chat .* is warc"):
        ylink_data.run({"input": {"paths": [str(REPO / "samples/crawl/CC-MAIN-2014-35-excerpt.warc")], "chat": True},
                        "output": {"path": str(tmp_path / "out")}, "stages": []}, progress=False)


# ----------------------------------------------------------------------------- normalising and rendering


def test_three_formats_normalise_to_the_messages_of_their_rows():
    for name, fmt in FORMATS.items():
        for row in _rows(name):
            expected = _expected_messages(row)
            parsed = json.loads(_chat_text(row))
            assert to_messages(parsed, "auto") == to_messages(parsed, fmt) == expected
    multi = [r for r in _rows("messages.jsonl") + _rows("sharegpt.jsonl") if len(_expected_messages(r)) >= 6]
    assert len(multi) >= 20  # multi-turn: 3 or 4 exchanges


def test_rendering_matches_a_hand_checked_string_and_plain_chatml():
    # seed_task_1, checked by hand against data/seed_tasks.jsonl: the instruction, a blank line, the input.
    row = next(r for r in _rows("alpaca.jsonl") if r["id"] == "seed_task_1")
    template = load_chat_template()
    text, spans = render_with_spans(template, to_messages(row))
    assert text == ("<|im_start|>user\nWhat is the relation between the given pairs?\n\nNight : Day :: Right : Left"
                    "<|im_end|>\n<|im_start|>assistant\nThe relation between the given pairs is that they are "
                    "opposites.<|im_end|>\n")
    assert [text[a:b] for a, b in spans] == ["The relation between the given pairs is that they are opposites.<|im_end|>"]
    for row in _sample():
        messages = _expected_messages(row)
        text, spans = render_with_spans(template, messages)
        assert text == _chatml(messages)
        assert [text[a:b] for a, b in spans] == [m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant"]
    with_prompt = template.render(_expected_messages(row)[:1], add_generation_prompt=True)
    assert with_prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")


# ----------------------------------------------------------------------------- masks


def test_masks_cover_exactly_the_assistant_answers_in_all_three_formats(tok):
    rows = _sample()
    table, dropped = _tokenize([_chat_text(r) for r in rows])
    assert dropped == [None] * len(rows)
    _check_masks(tok, table, [_expected_messages(r) for r in rows])
    assert table.schema.field("loss_mask").type == pa.list_(pa.uint8())
    assert table.schema.field("token_ids").type == pa.list_(pa.uint16())  # 2,000 tokens fit two bytes


def test_masks_on_real_multi_turn_faq_threads_and_chinese(tok, shared_data):
    """Real multi-turn Q&A: each recipe page's FAQ in page order (en, fr, es, da; accents split into
    byte-level tokens), and Chinese news articles with their categories as answers (every Han
    character three byte tokens of one character's offsets)."""
    pages = [json.loads(line) for line in
             (shared_data / "documents/html_faq/recipe_scrapers/faq_expected.jsonl").read_text().splitlines()]
    threads = [[m for qa in page["qa"] for m in ({"role": "user", "content": qa["question_text"]},
                                                 {"role": "assistant", "content": qa["answer_text"]})]
               for page in pages if page["n_qa"] >= 2]
    assert len(threads) >= 10 and {p["lang"][:2] for p in pages} >= {"en", "fr", "es", "da"}
    news = [line.split("\t", 1) for line in
            (shared_data / "zh_thucnews_cnews/cnews.val.txt").read_text(encoding="utf-8").splitlines()[::100][:8]]
    chinese = [[m for category, text in news[k:k + 2]
                for m in ({"role": "user", "content": f"这篇新闻属于哪个类别？\n\n{text[:300]}"},
                          {"role": "assistant", "content": category})] for k in range(0, 8, 2)]
    conversations = threads + chinese
    table, dropped = _tokenize([json.dumps({"messages": c}, ensure_ascii=False) for c in conversations])
    assert dropped == [None] * len(conversations)
    _check_masks(tok, table, conversations)


def test_a_template_from_a_tokenizer_config_with_its_special_tokens(tok, tmp_path):
    """A Mistral-like template read from tokenizer_config.json, special tokens as AddedToken objects:
    the answer follows the user turn's closing space, which the byte-level BPE merges with the
    answer's first word into one token: the mask covers that token (it overlaps the answer), so the
    answer decodes with the space in front, and without it the first word would not be learnt."""
    template = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + "
                "' [/INST] ' }}{% elif m['role'] == 'assistant' %}{{ m['content'] + eos_token }}{% else %}"
                "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": template, "bos_token": "<|endoftext|>",
                                  "eos_token": {"content": "<|im_end|>", "lstrip": False, "special": True}}))
    rows = _rows("messages.jsonl")[:6]
    system = {"messages": [{"role": "system", "content": "Answer briefly."}] + rows[0]["messages"]}
    table, dropped = _tokenize([_chat_text(r) for r in rows] + [json.dumps(system)], tokenizer_config=str(config))
    assert dropped == [None] * 6 + ["sft_tokenize:template_error"]
    conversations = [_expected_messages(r) for r in rows]
    _check_masks(tok, table, conversations, chatml=False, before=" ")
    first = conversations[0]
    expected = "<|endoftext|>" + "".join(f"[INST] {m['content']} [/INST] " if m["role"] == "user"
                                         else f"{m['content']}<|im_end|>" for m in first)
    assert table["token_ids"][0].as_py() == tok.encode(expected, add_special_tokens=False).ids


def test_options_and_config_errors(tok, tmp_path):
    rows = _rows("messages.jsonl")
    texts = [_chat_text(r) for r in rows]
    lengths = [len(tok.encode(_chatml(_expected_messages(r)), add_special_tokens=False).ids) for r in rows]
    limit = sorted(lengths)[len(lengths) // 2]
    table, dropped = _tokenize(texts, max_tokens=limit)
    assert [d is not None for d in dropped] == [n > limit for n in lengths]
    assert set(dropped) - {None} == {"sft_tokenize:too_long"}
    # Truncated, a conversation is kept when its first answer starts before the limit.
    first_answer = [len(tok.encode(_chatml(_expected_messages(r)[:1]) + "<|im_start|>assistant\n",
                                   add_special_tokens=False).ids) for r in rows]
    table, dropped = _tokenize(texts, max_tokens=limit, truncate=True)
    assert [d is not None for d in dropped] == [start >= limit for start in first_answer]
    assert 0 < dropped.count("sft_tokenize:too_long") < sum(n > limit for n in lengths)
    full, _ = _tokenize(texts)
    for i, n in enumerate(table["num_tokens"].to_pylist()):
        assert n == (0 if dropped[i] else min(lengths[i], limit))
        assert table["token_ids"][i].as_py() == full["token_ids"][i].as_py()[:n]
        assert table["loss_mask"][i].as_py() == full["loss_mask"][i].as_py()[:n]
    # A template that rewrites earlier turns (here: a count of them in front) cannot be masked from prefixes.
    _, dropped = _tokenize(texts[:2], chat_template="{{ messages|length }}{% for m in messages %}{{ m['content'] }}"
                                                    "{% endfor %}")
    assert dropped == ["sft_tokenize:template_not_incremental"] * 2
    base = {"input": {"paths": [str(CHAT / "messages.jsonl")], "chat": True}, "output": {"path": str(tmp_path)}}
    for params, message in (({"chat_template": "x", "tokenizer_config": "y"}, "not both"),
                            ({"chat_template": "{% for %}"}, "does not parse"),
                            ({"truncate": True}, "needs max_tokens")):
        with pytest.raises(ConfigError, match=message):
            load_config({**base, "stages": [{"sft_tokenize": {"tokenizer": str(TOKENIZER), **params}}]})


# ----------------------------------------------------------------------------- a real pipeline run


def _malformed(tmp_path: Path) -> tuple[Path, Counter]:
    """Real sample rows broken in every way the op names, with the reason each must get."""
    m = _rows("messages.jsonl")[0]["messages"]
    s = _rows("sharegpt.jsonl")[0]["conversations"]
    a = _rows("alpaca.jsonl")[0]
    broken = [
        ({"messages": m[0]["content"]}, "not_a_list"),
        ({"messages": [m[0], "an answer"]}, "not_a_message"),
        ({"messages": [m[0], {"role": "tool", "content": m[1]["content"]}]}, "unknown_role"),
        ({"conversations": [s[0], {"from": "bing", "value": s[1]["value"]}]}, "unknown_role"),
        ({"messages": [m[0], {"role": "assistant", "content": "  "}]}, "empty_content"),
        ({"instruction": a["instruction"], "input": "", "output": None}, "empty_content"),
        ({"messages": [m[0], {"role": "assistant", "content": [{"type": "text", "text": m[1]["content"]}]}]},
         "non_string_content"),
        ({"messages": [m[0], m[2]]}, "no_assistant"),
        ({"messages": [m[0], m[2], m[1]]}, "not_alternating"),
        ({"messages": [m[1], m[0], m[1]]}, "not_alternating"),
        ({"messages": [m[0], m[1], {"role": "system", "content": "Be brief."}, m[2], m[3]]}, "misplaced_system"),
    ]
    path = tmp_path / "input" / "malformed.jsonl"
    path.parent.mkdir()
    lines = [json.dumps(row) for row, _ in broken] + [json.dumps({"text": "not a conversation"}), "{broken json"]
    path.write_text("\n".join(lines) + "\n")
    return path, Counter(f"sft_tokenize:{reason}" for _, reason in broken)


@pytest.fixture(scope="module")
def sft_run(ray_session, tmp_path_factory):
    """pipelines/sft.yaml as shipped, over the sample plus the malformed rows."""
    tmp_path = tmp_path_factory.mktemp("sft")
    malformed, reasons = _malformed(tmp_path)
    out, stats = ylink_data.run(str(PIPELINE), progress=False, **{
        "input.paths": [str(CHAT / "*.jsonl"), str(malformed)], "output.path": str(tmp_path / "out")})
    return out, stats, reasons


def test_pipeline_run_tokenizes_the_sample_and_names_every_malformed_row(sft_run, tok):
    out, stats, reasons = sft_run
    assert check_invariant(stats) is None
    rows = _sample()
    assert stats["input_records"] == len(rows) + sum(reasons.values()) + 2
    assert stats["quarantined"] == 2  # the row with no conversation field, the broken JSON line
    stage = next(s for s in stats["stages"] if s["name"] == "sft_tokenize")
    lengths = [len(tok.encode(_chatml(_expected_messages(r)), add_special_tokens=False).ids) for r in rows]
    fitting = [r for r, n in zip(rows, lengths) if n <= 1024]  # the pipeline's max_tokens
    reasons = reasons + Counter({"sft_tokenize:too_long": len(rows) - len(fitting)})
    assert reasons["sft_tokenize:too_long"] == 4  # the longest assembled conversations, up to 2,231 tokens
    assert Counter(stage["dropped"]) == reasons
    run = ylink_data.open_run(out)
    rejected = Counter(run.rejected().column("reason").to_pylist())
    assert rejected == reasons
    kept = run.to_arrow()
    assert kept.num_rows == stats["output_records"] == len(fitting)
    by_text = {_chat_text(r): _expected_messages(r) for r in fitting}
    order = kept.column("text").to_pylist()
    assert sorted(order) == sorted(by_text)
    _check_masks(tok, kept, [by_text[t] for t in order])


def test_run_stats_count_the_tokens_sft_tokenize_wrote(sft_run, tok):
    """stats.json's `tokens` section, as for `tokenize` runs (issue 34 point 5): before, an
    sft_tokenize run had none. Expected counts come from re-encoding every kept conversation with
    plain ChatML and from the token_ids lists of the output Parquet, not from num_tokens."""
    out, stats, _ = sft_run
    assert json.loads((Path(out) / "stats.json").read_text())["tokens"] == stats["tokens"]
    lengths = [len(tok.encode(_chatml(_expected_messages(r)), add_special_tokens=False).ids) for r in _sample()]
    fitting = [n for n in lengths if n <= 1024]  # the pipeline's max_tokens
    kept = ylink_data.open_run(out).to_arrow()
    in_parquet = sum(len(ids) for ids in kept.column("token_ids").to_pylist())
    assert stats["tokens"]["total"] == sum(fitting) == in_parquet > 10_000
    assert stats["tokens"]["documents"] == len(fitting) == kept.num_rows
    assert stats["tokens"]["by_lang"] == {"?": in_parquet}  # chat rows have no `lang`
    assert stats["tokens"]["by_tier"] == {}


def test_packing_invariants_on_the_run(sft_run):
    out, _, _ = sft_run
    kept = ylink_data.open_run(out).to_arrow(["id", "token_ids", "loss_mask"])
    ids = [np.asarray(x, dtype=np.int64) for x in kept["token_ids"].to_pylist()]
    masks = [np.asarray(x, dtype=np.uint8) for x in kept["loss_mask"].to_pylist()]
    seq_len = 1024
    total = sum(map(len, ids))
    counts = {}
    for strategy in ("ffd", "in_order"):
        sequences = pack(ids, masks, seq_len, strategy=strategy, pad_id=3)
        counts[strategy] = len(sequences)
        members = [i for s in sequences for i in s.members]
        assert sorted(members) == list(range(len(ids)))  # every conversation exactly once
        for s in sequences:
            assert len(s.input_ids) == len(s.labels) == len(s.position_ids) == seq_len
            assert s.cu_seqlens[0] == 0 and s.cu_seqlens[-1] == seq_len
            at = 0
            for i in s.members:  # whole, in order, positions from 0, labels only on answers
                n = len(ids[i])
                assert (s.input_ids[at:at + n] == ids[i]).all()
                assert (s.position_ids[at:at + n] == np.arange(n)).all()
                assert (s.labels[at:at + n] == np.where(masks[i] == 1, ids[i], IGNORE_INDEX)).all()
                at += n
            assert list(s.cu_seqlens[:len(s.members) + 1]) == [0] + list(np.cumsum([len(ids[i]) for i in s.members]))
            assert (s.input_ids[at:] == 3).all() and (s.labels[at:] == IGNORE_INDEX).all()
            assert (s.position_ids[at:] == np.arange(seq_len - at)).all()
            assert len(s.cu_seqlens) == len(s.members) + 1 + (at < seq_len)
        if strategy == "in_order":
            assert members == sorted(members)
    assert math.ceil(total / seq_len) <= counts["ffd"] <= counts["in_order"]
    # first-fit decreasing, brute force: each conversation, longest first, into the first bin with room
    lengths = [len(x) for x in ids]
    bins: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        room = next((b for b in bins if sum(lengths[j] for j in b) + lengths[i] <= seq_len), None)
        room.append(i) if room is not None else bins.append([i])
    assert sorted(map(sorted, bins)) == sorted(plan_bins(lengths, seq_len, "ffd"))
    with pytest.raises(ValueError, match="max_tokens"):
        pack(ids, masks, max(lengths) - 1)


def test_packed_batches_read_the_run_once_across_ranks(sft_run):
    out, _, _ = sft_run
    kept = ylink_data.open_run(out).to_arrow(["id", "token_ids", "loss_mask"])
    truth = {d: (t, m) for d, t, m in zip(kept["id"].to_pylist(), kept["token_ids"].to_pylist(),
                                          kept["loss_mask"].to_pylist())}
    seen = []
    for rank in range(2):
        batches = list(PackedBatches(out, seq_len=1024, batch_size=3, window=16, rank=rank, world_size=2, seed=5))
        for batch in batches:
            assert batch["input_ids"].shape == batch["labels"].shape == (len(batch["ids"]), 1024)
            cu = batch["cu_seqlens"]
            assert cu[0] == 0 and cu[-1] == batch["input_ids"].size and batch["max_seqlen"] == np.diff(cu).max()
            for row, docs in enumerate(batch["ids"]):
                bounds = cu[(cu >= row * 1024) & (cu <= (row + 1) * 1024)] - row * 1024
                lengths = [len(truth[d][0]) for d in docs]
                used = sum(lengths)
                assert bounds.tolist() == [0, *np.cumsum(lengths).tolist()] + ([1024] if used < 1024 else [])
                for doc, a, b in zip(docs, bounds[:-1], bounds[1:]):
                    tokens, mask = truth[doc]
                    assert batch["input_ids"][row, a:b].tolist() == tokens
                    assert batch["labels"][row, a:b].tolist() == [t if k else IGNORE_INDEX for t, k in zip(tokens, mask)]
                    assert batch["position_ids"][row, a:b].tolist() == list(range(b - a))
                assert (batch["labels"][row, used:] == IGNORE_INDEX).all()
                seen += docs
    assert sorted(seen) == sorted(truth)  # every conversation once, across both ranks
