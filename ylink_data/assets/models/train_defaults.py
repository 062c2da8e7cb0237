"""Retrain the default quality classifiers `quality-en.bin` and `quality-zh.bin` (in this folder) from
the real data in ../shared/data, deterministically (same data, same seed: the same model bytes).

    .venv/bin/python ylink_data/assets/models/train_defaults.py [--shared ../shared/data] [--out FOLDER] [--only en|zh]

What it does (README.md here says why):
1. Builds the training corpora as JSONL in a temporary folder:
   - en good: Reuters-21578 (all 10,788 articles) and the 13 Gutenberg books (cut into ~1.5 KB pieces);
   - en bad: the boilerplate of real English web pages: the text of the trafilatura evaluation pages
     (language `en` in lang_by_file.json) and of dolma's wget pages that is NOT in the page's main
     text (menus, footers, share and cookie lines, related links), one document per page;
   - zh good: the 1,000 THUCNews articles;
   - zh bad: the 100 ChineseWebText CC-MAIN-2022-21 documents (mostly gambling/SEO spam), the
     whole text of the Chinese pages of the CC-MAIN-2020-34 excerpt (SEO spam) and the boilerplate
     of the 5 Chinese trafilatura pages.
2. Trains each with `train_classifier` (held-out metrics in `quality-<lang>.metrics.json`); the
   model reads what `ylink_data.text.quality.preprocess` gives it: English words and punctuation of the
   first 500 characters, Chinese (rjieba) words of the first 150.
3. Cross-source checks on data the model never saw (`quality-<lang>.checks.json`):
   en: web main text vs boilerplate of held-out pages (every 5th English trafilatura page is kept
   out of training), and a model trained without Gutenberg and dolma scored on them;
   zh: ChineseWebText's own 10 clean vs 10 dirty labelled examples, and a model trained without
   the CC-MAIN-2020-34 pages scored on them against the clean examples.
"""
from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path.insert(0, str(REPO))

from ylink_data.io.charset import decode_html  # noqa: E402
from ylink_data.text.quality import QualityModel
from ylink_data.train.quality import train_classifier  # noqa: E402
from ylink_data.text.quality.preprocess import looks_chinese  # noqa: E402
from ylink_data.text.quality.train import chunk, roc_auc  # noqa: E402
from ylink_data.text.transform.extract import extract_text  # noqa: E402

SEED = 20261129
# Training parameters of both models (chosen with `bench/bench_quality.py --sweep`: held-out and
# cross-source AUC against docs/s per core; see README.md here and bench/RESULTS.md). dim 16: dim 32
# scored no better and predicts slower; quantized with one code per row (dsub 16) and no pruning
# (cutoff 0): pruning to 100,000 rows lost held-out AUC and made predicting slower.
PARAMS = dict(seed=SEED, epoch=10, lr=0.2, wordNgrams=2, dim=16, bucket=1_000_000, minCount=2, autotune_seconds=0,
              test_fraction=0.1, chunk_chars=1500, balance_classes="oversample", quantize=True, cutoff=0, dsub=16)


def write_jsonl(path: Path, docs: list[dict]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    return str(path)


def boilerplate(html: str) -> tuple[str, str]:
    """(main text, boilerplate): the page's main text by the default extractor, and the lines of the
    page's whole text (Resiliparse, no main-content detection) that are not part of it."""
    from resiliparse.extract.html2text import extract_plain_text

    main = extract_text(html)
    whole = extract_plain_text(html, main_content=False, links=False, alt_texts=False)
    main_flat = " ".join(main.split())
    rest = []
    for line in whole.splitlines():
        flat = " ".join(line.split())
        if len(flat) >= 2 and flat not in main_flat:
            rest.append(flat)
    return main, "\n".join(rest)


def warc_pages(pattern: str) -> list[tuple[str, str]]:
    """(url, decoded HTML) of the HTML response records of WARC files."""
    from warcio.archiveiterator import ArchiveIterator

    pages = []
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type != "response" or not rec.http_headers:
                    continue
                ctype = rec.http_headers.get_header("Content-Type") or ""
                body = rec.content_stream().read()
                if body and ("html" in ctype.lower() or body.lstrip()[:20].lower().startswith((b"<!doctype", b"<html"))):
                    pages.append((rec.rec_headers.get_header("WARC-Target-URI"), decode_html(body, ctype)[0]))
    return pages


def trafilatura_pages(shared: Path, lang: str) -> list[tuple[str, str]]:
    root = shared / "trafilatura_eval"
    langs = json.loads((root / "lang_by_file.json").read_text())
    out = []
    for name in sorted(n for n, codes in langs.items() if codes and codes[0] == lang):
        path = root / "tests" / "eval" / name
        if not path.exists():
            path = root / "tests" / "cache" / name
        out.append((name, decode_html(path.read_bytes())[0]))
    return out


def build_en(shared: Path, tmp: Path) -> dict[str, list[str]]:
    traf = trafilatura_pages(shared, "en")
    train_bp, held_main, held_bp = [], [], []
    for i, (name, html) in enumerate(traf):
        main, bp = boilerplate(html)
        if i % 5 == 4:  # held out for the web check
            if main.strip():
                held_main.append({"text": main, "page": name})
            if bp.strip():
                held_bp.append({"text": bp, "page": name})
        elif bp.strip():
            train_bp.append({"text": bp, "page": name})
    dolma = [{"text": bp, "url": url} for url, html in
             warc_pages(str(shared / "cc_samples/dolma/tests/data/warc/*.warc.gz")) for bp in [boilerplate(html)[1]]
             if bp.strip()]
    gutenberg = sorted(glob.glob(str(shared / "en_gutenberg_nltk_raw/*.txt")))
    return {
        "pos_reuters": [str(shared / "en_reuters21578_nltk/reuters21578_apte.jsonl.gz")],
        "pos_gutenberg": gutenberg,
        "neg_traf": [write_jsonl(tmp / "en_neg_trafilatura_boilerplate.jsonl", train_bp)],
        "neg_dolma": [write_jsonl(tmp / "en_neg_dolma_boilerplate.jsonl", dolma)],
        "check_main": [write_jsonl(tmp / "en_check_main.jsonl", held_main)],
        "check_bp": [write_jsonl(tmp / "en_check_boilerplate.jsonl", held_bp)],
    }


def build_zh(shared: Path, tmp: Path) -> dict[str, list[str]]:
    thuc = []
    with open(shared / "zh_thucnews_cnews/cnews.val.txt", encoding="utf-8") as f:
        for line in f:
            category, _, text = line.rstrip("\n").partition("\t")
            thuc.append({"text": text, "category": category})
    cc = [{"text": text, "url": url} for url, html in
          warc_pages(str(shared / "cc_samples/resiliparse_CC-MAIN-2020-34/tests/data/warcfile.warc.gz"))
          for text in [whole_text(html)] if looks_chinese(text) and len(text) >= 100]
    traf_bp = [{"text": bp, "page": name} for name, html in trafilatura_pages(shared, "zh")
               for bp in [boilerplate(html)[1]] if bp.strip()]
    q = shared / "zh_chinesewebtext_quality"
    return {
        "pos_thucnews": [write_jsonl(tmp / "zh_pos_thucnews.jsonl", thuc)],
        "neg_cleared": [str(q / "2021-43/cleared1.jsonl")],
        "neg_cc2020": [write_jsonl(tmp / "zh_neg_cc2020_34.jsonl", cc)],
        "neg_traf": [write_jsonl(tmp / "zh_neg_trafilatura_boilerplate.jsonl", traf_bp)],
        "check_clean": [str(q / "fasttext/data/clean.jsonl")],
        "check_dirty": [str(q / "fasttext/data/dirty.jsonl")],
    }


def whole_text(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=False, links=False, alt_texts=False)


def texts(paths: list[str], chunk_chars: int | None = None) -> list[str]:
    out = []
    for p in paths:
        opener = gzip.open if p.endswith(".gz") else open
        if p.endswith((".jsonl", ".jsonl.gz")):
            with opener(p, "rt", encoding="utf-8") as f:
                docs = [json.loads(line) for line in f if line.strip()]
            items = [d.get("text") or d.get("raw_content") or "" for d in docs]
        else:
            items = [Path(p).read_text(encoding="utf-8", errors="replace")]
        for t in items:
            out += chunk(t, chunk_chars) if chunk_chars else [t]
    return out


def pair_auc(model: QualityModel, good: list[str], bad: list[str], lang: str) -> dict:
    s_good, s_bad = model.scores(good, lang), model.scores(bad, lang)
    labels = np.r_[np.ones(len(good), bool), np.zeros(len(bad), bool)]
    return {"roc_auc": round(roc_auc(labels, np.r_[s_good, s_bad]), 4), "good": len(good), "bad": len(bad),
            "mean_score_good": round(float(s_good.mean()), 4), "mean_score_bad": round(float(s_bad.mean()), 4),
            "good_above_0.5": round(float((s_good >= 0.5).mean()), 4),
            "bad_below_0.5": round(float((s_bad < 0.5).mean()), 4)}


def train_en(shared: Path, out: Path, tmp: Path) -> None:
    src = build_en(shared, tmp)
    model_path = out / "quality-en.bin"
    m = train_classifier(src["pos_reuters"] + src["pos_gutenberg"], src["neg_traf"] + src["neg_dolma"],
                         str(model_path), lang="en", progress=print, **PARAMS)
    model = QualityModel.load(str(model_path))
    check_main, check_bp = texts(src["check_main"], 1500), texts(src["check_bp"], 1500)
    checks = {"web_main_text_vs_boilerplate_heldout_pages": pair_auc(model, check_main, check_bp, "en")}
    # A model that never saw Gutenberg (good) nor dolma's pages (bad), scored on them.
    side = train_classifier(src["pos_reuters"], src["neg_traf"], str(tmp / "en-side.bin"), lang="en", **PARAMS)
    side_model = QualityModel.load(str(tmp / "en-side.bin"))
    gut, dolma = texts(src["pos_gutenberg"], 1500), texts(src["neg_dolma"], 1500)
    checks["without_gutenberg_and_dolma"] = {
        "trained_on": "Reuters vs trafilatura boilerplate", "heldout_roc_auc": side["heldout"]["roc_auc"],
        "gutenberg_vs_dolma_boilerplate": pair_auc(side_model, gut, dolma, "en"),
        "web_main_text_vs_boilerplate_heldout_pages": pair_auc(side_model, check_main, check_bp, "en")}
    (out / "quality-en.checks.json").write_text(json.dumps(checks, indent=2) + "\n")
    print(json.dumps({"heldout": m["heldout"], "checks": checks}, indent=2))


def train_zh(shared: Path, out: Path, tmp: Path) -> None:
    src = build_zh(shared, tmp)
    model_path = out / "quality-zh.bin"
    m = train_classifier(src["pos_thucnews"], src["neg_cleared"] + src["neg_cc2020"] + src["neg_traf"],
                         str(model_path), lang="zh", progress=print, **PARAMS)
    model = QualityModel.load(str(model_path))
    clean, dirty = texts(src["check_clean"]), texts(src["check_dirty"])
    checks = {"chinesewebtext_clean_vs_dirty": pair_auc(model, clean, dirty, "zh")}
    side = train_classifier(src["pos_thucnews"], src["neg_cleared"] + src["neg_traf"], str(tmp / "zh-side.bin"),
                            lang="zh", **PARAMS)
    side_model = QualityModel.load(str(tmp / "zh-side.bin"))
    checks["without_cc2020_34"] = {
        "trained_on": "THUCNews vs ChineseWebText cleared1 + trafilatura zh boilerplate",
        "heldout_roc_auc": side["heldout"]["roc_auc"],
        "chinesewebtext_clean_vs_cc2020_34_spam_pages": pair_auc(side_model, clean, texts(src["neg_cc2020"]), "zh"),
        "chinesewebtext_clean_vs_dirty": pair_auc(side_model, clean, dirty, "zh")}
    (out / "quality-zh.checks.json").write_text(json.dumps(checks, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({"heldout": m["heldout"], "checks": checks}, indent=2, ensure_ascii=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(HERE))
    ap.add_argument("--only", choices=["en", "zh"])
    args = ap.parse_args()
    shared, out = Path(args.shared), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ylink-quality-defaults-") as tmp:
        if args.only in (None, "en"):
            os.makedirs(f"{tmp}/en", exist_ok=True)
            train_en(shared, out, Path(f"{tmp}/en"))
        if args.only in (None, "zh"):
            os.makedirs(f"{tmp}/zh", exist_ok=True)
            train_zh(shared, out, Path(f"{tmp}/zh"))


if __name__ == "__main__":
    main()
