"""Benchmark: is `ylink quality train` below plain fastText? Held-out ROC AUC of the trainer's
defaults against plain fastText with its usual settings, over repeated stratified splits of real
labelled data, paired split by split.

    .venv/bin/python bench/bench_quality_cv.py [--repeats 10] [--sets en-web zh-news zh-hand] [--ablations]
    .venv/bin/python bench/bench_quality_cv.py --sets zh-news-joined zh-news-paragraphs   # layout made alike

(`zh-hand` is not run by default: with 6 good and 7 bad pages held out per split its AUCs are noise.)

Sides, trained on the same documents and scored on the same held-out ones in every split:
- **ylink default**: what `ylink quality train` does with its defaults (read from `train_classifier`'s
  signature): the text preprocessed by `preprocess.model_lines` (English: lowercased words and
  punctuation of the first 500 characters; Chinese: rjieba words of the first 150), the smaller class
  oversampled, `quality.train.fit` (dim 16, lr 0.2, minCount 2, wordNgrams 2, 10 epochs, one thread,
  product-quantized), scored by `QualityModel`.
- **plain fastText**: `fasttext.train_supervised(input, wordNgrams=2, epoch=10)`, everything else
  fastText's defaults (dim 100, lr 0.1, minCount 1, 2M buckets, 12 threads, softmax), on the raw text
  with its whitespace collapsed to single spaces (fastText reads one line per example), no
  balancing, no quantization; the score is P(`__label__hq`).
- `--ablations`: ylink's training without quantization, and also with dim 100 (what each costs);
  where the texts are longer than ylink's prefix, ylink reading the whole text (`prefix_chars` 0)
  and plain fastText reading only ylink's prefix (how much of a difference is the length read).

Splits: for each repeat, every class's documents are shuffled with the repeat's seed and 20% of them
held out (stratified by class; all lines or pieces of a document on one side). Statistics on the
per-split AUC differences (ylink minus plain): mean and sd, the sign test (two-sided binomial over
the splits that differ), the paired t-test, and the paired t-test corrected for the overlap of
repeated random splits (Nadeau and Bengio 2003: variance times 1/n + n_test/n_train), which is the
one to trust.

Data (../shared/data, read in place; see each folder's SOURCE.txt):
- `en-web`: human line-level labels of real web pages: for the 167 English pages of the trafilatura
  evaluation set (`lang_by_file.json`), the snippets its authors marked as main text that must be
  extracted (good, 493) and as boilerplate that must not be (bad, 499), grouped by page.
- `zh-news`: the default Chinese model's training data (`ylink_data/assets/models/train_defaults.py`):
  THUCNews articles (good) against ChineseWebText, CC-MAIN-2020-34 and trafilatura boilerplate spam
  pages (bad), cut into ~1,500-character pieces as the default model is trained. The news articles
  are stored one per line without line breaks; the spam pages have them.
- `zh-news-joined` / `zh-news-paragraphs`: zh-news with the two sides' layout made alike, to see what
  plain fastText's whitespace tokens learn from it: every line break of every piece removed, or a
  line break after every sentence of every piece (as a web page's paragraphs).
- `zh-hand`: ChineseWebText pages labelled by hand: the `clean` (22) against the `spam` (27) pages
  of tests/data/chinesewebtext_cleared1_labels.json, plus the authors' 10 clean and 10 dirty
  examples.
"""
from __future__ import annotations

import argparse
import datetime as dt
import inspect
import json
import platform
import re
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "ylink_data" / "assets"))

from ylink_data.quality import QualityModel, model_lines, train_classifier  # noqa: E402
from ylink_data.quality.model import POSITIVE  # noqa: E402
from ylink_data.quality.train import fit, read_examples, roc_auc  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
TEST_FRACTION = 0.2
Docs = dict[str, list[str]]  # document (group) -> its lines or pieces


def en_web() -> tuple[Docs, Docs]:
    root = SHARED / "trafilatura_eval"
    langs = json.loads((root / "lang_by_file.json").read_text())
    pages = json.loads((root / "tests" / "evaldata.json").read_text())
    good: Docs = {}
    bad: Docs = {}
    for page in pages.values():
        if langs.get(page["file"], ["?"])[0] != "en":
            continue
        for side, key in ((good, "with"), (bad, "without")):
            snippets = [" ".join(s.split()) for s in page.get(key) or [] if s.strip()]
            if snippets:
                side.setdefault(page["file"], []).extend(snippets)
    return good, bad


def zh_news(tmp: Path) -> tuple[Docs, Docs]:
    from models.train_defaults import PARAMS, build_zh

    src = build_zh(SHARED, tmp)
    sides = []
    for paths in (src["pos_thucnews"], src["neg_cleared"] + src["neg_cc2020"] + src["neg_traf"]):
        docs: Docs = {}
        for e in read_examples(paths, chunk_chars=PARAMS["chunk_chars"]):
            docs.setdefault(e.group, []).append(e.text)
        sides.append(docs)
    return sides[0], sides[1]


_LINE_BREAKS = re.compile(r"\s*\n\s*")
_SENTENCE_END = re.compile(r"[。！？][”」]?")


def with_layout(docs: Docs, how: str) -> Docs:
    """`joined`: every line break removed; `paragraphs`: a line break after every sentence."""
    if how == "paragraphs":
        return {k: [_SENTENCE_END.sub(lambda m: m.group() + "\n", t) for t in ts] for k, ts in docs.items()}
    return {k: [_LINE_BREAKS.sub("", t) for t in ts] for k, ts in docs.items()}


def zh_hand() -> tuple[Docs, Docs]:
    labels = json.loads((REPO / "tests" / "data" / "chinesewebtext_cleared1_labels.json").read_text())["labels"]
    folder = SHARED / "zh_chinesewebtext_quality"
    good: Docs = {}
    bad: Docs = {}
    for row in (folder / "2021-43" / "cleared1.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(row)
        side = {"clean": good, "spam": bad}.get(labels.get(doc["url"], ""))
        if side is not None:
            side[doc["url"]] = [doc["raw_content"]]
    for name, side in (("clean", good), ("dirty", bad)):
        for i, row in enumerate((folder / "fasttext" / "data" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()):
            side[f"{name}-{i}"] = [json.loads(row)["text"]]
    return good, bad


def splits(good: Docs, bad: Docs, repeats: int):
    """(train good, train bad, held-out good, held-out bad) texts, per repeat."""
    for r in range(repeats):
        rng = np.random.default_rng(r)
        sides = []
        for docs in (good, bad):
            keys = sorted(docs)
            held = {keys[i] for i in rng.permutation(len(keys))[:max(1, round(TEST_FRACTION * len(keys)))]}
            sides.append(([t for k in keys if k not in held for t in docs[k]],
                          [t for k in keys if k in held for t in docs[k]]))
        (train_good, test_good), (train_bad, test_bad) = sides
        yield train_good, train_bad, test_good, test_bad


def trainer_defaults() -> dict:
    """`ylink quality train`'s defaults, where they live: `train_classifier`'s signature."""
    names = set(inspect.signature(fit).parameters) - {"pos_lines", "neg_lines", "rng", "workdir", "progress"}
    return {k: p.default for k, p in inspect.signature(train_classifier).parameters.items() if k in names}


Side = Callable[[list[str], list[str], list[str], str, int, str], np.ndarray]


def ylink_side(prefix_chars: int | None = None, **changes) -> Side:
    def run(good: list[str], bad: list[str], held: list[str], lang: str, seed: int, tmp: str) -> np.ndarray:
        params = trainer_defaults() | {"seed": seed} | changes
        model, _, _ = fit(model_lines(good, lang, prefix_chars), model_lines(bad, lang, prefix_chars),
                          np.random.default_rng(seed), tmp, **params)
        return QualityModel(model).scores_of_lines(model_lines(held, lang, prefix_chars))
    return run


def plain_side(prefix_chars: int | None = None) -> Side:
    def line(text: str) -> str:
        return " ".join((text[:prefix_chars] if prefix_chars else text).split())

    def run(good: list[str], bad: list[str], held: list[str], lang: str, seed: int, tmp: str) -> np.ndarray:
        import fasttext

        rows = [f"__label__hq {line(t)}" for t in good] + [f"__label__lq {line(t)}" for t in bad]
        rows = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
        with open(f"{tmp}/plain.txt", "w", encoding="utf-8") as f:
            f.writelines(r + "\n" for r in rows)
        model = fasttext.train_supervised(input=f"{tmp}/plain.txt", wordNgrams=2, epoch=10, seed=seed, verbose=0)
        labels, probs = model.predict([line(t) for t in held], k=-1)
        return np.array([dict(zip(ls, ps)).get(POSITIVE, 0.0) for ls, ps in zip(labels, probs)])
    return run


def compare(name: str, good: Docs, bad: Docs, lang: str, sides: dict[str, Side], repeats: int) -> None:
    n_good, n_bad = sum(map(len, good.values())), sum(map(len, bad.values()))
    print(f"\n### {name} ({lang}): {len(good):,} good documents ({n_good:,} lines or pieces), "
          f"{len(bad):,} bad ({n_bad:,}); {repeats} splits, {TEST_FRACTION:.0%} of each class's documents held out",
          flush=True)
    aucs: dict[str, list[float]] = {side: [] for side in sides}
    held_bad = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ylink-quality-cv-") as tmp:
        for r, (train_good, train_bad, test_good, test_bad) in enumerate(splits(good, bad, repeats)):
            truth = np.r_[np.ones(len(test_good), bool), np.zeros(len(test_bad), bool)]
            for side, run in sides.items():
                aucs[side].append(roc_auc(truth, run(train_good, train_bad, test_good + test_bad, lang, 1 + r, tmp)))
            held_bad.append(len(test_bad))
            print(f"  split {r}: " + ", ".join(f"{s} {a[-1]:.4f}" for s, a in aucs.items())
                  + f" ({len(test_good)} good / {len(test_bad)} bad held out; {time.perf_counter() - started:.0f} s)",
                  flush=True)
    base = np.array(aucs["plain fastText"])
    print("\n| side | ROC AUC mean ± sd | vs plain: mean diff ± sd | wins | sign test p | paired t p "
          "| corrected t p |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    ratio = TEST_FRACTION / (1 - TEST_FRACTION)
    for side, values in aucs.items():
        v = np.array(values)
        if side == "plain fastText":
            print(f"| {side} | {v.mean():.4f} ± {v.std(ddof=1):.4f} | | | | | |")
            continue
        d = v - base
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        sign_p = stats.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
        t_p = stats.ttest_rel(v, base).pvalue
        sd = d.std(ddof=1)
        corrected_t = d.mean() / np.sqrt((1 / len(d) + ratio) * sd ** 2) if sd > 0 else 0.0
        corrected_p = 2 * stats.t.sf(abs(corrected_t), len(d) - 1)
        print(f"| {side} | {v.mean():.4f} ± {v.std(ddof=1):.4f} | {d.mean():+.4f} ± {sd:.4f} | {wins}/{len(d)} "
              f"| {sign_p:.3g} | {t_p:.3g} | {corrected_p:.3g} |")
    print(f"(held-out bad lines or pieces per split: {min(held_bad)}-{max(held_bad)})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--sets", nargs="+", default=["en-web", "zh-news"],
                    choices=["en-web", "zh-news", "zh-news-joined", "zh-news-paragraphs", "zh-hand"])
    ap.add_argument("--ablations", action="store_true", help="also each side at the other's reading length")
    args = ap.parse_args()
    print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, Python "
          f"{platform.python_version()}, fasttext-numpy2 {version('fasttext-numpy2')}; "
          f"ylink defaults: {trainer_defaults()}")
    from ylink_data.quality.preprocess import PREFIX_CHARS

    with tempfile.TemporaryDirectory(prefix="ylink-quality-cv-data-") as tmp:
        data = {"en-web": (en_web, "en"), "zh-news": (lambda: zh_news(Path(tmp)), "zh"), "zh-hand": (zh_hand, "zh")}
        for how in ("joined", "paragraphs"):
            data[f"zh-news-{how}"] = (lambda how=how: tuple(with_layout(d, how) for d in zh_news(Path(tmp))), "zh")
        for name in args.sets:
            load, lang = data[name]
            good, bad = load()
            sides = {"ylink default": ylink_side(), "plain fastText": plain_side()}
            if args.ablations:
                sides["ylink, not quantized"] = ylink_side(quantize=False)
                sides["ylink, not quantized, dim 100"] = ylink_side(quantize=False, dim=100)
                if max(len(t) for docs in (good, bad) for ts in docs.values() for t in ts) > PREFIX_CHARS[lang]:
                    sides["ylink, whole text"] = ylink_side(0)
                    sides[f"plain fastText, first {PREFIX_CHARS[lang]} chars"] = plain_side(PREFIX_CHARS[lang])
            compare(name, good, bad, lang, sides, args.repeats)


if __name__ == "__main__":
    main()
