"""The badwords op (C4's rule, right for Chinese) and the composed language presets
(configs/filters/en.yaml, zh.yaml) on real text: Chinese news mostly passes, the real Chinese web
spam mostly fails (hand-labelled), and stage presets splice into a pipeline where they stand."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError, InputError
from ylink_data.engine.stats import check_invariant
from ylink_data.ops import build_op

from .conftest import TEST_DATA
from .test_gopher import PRESETS, thucnews


def _web_sample(shared) -> list[dict]:
    path = shared / "zh_chinesewebtext_quality" / "2021-43" / "cleared1.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _table(texts, titles=None, lang="zh") -> pa.Table:
    titles = titles or [None] * len(texts)
    return pa.table({"id": [str(i) for i in range(len(texts))], "text": texts, "lang": [lang] * len(texts),
                     "metadata": [json.dumps({"title": t}, ensure_ascii=False) if t else None for t in titles]})


def _badwords(**params):
    op = build_op("badwords", params)
    op.setup()
    return op


def test_chinese_entries_of_one_or_two_characters_match_whole_words_only(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("# a test list\n性\n太阳城\nbt365\n", encoding="utf-8")
    op = _badwords(language="zh", lists=[str(words)])
    texts = ["这种可能性很大，专家说。",            # 性 inside the word 可能性: kept
             "欢迎来到太阳城官方网站，立即注册。",  # three characters: a substring match
             "点击bt365手机下载。",                # Latin and digits next to Han characters
             "我们的bt3650型号传感器。"]           # not the entry: a longer alphanumeric run
    assert op.process(_table(texts)).dropped == [None, "badwords:words", "badwords:words", None]


def test_english_entries_match_whole_words(tmp_path):
    words = tmp_path / "en.txt"
    words.write_text("ass\nadults only\n", encoding="utf-8")
    op = _badwords(language="en", lists=[str(words)])
    texts = ["The class assessed the mass of the brass.", "Entry for adults only, tonight!"]
    assert op.process(_table(texts, lang="en")).dropped == [None, "badwords:en"]
    with pytest.raises(InputError, match="badwords: cannot read list 'no-such-list'.*bundled list: zh-gambling"):
        _badwords(lists=["no-such-list"])


def test_bundled_chinese_lists_keep_news_and_catch_gambling_pages(shared_data):
    op = _badwords(language="zh")
    news = op.process(_table(thucnews(shared_data))).dropped
    assert sum(d is not None for d in news) <= 5          # measured 1 of 1,000 (an article quoting 性爱)
    web = _web_sample(shared_data)
    by_url = {d["url"]: d for d in web}
    hand_checked = {  # url -> dropped?  (read by a person: gambling brands injected, or a clean page)
        "http://335.3355703.com/news/2022/0314/61491.html": True,      # 威尼斯人现金网 in the text
        "https://www.baiduoh.com/_t265/2022/0222/c3403a6053a.html": True,  # a school renamed 吕氏贵宾会
        "https://3g.163.com/dy/article/GUF9MKE7051983MB.html": False,  # NetEase finance news
        "https://www.cnooc.com.cn/art/2022/4/28/art_47612_15282101.html": False,
    }
    urls = [u for u in by_url if any(u.startswith(k[:40]) for k in hand_checked)]
    assert len(urls) == len(hand_checked)
    expected = [hand_checked[next(k for k in hand_checked if u.startswith(k[:40]))] for u in urls]
    dropped = op.process(_table([by_url[u]["raw_content"] for u in urls], [by_url[u]["title"] for u in urls])).dropped
    assert [d is not None for d in dropped] == expected
    assert all(d in (None, "badwords:zh-gambling") for d in dropped)
    titles = op.process(_table([d["raw_content"] for d in web], [d["title"] for d in web])).dropped
    without = op.process(_table([d["raw_content"] for d in web])).dropped
    assert sum(d is not None for d in titles) >= 10                 # measured 12 of 100
    assert sum(d is not None for d in titles) >= sum(d is not None for d in without)


def test_stage_presets_splice_in_place(tmp_path):
    cfg = load_config({"input": {"paths": ["x.jsonl"]}, "output": {"path": str(tmp_path / "out")},
                       "stages": ["normalize", {"include": "filters/zh"}, "exact_dedup"]})
    names = [name for name, _ in cfg.ops]
    assert names[0] == "normalize" and names[-1] == "exact_dedup"
    assert names[1:-1] == ["url_filter", "badwords", "gopher_quality", "gopher_repetition", "c4_quality",
                           "fineweb_quality"]
    assert dict(cfg.ops)["gopher_quality"]["language"] == "zh"
    en = [name for name, _ in load_config({"include": [str(PRESETS / "en.yaml")], "input": {"paths": ["x"]},
                                           "output": {"path": str(tmp_path / "o")}}).ops]
    assert en == ["url_filter", "gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality"]
    with pytest.raises(ConfigError, match=r"stages\[1\]\.include: preset 'filters/nope' not found"):
        load_config({"input": {"paths": ["x"]}, "output": {"path": str(tmp_path / "o")},
                     "stages": ["normalize", {"include": "filters/nope"}]})


def test_zh_preset_passes_news_and_fails_most_of_the_web_sample(ray_session, shared_data, tmp_path):
    """The whole zh preset in a real run over the ChineseWebText sample as its JSONL (titles kept in
    metadata) and over THUCNews."""
    web = tmp_path / "web" / "cleared1.jsonl"
    web.parent.mkdir()
    web.write_bytes((shared_data / "zh_chinesewebtext_quality" / "2021-43" / "cleared1.jsonl").read_bytes())
    news = tmp_path / "news" / "news.jsonl"
    news.parent.mkdir()
    news.write_text("".join(json.dumps({"text": t, "url": f"https://news.sina.com.cn/{i}.shtml"},
                                       ensure_ascii=False) + "\n" for i, t in enumerate(thucnews(shared_data))),
                    encoding="utf-8")
    rates, dropped_urls = {}, set()
    for name, path in (("web", web), ("news", news)):
        out, stats = ylink_data.run({"name": f"zh-{name}", "stages": [{"include": str(PRESETS / "zh.yaml")}],
                                     "input": {"paths": [str(path)], "format": "jsonl"},
                                     "output": {"path": str(tmp_path / f"out-{name}"), "keep_rejected": True}},
                                    progress=False)
        assert check_invariant(stats) is None
        rates[name] = stats["output_records"] / stats["input_records"]
        if name == "web":
            rejected = ylink_data.open_run(out).rejected()
            assert "badwords:zh-gambling" in set(rejected.column("reason").to_pylist())
            dropped_urls = set(rejected.column("url").to_pylist())
    assert rates["news"] >= 0.8, rates    # measured 0.831
    # The web sample is not all spam: by hand labels (tests/data/chinesewebtext_cleared1_labels.json)
    # 27 pages are spam, 22 clean articles, 51 commercial blurbs or listings.
    labels = json.loads((TEST_DATA / "chinesewebtext_cleared1_labels.json").read_text(encoding="utf-8"))["labels"]
    assert set(labels) == {d["url"] for d in _web_sample(shared_data)}
    def dropped(label):
        urls = [u for u, lab in labels.items() if lab == label]
        return sum(u in dropped_urls for u in urls) / len(urls)
    assert dropped("spam") >= 0.7, dropped("spam")      # measured 21 of 27 (16 without the brand names)
    assert dropped("clean") <= 0.15, dropped("clean")   # measured 2 of 22
    assert rates["web"] <= 0.6, rates                   # measured 0.57 of all 100 kept
