"""Benchmark: does `ylink quality train` beat plain fastText on every labelled set? Held-out ROC AUC of
the trainer (its per-data-set search, and its fixed defaults) against plain fastText with its usual
settings, over repeated stratified splits of real labelled data, paired split by split.

    .venv/bin/python bench/bench_quality_cv.py [--repeats 10] [--sets en-web de-web es-web zh-news]
        [--fasttext-autotune 30] [--ablations]
    .venv/bin/python bench/bench_quality_cv.py --sets zh-news-joined zh-news-paragraphs   # layout made alike

(`zh-hand` is not run by default: with 6 good and 7 bad pages held out per split its AUCs are noise.)

Sides, trained on the same documents and scored on the same held-out ones in every split:
- **ylink quality train**: what the command does by default (`train_split` with `train_classifier`'s
  defaults): its search (text/quality/autotune.py) chooses lr, epoch, wordNgrams, minCount and whether to
  read the documents' shape, by grouped 5-fold cross-validation on the training split, then trains.
- **ylink, --autotune-seconds 0**: the fixed defaults, as before the search: the text preprocessed by `preprocess.model_lines` (English: lowercased words and
  punctuation of the first 500 characters; Chinese: rjieba words of the first 150), the smaller class
  oversampled, `quality.train.fit` (dim 16, lr 0.2, minCount 2, wordNgrams 2, 10 epochs, one thread,
  product-quantized), scored by `QualityModel` from the saved model.
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
- `en-web`, `de-web`, `es-web` (and `fr-web`, `pl-web`, not run by default: 26 and 21 pages, 5 of
  each class held out per split): human line-level labels of real web pages: for the pages of the
  trafilatura evaluation set in that language (`lang_by_file.json`: 167 English, 699 German, 48
  Spanish), the snippets its authors marked as main text that must be extracted (good) and as
  boilerplate that must not be (bad), grouped by page. Apache-2.0 (the repository's licence).
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

from ylink_data.text.quality import QualityModel, model_lines

from ylink_data.train.quality import train_classifier  # noqa: E402
from ylink_data.text.quality.model import NEGATIVE, POSITIVE  # noqa: E402
from ylink_data.text.quality.train import AUTOTUNE_SECONDS, Example, fit, roc_auc, train_split
from ylink_data.train.quality import read_examples  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
TEST_FRACTION = 0.2
Docs = dict[str, list[str]]  # document (group) -> its lines or pieces


def web(lang: str) -> tuple[Docs, Docs]:
    """The trafilatura evaluation set's human labels on its pages in `lang`."""
    root = SHARED / "trafilatura_eval"
    langs = json.loads((root / "lang_by_file.json").read_text())
    pages = json.loads((root / "tests" / "evaldata.json").read_text())
    good: Docs = {}
    bad: Docs = {}
    for page in pages.values():
        if langs.get(page["file"], ["?"])[0] != lang:
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
    """(train good, train bad, held-out good, held-out bad) pieces as `Example`s (text and document),
    per repeat."""
    for r in range(repeats):
        rng = np.random.default_rng(r)
        sides = []
        for docs in (good, bad):
            keys = sorted(docs)
            held = {keys[i] for i in rng.permutation(len(keys))[:max(1, round(TEST_FRACTION * len(keys)))]}
            sides.append(([Example(t, k) for k in keys if k not in held for t in docs[k]],
                          [Example(t, k) for k in keys if k in held for t in docs[k]]))
        (train_good, test_good), (train_bad, test_bad) = sides
        yield train_good, train_bad, test_good, test_bad


def trainer_defaults() -> dict:
    """`ylink quality train`'s defaults, where they live: `train_classifier`'s signature."""
    return {k: p.default for k, p in inspect.signature(train_classifier).parameters.items()
            if p.default is not inspect.Parameter.empty}


# (train good, train bad, held good, held bad, language, seed, scratch folder) -> scores of held good + bad
Side = Callable[[list[Example], list[Example], list[Example], list[Example], str, int, str], np.ndarray]
CHOICES: dict[str, list[dict]] = {}  # side -> what the search chose in each split


def ylink_side(name: str, prefix_chars: int | None = None, **changes) -> Side:
    """What `ylink quality train` does (`train_split`, as train_classifier calls it after reading),
    with `changes` to its defaults; the saved model is loaded and scored as quality_classifier does."""
    def run(good, bad, test_good, test_bad, lang, seed, tmp) -> np.ndarray:
        p = trainer_defaults() | {"seed": seed} | changes
        out = f"{tmp}/ylink.bin"
        result = train_split(
            {POSITIVE: (good, test_good), NEGATIVE: (bad, test_bad)}, out, np.random.default_rng(seed),
            graded=False, threshold=None, lang=lang, prefix_chars=prefix_chars, seed=seed,
            autotune_seconds=p["autotune_seconds"],
            defaults={k: p[k] for k in ("epoch", "lr", "wordNgrams", "minCount", "structure")},
            fixed={k: p[k] for k in ("dim", "bucket", "balance_classes", "quantize", "cutoff", "dsub")},
            record={}, inputs={}, counts={}, started=time.perf_counter(), storage_options=None, say=lambda _m: None)
        CHOICES.setdefault(name, []).append(result["autotune"].get("params") or {})
        return QualityModel.load(out).scores([e.text for e in test_good + test_bad], lang, prefix_chars)
    return run


def plain_side(prefix_chars: int | None = None) -> Side:
    def line(text: str) -> str:
        return " ".join((text[:prefix_chars] if prefix_chars else text).split())

    def run(good, bad, test_good, test_bad, lang, seed, tmp) -> np.ndarray:
        import fasttext

        rows = [f"__label__hq {line(e.text)}" for e in good] + [f"__label__lq {line(e.text)}" for e in bad]
        rows = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
        with open(f"{tmp}/plain.txt", "w", encoding="utf-8") as f:
            f.writelines(r + "\n" for r in rows)
        model = fasttext.train_supervised(input=f"{tmp}/plain.txt", wordNgrams=2, epoch=10, seed=seed, verbose=0)
        labels, probs = model.predict([line(e.text) for e in test_good + test_bad], k=-1)
        return np.array([dict(zip(ls, ps)).get(POSITIVE, 0.0) for ls, ps in zip(labels, probs)])
    return run


def fasttext_autotune_side(seconds: int) -> Side:
    """fastText's own autotune in place of our search: ylink's preprocessing and balancing, a
    validation file of 20% of the training documents (grouped), `autotuneDuration` seconds,
    fastText's default metric (F1), its default threads; then, as fastText's autotune does, the
    model is retrained by it on the training file with the chosen parameters."""
    def run(good, bad, test_good, test_bad, lang, seed, tmp) -> np.ndarray:
        import fasttext

        rng = np.random.default_rng(seed)
        rows, valid = [], []
        for label, exs in ((POSITIVE, good), (NEGATIVE, bad)):
            groups = sorted({e.group for e in exs})
            held = {groups[i] for i in rng.permutation(len(groups))[:max(1, round(0.2 * len(groups)))]}
            for e, line in zip(exs, model_lines([e.text for e in exs], lang)):
                (valid if e.group in held else rows).append(f"{label} {line}")
        rows = [rows[i] for i in rng.permutation(len(rows))]
        for path, lines in ((f"{tmp}/at-train.txt", rows), (f"{tmp}/at-valid.txt", valid)):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(r + "\n" for r in lines)
        for attempt in range(3):  # its trials can end in "Encountered NaN" (seen here): another seed
            try:
                model = fasttext.train_supervised(input=f"{tmp}/at-train.txt",
                                                  autotuneValidationFile=f"{tmp}/at-valid.txt",
                                                  autotuneDuration=seconds, seed=seed + 1000 * attempt, verbose=0)
                break
            except RuntimeError as exc:
                print(f"  fastText autotune failed ({exc}); again with another seed", flush=True)
        else:
            return np.full(len(test_good) + len(test_bad), 0.5)
        return QualityModel(model).scores_of_lines(model_lines([e.text for e in test_good + test_bad], lang))
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
                aucs[side].append(roc_auc(truth, run(train_good, train_bad, test_good, test_bad, lang, 1 + r, tmp)))
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


WEB_SETS = {"en-web": "en", "de-web": "de", "es-web": "es", "fr-web": "fr", "pl-web": "pl"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--sets", nargs="+", default=["en-web", "de-web", "es-web", "zh-news"],
                    choices=[*WEB_SETS, "zh-news", "zh-news-joined", "zh-news-paragraphs", "zh-hand"])
    ap.add_argument("--autotune-seconds", type=float, default=AUTOTUNE_SECONDS,
                    help="the search's budget for the 'ylink quality train' side")
    ap.add_argument("--fasttext-autotune", type=int, metavar="SECONDS", default=0,
                    help="also fastText's own autotune in place of our search, with this duration per split")
    ap.add_argument("--ablations", action="store_true", help="also each side at the other's reading length")
    args = ap.parse_args()
    print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, Python "
          f"{platform.python_version()}, fasttext-numpy2 {version('fasttext-numpy2')}; "
          f"ylink defaults: {trainer_defaults()}")
    from ylink_data.text.quality.preprocess import PREFIX_CHARS

    with tempfile.TemporaryDirectory(prefix="ylink-quality-cv-data-") as tmp:
        data = {name: (lambda lang=lang: web(lang), lang) for name, lang in WEB_SETS.items()}
        data |= {"zh-news": (lambda: zh_news(Path(tmp)), "zh"), "zh-hand": (zh_hand, "zh")}
        for how in ("joined", "paragraphs"):
            data[f"zh-news-{how}"] = (lambda how=how: tuple(with_layout(d, how) for d in zh_news(Path(tmp))), "zh")
        for name in args.sets:
            load, lang = data[name]
            good, bad = load()
            CHOICES.clear()
            sides = {"ylink quality train": ylink_side("ylink quality train", autotune_seconds=args.autotune_seconds),
                     "ylink, --autotune-seconds 0": ylink_side("fixed", autotune_seconds=0),
                     "plain fastText": plain_side()}
            if args.fasttext_autotune:
                sides[f"ylink preprocessing, fastText autotune {args.fasttext_autotune} s"] = \
                    fasttext_autotune_side(args.fasttext_autotune)
            if args.ablations:
                sides["ylink, fixed, not quantized"] = ylink_side("x", autotune_seconds=0, quantize=False)
                sides["ylink, fixed, not quantized, dim 100"] = ylink_side("x", autotune_seconds=0, quantize=False, dim=100)
                if max(len(t) for docs in (good, bad) for ts in docs.values() for t in ts) > PREFIX_CHARS[lang]:
                    sides["ylink, fixed, whole text"] = ylink_side("x", 0, autotune_seconds=0)
                    sides[f"plain fastText, first {PREFIX_CHARS[lang]} chars"] = plain_side(PREFIX_CHARS[lang])
            compare(name, good, bad, lang, sides, args.repeats)
            for params in CHOICES.get("ylink quality train", []):
                print("  chosen:", json.dumps(params, sort_keys=True))


if __name__ == "__main__":
    main()
