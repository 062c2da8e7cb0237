"""Benchmark: which copy a near-duplicate cluster keeps, per `keep` policy, on real pages mirrored as
mirror sites do (issue 42 point 4).

    .venv/bin/python bench/bench_keep.py [--seed 0] [--zh-articles 300] [--threshold 0.8]

**Originals.** The main text (`extract`'s default extractor) of trafilatura's 990 evaluation pages
(../shared/data/trafilatura_eval; de, en, es, fr, pl, zh, ...), those of at least 100 words; and 300
THUCNews articles (Chinese news, research-only, read in place).

**Boilerplate, from real pages.** A page's boilerplate lines are the lines of its whole rendered text
(Resiliparse, `main_content=False`) that are not in its extracted main text: the lines before the
article are its header, those after it its footer ("Posted by ... at 5:11 AM", "Email ThisBlogThis!
Share to Twitter", "责任编辑：焦鹏", "【纠错】", navigation bars). A mirror wraps an article in
another site's template, and what leaks into its extracted text are the lines next to the article:
the first 1-5 lines of another page's footer, the last 1-3 of its header. Templates come from pages
of the same language where there are any (Chinese: the seven Chinese and Japanese pages).
Nothing here knows the rule `least_boilerplate` counts by (C4's line rules).

**Clusters** (each original in every shape, the members in a random order): `footer` (the original
and one mirror with a footer), `3 sites` (three mirrors, footers of three sites), `1 network` (two
mirrors with the same footer), `header+footer`, `excerpt` (a mirror that cut the last fifth of the
article's lines and added a footer), `restyled` (a mirror that lost the article's own lines without
terminal punctuation, its subheadings, and added a footer; only articles that have such lines). A
cluster counts only when every mirror's exact Jaccard (the op's shingles) with the original reaches
`--threshold`, as `minhash_dedup` would find it.

**Policies** (`ylink_data.text.dedup.keep.choose`, the member the op's ranking puts first):
`least_boilerplate`, `longest`, `first`, `highest_score` (the bundled default quality models,
`quality_score`), `central` (the highest mean Jaccard to the others). The score is the share of
clusters where the clean original is kept.

**Natural clusters** (no labels): `near_duplicates` clusters of Reuters-21578 (reprinted and corrected
wire stories) and of the bundled and shared crawl samples. Per policy: the share of the cluster's
shingles the kept member holds (how complete it is), and its boilerplate lines above the cluster's
fewest. Reuters clusters where one member's headline says "CORRECTED" are labelled: it should stay.
"""
from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import platform
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from ylink_data.text.dedup import keep as keep_policies  # noqa: E402
from ylink_data.text.dedup.minhash import shingle_hashes  # noqa: E402
from ylink_data.text.transform.lines import ends_sentence  # noqa: E402

SHARED = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))
TRAF = SHARED / "trafilatura_eval" / "tests"
POLICIES = keep_policies.MEASURED
SHAPES = ("footer", "3 sites", "1 network", "header+footer", "excerpt", "restyled")


# ----------------------------------------------------------------------------- pages and templates

def _page_path(name: str) -> Path:
    return TRAF / "eval" / name if (TRAF / "eval" / name).exists() else TRAF / "cache" / name


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def load_pages() -> list[dict]:
    """Each evaluation page: its language, main text, and boilerplate header and footer lines."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    from ylink_data.io.charset import decode_html
    from ylink_data.text.transform.extract import extract_text

    langs = json.loads((SHARED / "trafilatura_eval" / "lang_by_file.json").read_text())
    files = sorted({v["file"] for v in json.loads((TRAF / "evaldata.json").read_text()).values()})
    pages = []
    for name in files:
        html, _ = decode_html(_page_path(name).read_bytes())
        main = extract_text(html)
        whole = _lines(extract_plain_text(HTMLTree.parse(html), main_content=False, preserve_formatting=True,
                                          list_bullets=False, alt_texts=False))
        in_main = set(_lines(main))
        at = [i for i, line in enumerate(whole) if line in in_main]
        if not at or not main.strip():
            continue
        def boiler(lines: list[str]) -> list[str]:
            return [line for line in lines if line not in in_main and line not in main and len(line) <= 300]
        lang = (langs.get(name) or ["?"])[0]
        pages.append({"file": name, "lang": "zh" if lang in ("zh", "ja") else lang, "main": main.strip(),
                      "header": boiler(whole[:at[0]]), "footer": boiler(whole[at[-1] + 1:])})
    return pages


def thucnews(n: int) -> list[str]:
    out = []
    with open(SHARED / "zh_thucnews_cnews" / "cnews.val.txt", encoding="utf-8") as f:
        for line in f:
            text = line.split("\t", 1)[1].strip()
            if len(text) >= 300:
                out.append(text)
            if len(out) >= n:
                break
    return out


# ----------------------------------------------------------------------------- clusters

class Mirrors:
    """Templates by language and the mirrors made of them."""

    def __init__(self, pages: list[dict], rng: random.Random):
        self.rng = rng
        self.by_lang: dict[str, list[dict]] = defaultdict(list)
        for p in pages:
            if p["footer"]:
                self.by_lang[p["lang"]].append(p)
        self.any = [p for ps in self.by_lang.values() for p in ps]

    def sites(self, lang: str, k: int, avoid: str) -> list[dict]:
        pool = [p for p in (self.by_lang.get(lang) if len(self.by_lang.get(lang, [])) > k else self.any)
                if p["file"] != avoid]
        return self.rng.sample(pool, k)

    def footer(self, site: dict) -> list[str]:
        return site["footer"][:self.rng.randint(1, 5)]

    def header(self, site: dict) -> list[str]:
        return site["header"][-self.rng.randint(1, 3):] if site["header"] else []


def clusters(text: str, lang: str, source: str, mirrors: Mirrors) -> dict[str, list[str]]:
    """Shape -> [original, mirrors...] for one original."""
    lines = text.splitlines()
    out = {}
    a, b, c = mirrors.sites(lang, 3, source)
    out["footer"] = [text, "\n".join(lines + mirrors.footer(a))]
    out["3 sites"] = [text] + ["\n".join(lines + mirrors.footer(s)) for s in (a, b, c)]
    shared = mirrors.footer(b)
    out["1 network"] = [text, "\n".join(lines + shared), "\n".join(lines + shared)]
    out["header+footer"] = [text, "\n".join(mirrors.header(c) + lines + mirrors.footer(c))]
    if len(lines) >= 5:
        out["excerpt"] = [text, "\n".join(lines[:int(len(lines) * 0.8)] + mirrors.footer(a))]
    zh = lang == "zh"
    unpunctuated = [line for line in lines if line.strip() and not ends_sentence(line.strip(), zh)]
    if unpunctuated and len(unpunctuated) < len(lines):
        out["restyled"] = [text, "\n".join([line for line in lines if line not in unpunctuated] + mirrors.footer(b))]
    return out


def shingle_sets(texts: list[str], units: list[str]) -> list[set]:
    hashes, offsets = shingle_hashes(texts, units)
    return [set(hashes[offsets[i]:offsets[i + 1]].tolist()) for i in range(len(texts))]


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


class Scorer:
    def __init__(self):
        from ylink_data.text.quality.model import QualityModel

        models = REPO / "ylink_data" / "assets" / "models"
        self.models = {lang: QualityModel.load(str(models / f"quality-{lang}.bin")) for lang in ("en", "zh")}

    def scores(self, texts: list[str], unit: str) -> list[float]:
        return [float(s) for s in self.models["zh" if unit == "zh" else "en"].scores(texts, "zh" if unit == "zh" else "en")]


def picks(members: list[str], unit: str, scorer: Scorer) -> dict[str, int]:
    units = [unit] * len(members)
    sets = shingle_sets(members, units)
    scores = scorer.scores(members, unit)
    return {p: keep_policies.choose(members, p, units=units, scores=scores, sets=sets) for p in POLICIES}


def mirrored(args, rng: random.Random, scorer: Scorer) -> dict:
    pages = load_pages()
    mirrors = Mirrors(pages, rng)
    originals = [(p["main"], "zh" if p["lang"] == "zh" else "en", p["lang"], p["file"]) for p in pages
                 if (len(p["main"]) >= 300 if p["lang"] == "zh" else len(p["main"].split()) >= 100)]
    originals += [(t, "zh", "zh", "thucnews") for t in thucnews(args.zh_articles)]
    wins = defaultdict(lambda: defaultdict(int))  # (group, shape) -> policy -> clean original kept
    counts, skipped = defaultdict(int), defaultdict(int)
    coverage, extra = defaultdict(float), defaultdict(float)  # policy -> summed over clusters
    for text, unit, lang, source in originals:
        group = "zh" if unit == "zh" else ("en" if lang == "en" else "de" if lang == "de" else "other")
        for shape, members in clusters(text, lang, source, mirrors).items():
            sets = shingle_sets(members, [unit] * len(members))
            if min(jaccard(sets[0], s) for s in sets[1:]) < args.threshold or len(set(members)) < 2:
                skipped[shape] += 1
                continue
            order = list(range(len(members)))
            rng.shuffle(order)
            shuffled = [members[i] for i in order]
            original = order.index(0)
            union = set().union(*sets)
            lines = keep_policies.boilerplate_counts(members, [unit] * len(members))
            for policy, at in picks(shuffled, unit, scorer).items():
                wins[group, shape][policy] += at == original
                coverage[policy] += len(sets[order[at]]) / len(union)
                extra[policy] += lines[order[at]] - lines.min()
            counts[group, shape] += 1
    n = sum(counts.values())
    return {"wins": {f"{g}|{s}": dict(v) for (g, s), v in wins.items()},
            "counts": {f"{g}|{s}": n for (g, s), n in counts.items()}, "skipped": dict(skipped),
            "coverage": {p: coverage[p] / n for p in POLICIES}, "extra_boilerplate": {p: extra[p] / n for p in POLICIES},
            "templates": {lang: len(ps) for lang, ps in mirrors.by_lang.items()}}


# ----------------------------------------------------------------------------- natural clusters

def reuters() -> list[str]:
    with gzip.open(SHARED / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def crawl_texts(tmp: Path) -> list[str]:
    """The extracted text of every page of the bundled and shared crawl samples (a ylink run)."""
    import ylink_data

    paths = [str(REPO / "samples" / "crawl" / "*.warc.gz"), str(SHARED / "cc_samples" / "dolma" / "tests" / "data" / "warc" / "*.warc.gz"),
             str(SHARED / "cc_samples" / "resiliparse_CC-MAIN-2020-34" / "tests" / "data" / "*.warc.gz"),
             str(SHARED / "cc_samples" / "eugeneware_CC-MAIN-2014-35" / "test" / "fixtures" / "*.warc")]
    out, _ = ylink_data.run({"name": "keep-bench", "input": {"paths": [p for p in paths if glob.glob(p)]},
                             "output": {"path": str(tmp / "crawl")}, "stages": [{"extract": {}}]},
                            fresh=True, progress=False)
    return ylink_data.open_run(out).to_arrow().column("text").to_pylist()


def natural(args, scorer: Scorer) -> dict:
    import tempfile

    from ylink_data.text.dedup import near_duplicates
    from ylink_data.text.transform.units import unit_languages
    import pyarrow as pa

    corpora = {"reuters": reuters()}
    with tempfile.TemporaryDirectory() as tmp:
        corpora["crawl samples"] = crawl_texts(Path(tmp))
    out = {}
    for name, texts in corpora.items():
        units = unit_languages("auto", pa.array(texts, pa.large_string()))
        labels = near_duplicates(texts, threshold=args.threshold)
        groups = defaultdict(list)
        for i, label in enumerate(labels):
            groups[int(label)].append(i)
        clusters = [g for g in groups.values() if len(g) > 1 and len({texts[i] for i in g}) > 1]
        coverage, extra, n = defaultdict(float), defaultdict(float), 0
        corrected_wins, corrected = defaultdict(int), 0
        for g in clusters:
            members, unit = [texts[i] for i in g], units[g[0]]
            sets = shingle_sets(members, [unit] * len(members))
            union = set().union(*sets)
            lines = keep_policies.boilerplate_counts(members, [unit] * len(members))
            chosen = picks(members, unit, scorer)
            heads = ["CORRECTED" in (m.strip().splitlines() or [""])[0] for m in members]
            for policy, at in chosen.items():
                coverage[policy] += len(sets[at]) / len(union)
                extra[policy] += lines[at] - lines.min()
                if sum(heads) == 1:
                    corrected_wins[policy] += heads[at]
            corrected += sum(heads) == 1
            n += 1
        out[name] = {"clusters": n, "coverage": {p: coverage[p] / max(n, 1) for p in POLICIES},
                     "extra_boilerplate": {p: extra[p] / max(n, 1) for p in POLICIES},
                     "corrected": corrected, "corrected_kept": dict(corrected_wins)}
    return out


# ----------------------------------------------------------------------------- report

def table(result: dict) -> str:
    rows = ["| shape | group | clusters | " + " | ".join(POLICIES) + " |",
            "| --- | --- | ---: | " + " | ".join("---:" for _ in POLICIES) + " |"]
    totals, total = defaultdict(int), 0
    for key in sorted(result["counts"], key=lambda k: (SHAPES.index(k.split("|")[1]), k)):
        group, shape = key.split("|")
        n, wins = result["counts"][key], result["wins"][key]
        total += n
        for p in POLICIES:
            totals[p] += wins.get(p, 0)
        rows.append(f"| {shape} | {group} | {n:,} | " + " | ".join(f"{wins.get(p, 0) / n:.3f}" for p in POLICIES) + " |")
    rows.append(f"| **all** | | **{total:,}** | " + " | ".join(f"**{totals[p] / total:.3f}**" for p in POLICIES) + " |")
    rows.append("| all: share of the cluster's shingles kept | | | " + " | ".join(f"{result['coverage'][p]:.3f}" for p in POLICIES) + " |")
    rows.append("| all: boilerplate lines above the cluster's fewest | | | " + " | ".join(f"{result['extra_boilerplate'][p]:.2f}" for p in POLICIES) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--zh-articles", type=int, default=300)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--skip-natural", action="store_true")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    started = time.time()
    scorer = Scorer()
    result = mirrored(args, random.Random(args.seed), scorer)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; seed {args.seed}")
    print(f"templates per language: {result['templates']}; clusters left out (a mirror below "
          f"{args.threshold}): {result['skipped']}\n")
    print("Share of clusters where the clean original is kept:\n")
    print(table(result))
    if not args.skip_natural:
        nat = natural(args, scorer)
        result["natural"] = nat
        print("\nNatural clusters (no labels): mean share of the cluster's shingles in the kept member, and its "
              "boilerplate lines above the cluster's fewest:\n")
        print("| corpus | clusters | measure | " + " | ".join(POLICIES) + " |")
        print("| --- | ---: | --- | " + " | ".join("---:" for _ in POLICIES) + " |")
        for name, r in nat.items():
            print(f"| {name} | {r['clusters']} | coverage | " + " | ".join(f"{r['coverage'][p]:.3f}" for p in POLICIES) + " |")
            print(f"| | | extra boilerplate lines | " + " | ".join(f"{r['extra_boilerplate'][p]:.2f}" for p in POLICIES) + " |")
            if r["corrected"]:
                print(f"| | {r['corrected']} | CORRECTED kept | " + " | ".join(
                    f"{r['corrected_kept'].get(p, 0)}/{r['corrected']}" for p in POLICIES) + " |")
    print(f"\n({time.time() - started:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
