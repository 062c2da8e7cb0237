"""`ylink quality train` chooses its parameters per data set (issue 24.1, text/quality/autotune.py): the
budget becomes a fixed list of candidates (so the same seed gives the same model), the choice and
the validation scores go into MODEL.metrics.json, the documents' shape is a candidate and the model
that read it is fed it when scoring, and the choice follows the one-standard-error rule."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ylink_data.text.quality import QualityModel, model_line

from ylink_data.train.quality import train_classifier
from ylink_data.text.quality.autotune import FOLDS, MAX_CANDIDATES, Trial, candidates, choose, estimated_seconds, plan
from ylink_data.text.quality.preprocess import STRUCTURE_MARKS, structure_tokens

DEFAULTS = {"epoch": 10, "lr": 0.2, "wordNgrams": 2, "minCount": 2, "structure": False}


def test_the_budget_buys_a_fixed_list_of_candidates_defaults_first():
    first = candidates(DEFAULTS, seed=1)
    assert first[0] == DEFAULTS and first[1] == DEFAULTS | {"structure": True}
    assert len({json.dumps(c, sort_keys=True) for c in first}) == len(first)  # no candidate twice
    assert candidates(DEFAULTS, seed=1) == first and candidates(DEFAULTS, seed=2)[2:] != first[2:]
    # Whatever the clock says: the plan is a function of the data's size, the budget and the seed.
    tokens = 2_000_000
    small, large = plan(tokens, DEFAULTS, 30, 1), plan(tokens, DEFAULTS, 3000, 1)
    assert small == plan(tokens, DEFAULTS, 30, 1) and small[0] == DEFAULTS
    assert sum(estimated_seconds(tokens, p) for p in small) <= 30 < sum(estimated_seconds(tokens, p) for p in large)
    assert len(small) < len(large) <= MAX_CANDIDATES
    assert plan(tokens, DEFAULTS, 0.1, 1) == []  # nothing fits: the trainer keeps the defaults


def test_the_one_standard_error_rule_prefers_earlier_candidates():
    defaults = Trial(DEFAULTS, [0.80, 0.82, 0.81])
    lucky = Trial(DEFAULTS | {"lr": 1.0}, [0.83, 0.80, 0.83])  # best mean, but not clearly better
    assert choose([defaults, lucky]) is defaults
    better = Trial(DEFAULTS | {"lr": 0.5}, [0.86, 0.88, 0.87])  # better in every fold
    assert choose([defaults, lucky, better]) is better
    failed = Trial(DEFAULTS | {"lr": 1.0}, error="Encountered NaN")
    assert choose([failed, defaults]) is defaults


def test_shape_tokens_describe_the_whole_document_and_never_come_from_text():
    news = "第一段很长的新闻正文。" * 30
    page = "\n".join(["首页", "登录", "注册", "联系我们", "版权所有"] * 6)
    a, b = structure_tokens(news), structure_tokens(page)
    assert a.split()[-1] == STRUCTURE_MARKS[0] and b.split()[-1] == STRUCTURE_MARKS[1]
    assert a.split()[1] == "_lines0" and b.split()[1] == "_lines4"  # 1 line against 30: octaves
    assert a.split()[3] == "_punct4" and b.split()[3] == "_punct0"  # every line closed against none
    # words of real text never become shape tokens: "_" is split off English words, cut from Chinese
    for text in ("_endp _len3 my_variable", "中文_endx测试"):
        for lang in ("en", "zh"):
            assert not set(model_line(text, lang).split()) & {"_endp", "_endx", "_len3"}


def test_the_search_picks_the_shape_where_it_tells_the_classes_apart(shared_data, tmp_path):
    """Chinese news stored one article a line against spam pages with their line breaks: the shape
    tells them apart, which 150 characters of words do less well; the search must find that, write
    its trials, and the model must then read the shape when it scores."""
    news = (shared_data / "zh_thucnews_cnews/cnews.val.txt").read_text(encoding="utf-8").splitlines()[::4]
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"text": n.split("\t", 1)[1][:1500]}, ensure_ascii=False) + "\n"
                            for n in news), encoding="utf-8")
    bad = str(shared_data / "zh_chinesewebtext_quality/2021-43/cleared1.jsonl")
    out = tmp_path / "m.bin"
    m = train_classifier([str(good)], [bad], str(out), lang="zh", test_fraction=0.2, autotune_seconds=20, seed=3)
    tuned = json.loads((tmp_path / "m.metrics.json").read_text())["autotune"]
    assert tuned == m["autotune"] and tuned["folds"] == FOLDS
    by_structure = {}
    for trial in tuned["trials"]:
        if "mean" in trial:
            by_structure.setdefault(trial["params"]["structure"], []).append(trial["mean"])
    assert max(by_structure[True]) > max(by_structure[False])  # the shape helps on this data...
    assert tuned["params"]["structure"] is True  # ...so it is chosen
    assert tuned["validation_mean"] >= tuned["defaults_mean"]
    model = QualityModel.load(str(out))
    assert model.structure is True
    texts = [json.loads(line)["text"] for line in good.read_text(encoding="utf-8").splitlines()][:50]
    from ylink_data.text.quality.preprocess import model_lines

    fed = model.scores_of_lines(model_lines(texts, "zh", None, True))
    assert np.array_equal(model.scores(texts, "zh"), fed)  # scoring feeds the shape it was trained on
    assert not np.array_equal(model.scores_of_lines(model_lines(texts, "zh")), fed)


def test_zero_seconds_trains_with_the_given_parameters(shared_data, tmp_path):
    good = str(shared_data / "zh_chinesewebtext_quality/fasttext/data/clean.jsonl")
    bad = str(shared_data / "zh_chinesewebtext_quality/fasttext/data/dirty.jsonl")
    m = train_classifier([good], [bad], str(tmp_path / "m.bin"), lang="zh", test_fraction=0.3,
                         autotune_seconds=0, epoch=7, structure=True, seed=2)
    assert m["autotune"] == {"chosen": "defaults", "why": "autotune_seconds is 0"}
    assert m["params"]["epoch"] == 7 and m["params"]["structure"] is True
    assert QualityModel.load(str(tmp_path / "m.bin")).structure is True
    with pytest.raises(ValueError, match="wordNgrams"):
        train_classifier([good], [bad], str(tmp_path / "x.bin"), wordNgrams=1)
    assert not Path(tmp_path / "x.bin").exists()
