"""`ylink quality train`: a fastText quality classifier from good and bad example files."""
from __future__ import annotations

import argparse
import time

from ..errors import InputError, YlinkError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quality", help="quality classifiers (train)")
    qsub = p.add_subparsers(dest="quality_command", required=True, metavar="ACTION")
    t = qsub.add_parser("train", help="train a fastText classifier: good (--positive) vs bad (--negative) "
                                      "examples; writes MODEL.bin and MODEL.metrics.json")
    t.add_argument("--positive", nargs="+", required=True, metavar="PATH",
                   help="good examples: files, globs or URLs in any input format (JSONL, Parquet, text, WARC...)")
    t.add_argument("--negative", nargs="+", required=True, metavar="PATH", help="bad examples, likewise")
    t.add_argument("--output", required=True, metavar="MODEL.bin", help="model file to write (path or URL)")
    # Training defaults live in train_classifier (one place); the CLI passes only what was given.
    t.add_argument("--lang", help="en, zh (jieba words) or auto (guessed per document; the default)")
    t.add_argument("--seed", type=int, help="seed of the split, balancing and training (default 1)")
    t.add_argument("--epoch", type=int)
    t.add_argument("--lr", type=float)
    t.add_argument("--word-ngrams", dest="wordNgrams", type=int, help="2 or more (default 2)")
    t.add_argument("--dim", type=int)
    t.add_argument("--bucket", type=int)
    t.add_argument("--min-count", dest="minCount", type=int)
    t.add_argument("--test-fraction", type=float, help="documents held out for evaluation (default 0.1)")
    t.add_argument("--max-docs-per-class", type=int)
    t.add_argument("--chunk-chars", type=int, help="cut documents into pieces of about this size")
    t.add_argument("--balance", dest="balance_classes", choices=["oversample", "downsample", "none"])
    t.add_argument("--no-quantize", dest="quantize", action="store_false", default=None,
                   help="keep the full-size model")
    t.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from ..quality.train import metrics_path, train_classifier

    if args.wordNgrams is not None and args.wordNgrams < 2:
        raise InputError("--word-ngrams must be 2 or more (one-thread fastText training needs n-gram buckets)")
    if args.test_fraction is not None and not 0 < args.test_fraction < 1:
        raise InputError(f"--test-fraction must be between 0 and 1, not {args.test_fraction}")
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)
    started = time.perf_counter()

    def say(message: str) -> None:
        console.print(f"[{time.perf_counter() - started:6.1f}s] {message}", highlight=False)

    params = {k: getattr(args, k) for k in ("lang", "seed", "epoch", "lr", "wordNgrams", "dim", "bucket",
                                            "minCount", "test_fraction", "max_docs_per_class", "chunk_chars",
                                            "balance_classes", "quantize") if getattr(args, k) is not None}
    try:
        result = train_classifier(args.positive, args.negative, args.output, progress=say, **params)
    except RuntimeError as exc:  # fastText's own failures (NaN), already worded for the user
        raise YlinkError(str(exc)) from None
    h = result["heldout"]
    print(f"{args.output}: {result['model_bytes']:,} bytes; held out ROC AUC {h['roc_auc']:.4f}, "
          f"precision {h['precision']:.3f}, recall {h['recall']:.3f}, F1 {h['f1']:.3f} "
          f"({result['counts']['test_positive']:,} good, {result['counts']['test_negative']:,} bad); "
          f"metrics in {metrics_path(args.output)}")
    return 0
