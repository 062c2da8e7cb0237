"""Which copy minhash_dedup keeps (issue 42 point 4), on the bundled real pages and their mirrors: each
page's main text, and copies carrying the lines that other bundled pages have around their own
article (their real header and footer: the page's whole rendered text less its extracted main text).

For every `keep` policy, the op keeps in each cluster the member the policy ranks first
(`dedup.keep.choose`) and removes every other member as a verified copy of it, whatever the input
order and the tasks; the default keeps the clean original of the mirrors that add a footer, where
`longest` kept the copies; and the reported case (share bars added by a mirror, in English and in
Chinese) keeps the original.
"""
from __future__ import annotations

import json
import random
from typing import get_args

import pytest

import ylink_data
from ylink_data.engine.stats import check_invariant
from ylink_data.text.dedup import keep as policies
from ylink_data.text.dedup.minhash import shingles

from .conftest import SAMPLES

THRESHOLD = 0.8


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _pages() -> list[dict]:
    """Each bundled evaluation page: its main text, and the lines of its header and footer."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree
    from warcio.archiveiterator import ArchiveIterator

    from ylink_data.io.charset import decode_html
    from ylink_data.text.transform.extract import extract_text

    pages = []
    with open(SAMPLES / "trafilatura-eval-pages.warc.gz", "rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type != "response":
                continue
            html, _ = decode_html(record.content_stream().read())
            main = extract_text(html).strip()
            whole = _lines(extract_plain_text(HTMLTree.parse(html), main_content=False, preserve_formatting=True,
                                              list_bullets=False, alt_texts=False))
            at = [i for i, line in enumerate(whole) if line in set(_lines(main))]
            if main and at:
                around = [line for line in whole if line not in main]
                pages.append({"main": main, "header": [x for x in whole[:at[0]] if x in around][-3:],
                              "footer": [x for x in whole[at[-1] + 1:] if x in around][:4]})
    return pages


def _jaccard(a: str, b: str) -> float:
    """The exact Jaccard of two texts' shingles, cut as the op cuts them (units by script)."""
    import pyarrow as pa

    from ylink_data.text.transform.units import unit_languages

    x, y = (set(shingles(t, u)) for t, u in zip((a, b), unit_languages("auto", pa.array([a, b], pa.large_string()))))
    return len(x & y) / len(x | y)


def _clusters(rng: random.Random) -> list[list[str]]:
    """[original, mirrors...]: a footer, a header and a footer, three sites' footers; only clusters
    where every pair reaches the threshold (so the ranking alone decides)."""
    pages = _pages()
    with_footer = [p for p in pages if p["footer"]]
    out = []
    for k, p in enumerate(q for q in pages if len(q["main"].split()) >= 150):
        sites = rng.sample([s for s in with_footer if s is not p], 3)
        lines = p["main"].splitlines()
        members = ([p["main"], "\n".join(lines + sites[0]["footer"])],  # one shape a page: clusters apart
                   [p["main"], "\n".join(sites[1]["header"] + lines + sites[1]["footer"])],
                   [p["main"]] + ["\n".join(lines + s["footer"]) for s in sites])[k % 3]
        if len(set(members)) == len(members) and all(_jaccard(a, b) >= THRESHOLD
                                                     for i, a in enumerate(members) for b in members[i + 1:]):
            out.append(members)
    return out


@pytest.fixture(scope="module")
def clusters() -> list[list[str]]:
    found = _clusters(random.Random(42))
    assert len(found) >= 25
    return found


def _run(tmp_path, docs: list[str], keep: str | None, name: str):
    """The documents in two JSONL files (several tasks each); returns text -> kept, and text -> the text it copies."""
    half = len(docs) // 2
    for k, part in enumerate((docs[:half], docs[half:])):
        (tmp_path / f"{name}-{k}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in part), encoding="utf-8")
    stages = [{"minhash_dedup": {"threshold": THRESHOLD, **({"keep": keep} if keep else {})}}]
    if keep == "highest_score":
        stages.insert(0, {"quality_classifier": {}})
    out, stats = ylink_data.run({"name": name, "input": {"paths": [str(tmp_path / f"{name}-*.jsonl")], "format": "jsonl",
                                                         "split_bytes": 250_000},
                                 "output": {"path": str(tmp_path / name), "keep_rejected": True}, "stages": stages,
                                 "ray": {"execution": "processes", "num_cpus": 2}}, progress=False)
    assert check_invariant(stats) is None
    run = ylink_data.open_run(out)
    kept, rejected = run.to_arrow(), run.rejected()
    text_of = dict(zip(kept.column("id").to_pylist(), kept.column("text").to_pylist()))
    copies = {t: text_of[d] for t, d in zip(rejected.column("text").to_pylist(), rejected.column("dup_of").to_pylist())}
    score = {}
    for table in (kept, rejected):
        if "quality_score" in table.column_names:
            score.update(zip(table.column("text").to_pylist(), table.column("quality_score").to_pylist()))
    return set(kept.column("text").to_pylist()), copies, score


@pytest.mark.parametrize("keep", get_args(policies.KeepPolicy))
def test_each_policy_keeps_the_member_it_ranks_first(tmp_path, clusters, keep):
    rng = random.Random(keep)
    docs = [t for members in clusters for t in members]
    rng.shuffle(docs)  # input order: members of a cluster anywhere, in any order
    kept, copies, score = _run(tmp_path, docs, keep, "run")
    position = {t: i for i, t in enumerate(docs)}
    originals = 0
    for members in clusters:
        ordered = sorted(members, key=position.get)  # as the op sees them
        chosen = ordered[policies.choose(ordered, keep, scores=[score.get(t) for t in ordered])]
        assert chosen in kept, keep
        assert all(copies[t] == chosen for t in members if t != chosen), keep
        originals += chosen == members[0]
    if keep == "least_boilerplate":
        assert originals >= 0.9 * len(clusters)  # the clean original (measured: bench/RESULTS.md)
    if keep == "longest":
        assert originals == 0  # every mirror is longer than what it copies


def test_reported_case_keeps_the_page_without_the_share_bar(tmp_path, clusters):
    """A mirror that added a share bar: the default keeps the original, `longest` kept the copy."""
    english = next(members[0] for members in clusters if len(members[0].split()) > 200)
    chinese = ("武汉的声音：有英勇的你，才有英雄的城！新华网北京2月19日电，在抗击新冠肺炎疫情的斗争中，无数医务工作者、"
               "社区工作者和志愿者坚守岗位，用行动诠释了责任与担当。\n"
               "他们说，只要大家齐心协力，就一定能够打赢这场疫情防控的人民战争、总体战、阻击战。武汉人民的坚韧和乐观，"
               "感动了全国，也让世界看到了中国力量。\n"
               "记者在采访中了解到，许多社区通过线上团购等方式保障居民生活物资供应，志愿者们每天奔波在街头巷尾，"
               "把蔬菜、药品送到居民手中。")
    docs = [english, english + "\nShare this article…\nFacebook Twitter LinkedIn Email",
            chinese, chinese + "\n分享到微信\n分享到微博\n责任编辑：焦鹏"]
    for keep, expected in ((None, {english, chinese}), ("longest", {docs[1], docs[3]})):
        kept, copies, _ = _run(tmp_path, docs, keep, f"reported-{keep}")
        assert kept == expected, keep
