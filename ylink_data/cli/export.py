"""`ylink export megatron RUN --tokenizer T --output DIR`: Megatron-LM files for an existing run
(the work is in ylink_data/tokens/export.py)."""
from __future__ import annotations

import argparse

from ylink_data.cli.cache import parse_json_object


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a finished run in a training format (megatron)")
    esub = p.add_subparsers(dest="export_command", required=True, metavar="FORMAT")
    m = esub.add_parser("megatron", help="Megatron-LM .bin/.idx pairs, one per shard, with a manifest and "
                                         "megatron/data-path.txt; a rerun resumes")
    m.add_argument("run", help="a finished run: local folder or fsspec URL (s3://, gs://, http(s)://...)")
    m.add_argument("--output", required=True, metavar="DIR", help="folder or URL to write into")
    m.add_argument("--tokenizer", metavar="PATH_OR_URL",
                   help="tokenizer.json to tokenize the shards' text with (default: the run's token_ids column)")
    m.add_argument("--dtype", choices=["auto", "uint16", "int32"], default="auto",
                   help="token type of the .bin files (default auto: uint16 when the largest token id fits, else int32)")
    m.add_argument("--eod-token", metavar="TOKEN", help="end-of-document token (default: <|endoftext|>, </s>...)")
    m.add_argument("--no-eod", dest="append_eod", action="store_false", help="no end-of-document id after documents")
    m.add_argument("--storage-options", type=parse_json_object, default=None, metavar="JSON",
                   help='fsspec options for remote URLs (run, tokenizer, output), e.g. \'{"endpoint_url": "http://..."}\'')
    m.add_argument("--ray-address", metavar="ADDRESS", help='a Ray cluster to run on ("auto", "ray://host:port"); '
                                                              "default: this machine, one worker process per CPU "
                                                              "(as ray.address: null)")
    m.add_argument("--no-progress", action="store_true", help="no live progress bar, one summary line")
    m.set_defaults(func=run_export_megatron)


def run_export_megatron(args: argparse.Namespace) -> int:
    from ylink_data.tokens.export import export_megatron

    export_megatron(args.run, args.output, tokenizer=args.tokenizer, dtype=args.dtype, eod_token=args.eod_token,
                    append_eod=args.append_eod, storage_options=args.storage_options, ray_address=args.ray_address,
                    progress=False if args.no_progress else None)
    return 0
