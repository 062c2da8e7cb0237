"""`ylink tokenizer train`: a byte-level BPE tokenizer.json (or a Hugging Face tokenizer folder) from
run folders or any input files."""
from __future__ import annotations

import argparse
import sys
import time

from ylink_data.core.redaction import redact_url


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokenizer", help="tokenizers (train)")
    tsub = p.add_subparsers(dest="tokenizer_command", required=True, metavar="ACTION")
    t = tsub.add_parser("train", help="train a byte-level BPE (GPT-2/Qwen style, Chinese-aware pre-tokenizer) "
                                      "and write a Hugging Face tokenizer.json or tokenizer folder")
    t.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="run folders, or files, globs or URLs in any input format (JSONL, Parquet, text, WARC...)")
    t.add_argument("--vocab-size", type=int, required=True, metavar="N",
                   help="tokens in the vocabulary, special tokens included (at least 258)")
    t.add_argument("--output", required=True, metavar="PATH",
                   help="a file ending in .json, or a folder (path or URL): the folder gets tokenizer.json and the "
                        "tokenizer_config.json that declares its end-of-document and padding tokens, which "
                        "transformers' AutoTokenizer and Megatron-LM (--tokenizer-model FOLDER) read; a file named "
                        "tokenizer.json gets it beside it too")
    t.add_argument("--seed", type=int, default=0,
                   help="which documents --max-documents samples (default 0); without it the seed changes nothing")
    t.add_argument("--min-frequency", type=int, default=2, metavar="F",
                   help="a pair must occur F times to be merged (default 2)")
    t.add_argument("--max-documents", type=int, metavar="D",
                   help="train on a uniform sample of D documents (seeded), held in memory; default: all, streamed")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    t.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from ylink_data.train.tokenizer import train_tokenizer

    started = time.perf_counter()
    result = train_tokenizer(args.inputs, args.output, args.vocab_size, seed=args.seed,
                             min_frequency=args.min_frequency, max_documents=args.max_documents,
                             show_progress=not args.no_progress and sys.stderr.isatty())
    if result.skipped.counts:
        print(result.skipped.describe("input"), file=sys.stderr)
    used = (f"{result.documents_used:,} of {result.documents_read:,} documents (sampled, seed {args.seed})"
            if result.documents_used < result.documents_read else f"{result.documents_read:,} documents")
    if result.vocab_shortfall:
        print(result.vocab_shortfall, file=sys.stderr)
    print(f"{redact_url(result.output)}: {result.vocab_size:,} tokens, trained on {used}, "
          f"{result.characters_read:,} characters read, in {time.perf_counter() - started:.1f}s; "
          f"sha256 {result.sha256}")
    return 0
