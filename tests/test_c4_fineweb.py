"""c4_quality and fineweb_quality on real text: each rule fired by a minimal change to a real
passage, the zh preset on real Chinese news and web spam, the English settings' failure on Chinese,
annotate mode, and both ops in a real pipeline."""
from __future__ import annotations

import textwrap
from collections import Counter

import pytest

import ylink_data
from ylink_data.engine.stats import check_invariant
from ylink_data.ops.c4 import C4Quality
from ylink_data.ops.fineweb import FineWebQuality

from .test_gopher import _failing, run_preset, _preset_ops, _table, _verdicts, cc_english, gutenberg, thucnews, web_spam


def _page() -> list[str]:
    """A real Common Crawl page (5 lines, 15 sentences as datatrove's spaCy sentencizer counts them)
    that C4 keeps whole."""
    return cc_english()[2].strip().split("\n")


def _c4(op: C4Quality, text: str, lang: str = "en"):
    """(drop reason or None, new text, counters) of one document."""
    result = op.process(_table([text], [lang]))
    return (result.dropped or [None])[0], result.table.column("text")[0].as_py(), result.counters


def test_c4_keeps_the_real_page_unchanged():
    page = "\n".join(_page())
    assert _c4(C4Quality(), page) == (None, page, {})


@pytest.mark.parametrize("rule,edit", [
    ("no_terminal_punct", lambda s: s.rstrip(".!?\"'")),
    ("no_terminal_punct", lambda s: s.rstrip(".!?\"'") + "..."),
    ("too_few_words", lambda s: " ".join(s.split()[-2:])),
    ("javascript", lambda s: "JavaScript: " + s),
    ("policy", lambda s: s[:-1] + ", see our privacy policy."),
    ("too_long_word", lambda s: s.replace(" ", "", 1) + " " + "a" * 1001 + "."),
])
def test_c4_line_rule_removes_one_edited_line(rule, edit):
    lines = _page()
    lines[1] = edit(lines[1])
    reason, text, counters = _c4(C4Quality(), "\n".join(lines))
    assert reason is None
    assert text == "\n".join(lines[:1] + lines[2:])
    assert counters == {f"c4_lines_removed_{rule}": 1, "c4_documents_changed": 1}


@pytest.mark.parametrize("reason,edit", [
    ("lorem_ipsum", lambda lines: lines[:2] + ["Lorem ipsum dolor sit amet, consectetur adipiscing elit."] + lines[2:]),
    ("curly_bracket", lambda lines: lines[:1] + ["{" + lines[1]] + lines[2:]),
    ("too_few_sentences", lambda lines: [lines[0]]),
])
def test_c4_document_rules_on_an_edited_real_page(reason, edit):
    assert _c4(C4Quality(), "\n".join(edit(_page())))[0] == f"c4_quality:{reason}"


def test_c4_bracket_in_a_javascript_line_removes_only_the_line():
    """datatrove checks "javascript" before "{": the line goes, the page stays."""
    lines = _page()
    lines[1] = "{ JavaScript } " + lines[1]
    reason, _, counters = _c4(C4Quality(), "\n".join(lines))
    assert reason is None and counters["c4_lines_removed_javascript"] == 1


def test_c4_cuts_citations_and_hard_wrapped_prose_loses_its_lines(shared_data):
    lines = _page()
    lines[1] = lines[1][:-1] + "[12][citation needed]" + lines[1][-1]
    assert _c4(C4Quality(), "\n".join(lines))[1] == "\n".join(_page())
    # Gutenberg's raw text is hard-wrapped at ~70 characters: most lines end mid-sentence.
    passage = gutenberg(shared_data, "austen-emma", 3000)[5]
    _, text, counters = _c4(C4Quality(), passage)
    assert counters["c4_lines_removed_no_terminal_punct"] > len(text.splitlines())


def _article(shared_data, index: int = 0) -> str:
    return thucnews(shared_data)[index]


def test_c4_zh_rules_on_edited_news(shared_data):
    op = C4Quality(language="zh", split_sentences=True)
    news = _article(shared_data)
    reason, text, counters = _c4(op, news, "zh")
    assert reason is None and text == news.removesuffix("(XWT185)") and counters == {
        "c4_lines_removed_no_terminal_punct": 1, "c4_documents_changed": 1}
    first = news.split("。")[1] + "。"           # a real sentence
    short = "好在湖人方面确认。"                   # 8 content characters: kept
    assert _c4(op, news.replace(first, first + "确认。"), "zh")[2]["c4_lines_removed_too_few_words"] == 1
    assert _c4(op, news.replace(first, first + short), "zh")[2].get("c4_lines_removed_too_few_words") is None
    trailing = _c4(op, news.replace("(XWT185)", "湖人有底气吗……"), "zh")   # an ellipsis does not end a line
    assert trailing[1] == text and trailing[2]["c4_lines_removed_no_terminal_punct"] == 1
    assert _c4(op, news.replace("(XWT185)", "湖人有底气吗？"), "zh")[1] == text + "湖人有底气吗？"
    assert _c4(op, news.replace("。", "{。", 1), "zh")[0] == "c4_quality:curly_bracket"
    four = "".join(s + "。" for s in news.split("。")[:4])
    assert _c4(op, four, "zh")[0] == "c4_quality:too_few_sentences"
    assert _c4(op, four + news.split("。")[4] + "。", "zh")[0] is None


def test_fineweb_keeps_real_english_pages():
    op = FineWebQuality()
    assert [_failing(op, t) for t in cc_english()] == [set()] * 10


@pytest.mark.parametrize("rule", ["line_punct_ratio", "short_line_ratio", "char_dup_ratio", "list_ratio"])
def test_each_fineweb_rule_fires_on_an_edited_real_page(rule):
    op = FineWebQuality()
    lines = _page()
    prose = " ".join(lines)
    if rule == "line_punct_ratio":
        edited = "\n".join(s.rstrip(".!?\"'") for s in lines)
    elif rule == "short_line_ratio":
        edited = "\n".join(textwrap.wrap(prose, 30))
    elif rule == "char_dup_ratio":
        edited = "\n".join(lines + [lines[-1]])
    else:
        words = prose.split()
        edited = "\n".join(" ".join(words[i:i + 2]) for i in range(0, len(words), 2))
    assert rule not in _failing(op, "\n".join(lines))
    assert rule in _failing(op, edited)


def test_fineweb_bounds_are_inclusive_like_datatrove():
    op = FineWebQuality()
    lines = _page()
    # 1 of 8 lines (0.125) ends in punctuation: kept; 1 of 9 (0.111): dropped; exactly at 0.12 would drop.
    bare = [s.rstrip(".!?\"'") for s in lines]
    assert op.verdict("en", op.measure("\n".join(lines[:1] + bare[1:] + bare[1:4]), "en")) != "fineweb_quality:line_punct_ratio"
    assert op.verdict("en", op.measure("\n".join(lines[:1] + bare[1:] + bare[1:5]), "en")) == "fineweb_quality:line_punct_ratio"
    assert op.verdict("en", {"line_punct_ratio": 0.12, "short_line_ratio": 0, "char_dup_ratio": 0,
                             "list_ratio": 0}) == "fineweb_quality:line_punct_ratio"
    assert op.verdict("en", {"line_punct_ratio": 1, "short_line_ratio": 0, "char_dup_ratio": 0,
                             "list_ratio": 0.3}) is None


def test_fineweb_zh_measures_chinese_punctuation_and_characters(shared_data):
    op = FineWebQuality(language="zh")
    news = _article(shared_data, 3)
    sentences = [s + "。" for s in news.split("。") if s]
    page = "\n".join(sentences)
    assert _failing(op, page, "zh") == set()
    assert "line_punct_ratio" in _failing(FineWebQuality(), page, "en")       # 。 is not English punctuation
    assert _failing(op, page.replace("。", ""), "zh") >= {"line_punct_ratio"}
    chopped = "\n".join(page[i:i + 9] for i in range(0, len(page), 9))       # 9-character lines
    assert "short_line_ratio" in _failing(op, chopped, "zh")
    assert "char_dup_ratio" in _failing(op, page + "\n" + sentences[2], "zh")


def _rates(ops, texts):
    return Counter(_verdicts(ops, texts))


def test_zh_preset_passes_most_news(shared_data):
    news = thucnews(shared_data)
    c4, fineweb = _preset_ops("c4-fineweb-zh")
    c4_rates, fw_rates = _rates([c4], news), _rates([fineweb], news)
    assert c4_rates[None] / len(news) >= 0.85       # measured 88.1%
    assert fw_rates[None] / len(news) >= 0.98       # measured 100%
    spam = web_spam(shared_data)
    assert _rates([c4, fineweb], spam)[None] / len(spam) <= 0.8   # measured 78% (both ops)


def test_english_settings_drop_chinese_news(shared_data):
    news = thucnews(shared_data)
    c4, fineweb = _preset_ops("c4-fineweb-en")
    assert _rates([c4], news)[None] == 0                          # no spaces: every line has < 3 words
    assert _rates([fineweb], news)[None] / len(news) <= 0.01      # 。 does not end a line: measured 0.2%


def test_en_preset_on_real_pages():
    c4, fineweb = _preset_ops("c4-fineweb-en")
    verdicts = _verdicts([c4, fineweb], cc_english())
    assert verdicts.count(None) == 8 and set(verdicts) == {None, "c4_quality:too_few_sentences"}


def test_annotate_writes_measures_and_changes_nothing():
    page = "\n".join(_page() + ["Lorem ipsum dolor sit amet, consectetur adipiscing elit."])
    table = _table([page, "\n".join(_page())])
    c4 = C4Quality(annotate=True).process(table)
    assert c4.dropped is None and c4.table.column("text").to_pylist() == table.column("text").to_pylist()
    assert c4.table.column("c4_lorem_ipsum").to_pylist() == [1, 0]
    assert c4.table.column("c4_sentences").to_pylist() == [16, 15]  # as datatrove 0.10 counts them
    fw = FineWebQuality(annotate=True).process(table)
    assert fw.dropped is None
    assert [c for c in fw.table.column_names if c.startswith(("fineweb_", "gopher_"))] == [
        "fineweb_line_punct_ratio", "fineweb_short_line_ratio", "fineweb_char_dup_ratio", "fineweb_list_ratio"]
    assert fw.table.column("fineweb_line_punct_ratio").to_pylist() == [1.0, 1.0]


def test_ops_in_a_pipeline_report_reasons(ray_session, shared_data, tmp_path):
    news = thucnews(shared_data)[:30]
    four = "".join(s + "。" for s in news[0].split("。")[:4])
    docs = news + [four, news[1].replace("。", "{。", 1), news[2] + "\n" + news[2]]
    out, stats = run_preset("c4-fineweb-zh.yaml", docs, tmp_path)
    assert check_invariant(stats) is None
    run = ylink_data.open_run(out)
    reasons = run.rejected().column("reason").to_pylist()
    assert {"c4_quality:too_few_sentences", "c4_quality:curly_bracket", "fineweb_quality:char_dup_ratio"} <= set(reasons)
    kept = run.to_arrow()
    assert kept.num_rows + len(reasons) == len(docs) and kept.num_rows >= 24
    c4_stage = next(s for s in stats["stages"] if s["name"] == "c4_quality")
    assert c4_stage["counters"]["c4_lines_removed_no_terminal_punct"] >= 10
    assert "(XWT185)" not in "".join(kept.column("text").to_pylist())
