"""`ylink quality train`: a fastText quality classifier from good and bad example files, or from the
annotations of a run (`--from RUN --label-column judge_score`)."""
from __future__ import annotations

import argparse
import time

from ylink_data.core.errors import InputError, YlinkError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quality", help="quality classifiers (train)")
    qsub = p.add_subparsers(dest="quality_command", required=True, metavar="ACTION")
    t = qsub.add_parser("train", help="train a fastText classifier: good (--positive) vs bad (--negative) "
                                      "examples, or a run's annotations (--from RUN --label-column COLUMN); "
                                      "writes MODEL.bin and MODEL.metrics.json")
    t.add_argument("--positive", nargs="+", metavar="PATH",
                   help="good examples: files, globs or URLs in any input format (JSONL, Parquet, text, WARC...)")
    t.add_argument("--negative", nargs="+", metavar="PATH", help="bad examples, likewise")
    t.add_argument("--from", dest="run", metavar="RUN",
                   help="instead of --positive/--negative: a finished run whose documents carry annotations "
                        "(e.g. a judge op's judge_score)")
    t.add_argument("--label-column", metavar="COLUMN", help="with --from: the annotation column (default judge_score)")
    t.add_argument("--threshold", type=float, help="with --from: a good/bad classifier, good at or above this "
                                                    "value; without it, one class per score (a graded model "
                                                    "whose score is the expected annotation)")
    t.add_argument("--output", required=True, metavar="MODEL.bin", help="model file to write (path or URL)")
    t.add_argument("--autotune-seconds", dest="autotune_seconds", type=float, metavar="S",
                   help="budget of the search for this data's training parameters (default 300; 0: the fixed "
                        "defaults, or the ones given here)")
    t.add_argument("--structure", action="store_true", default=None,
                   help="read the documents' shape too (length, lines, closing marks); the search tries it anyway")
    # Training defaults live in train_classifier (one place); the CLI passes only what was given.
    t.add_argument("--lang", help="en, zh (jieba words) or auto (guessed per document; the default)")
    t.add_argument("--seed", type=int, help="seed of the split, balancing and training (default 1)")
    t.add_argument("--epoch", type=int)
    t.add_argument("--lr", type=float)
    t.add_argument("--word-ngrams", dest="wordNgrams", type=int, help="2 or more (default 2)")
    t.add_argument("--dim", type=int)
    t.add_argument("--bucket", type=int)
    t.add_argument("--min-count", dest="minCount", type=int)
    t.add_argument("--test-fraction", type=float, help="documents held out for evaluation (default 0.1; 0.2 with --from)")
    t.add_argument("--max-docs-per-class", type=int)
    t.add_argument("--chunk-chars", type=int, help="cut documents into pieces of about this size")
    t.add_argument("--balance", dest="balance_classes", choices=["oversample", "downsample", "none"])
    t.add_argument("--no-quantize", dest="quantize", action="store_false", default=None,
                   help="keep the full-size model")
    t.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from ylink_data.text.quality.train import metrics_path
    from ylink_data.train.quality import train_classifier, train_from_run

    if args.run is None and (not args.positive or not args.negative):
        raise InputError("give --positive and --negative example files, or --from RUN with its --label-column")
    if args.run is not None and (args.positive or args.negative):
        raise InputError("--from RUN trains on the run's annotations: leave out --positive and --negative")
    if args.run is None and (args.label_column or args.threshold is not None):
        raise InputError("--label-column and --threshold go with --from RUN")
    if args.run is not None and (args.max_docs_per_class is not None or args.chunk_chars is not None):
        raise InputError("--max-docs-per-class and --chunk-chars go with --positive/--negative, not --from RUN")
    if args.autotune_seconds is not None and args.autotune_seconds < 0:
        raise InputError(f"--autotune-seconds must be 0 or more, not {args.autotune_seconds:g}")
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
                                            "balance_classes", "quantize", "autotune_seconds", "structure")
              if getattr(args, k) is not None}
    try:
        if args.run is not None:
            result = train_from_run(args.run, args.output, label_column=args.label_column or "judge_score",
                                    threshold=args.threshold, progress=say, **params)
        else:
            result = train_classifier(args.positive, args.negative, args.output, progress=say, **params)
    except RuntimeError as exc:  # fastText's own failures (NaN), already worded for the user
        raise YlinkError(str(exc)) from None
    h = result["heldout"]
    held = sum(v for k, v in result["counts"].items() if k.startswith("test_"))
    agreement = f", Spearman {h['spearman']:.4f} with the annotations" if "spearman" in h else ""
    tuned = result["autotune"]
    choice = ("fixed defaults" if tuned.get("chosen") == "defaults" else
              "chosen: " + ", ".join(f"{k} {v}" for k, v in tuned["params"].items()))
    print(f"{args.output}: {result['model_bytes']:,} bytes ({choice}); held out ({held:,} pieces): ROC AUC "
          f"{h['roc_auc']:.4f}, precision {h['precision']:.3f}, recall {h['recall']:.3f}, F1 {h['f1']:.3f} "
          f"at {h['threshold']:g}{agreement}; metrics in {metrics_path(args.output)}")
    return 0
