"""`ylink cache ...`: the node-local shard cache from the command line. `warm` pulls a run's shards
into it. Each action is an `_add_<action>` function plus a `run_<action>` function; the options every
action shares (cache folder, budget, storage options) come from `_add_cache_options`."""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from ..errors import InputError

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the node-local shard cache (warm)")
    csub = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    _add_warm(csub)


def _add_cache_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-dir", required=True, metavar="DIR",
                   help="the cache folder; every process and job on the node may share it")
    p.add_argument("--max-bytes", type=parse_bytes, default=None, metavar="N",
                   help="byte budget of the cache, e.g. 500G or 2000000000 (K, M, G, T are powers of 1024); "
                        "unused shards are evicted to stay within it")
    p.add_argument("--storage-options", type=_json_object, default=None, metavar="JSON",
                   help='fsspec options for the run\'s URL, e.g. \'{"endpoint_url": "http://..."}\' '
                        "(credentials are better left to the environment, e.g. AWS_ACCESS_KEY_ID)")


def _add_warm(csub: argparse._SubParsersAction) -> None:
    w = csub.add_parser("warm", help="pull a run's shards into the cache (those already there are kept)")
    w.add_argument("url", help="a finished run: local folder or fsspec URL (s3://, gs://, http(s)://...)")
    _add_cache_options(w)
    w.add_argument("--parallel", type=int, default=4, metavar="N", help="shards downloaded at once (default 4)")
    w.add_argument("--no-progress", action="store_true", help="no live progress bar, one summary line")
    w.set_defaults(func=run_warm)


def run_warm(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    from ..cache import ShardCache, run_shards

    if args.parallel < 1:
        raise InputError(f"--parallel must be 1 or more, not {args.parallel}")
    refs = run_shards(args.url, args.storage_options)
    cache = ShardCache(args.cache_dir, max_bytes=args.max_bytes, storage_options=args.storage_options)
    console = Console(stderr=True, soft_wrap=True)
    wanted, total = [], 0
    for ref in refs:  # in manifest order, as many as the budget holds: more would evict the first ones
        if args.max_bytes is not None and total + ref.size > args.max_bytes:
            break
        wanted.append(ref)
        total += ref.size
    if len(wanted) < len(refs):
        console.print(f"the run has {sum(r.size for r in refs):,} bytes in {len(refs)} shards; --max-bytes "
                      f"{args.max_bytes:,} holds the first {len(wanted)}: warming those", highlight=False)
    cached = [ref for ref in wanted if cache.contains(ref)]
    missing = [ref for ref in wanted if not cache.contains(ref)]
    need = sum(ref.size for ref in missing)
    started = time.perf_counter()
    live = sys.stderr.isatty() and not args.no_progress
    progress = Progress(TextColumn("warming"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                        TimeRemainingColumn(), console=console, disable=not live)

    def fetch(ref) -> int:
        with cache.get(ref):
            return ref.size

    with progress, ThreadPoolExecutor(max_workers=args.parallel) as pool:
        task = progress.add_task("warm", total=need)
        futures = [pool.submit(fetch, ref) for ref in missing]
        try:
            for future in as_completed(futures):
                progress.advance(task, future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    seconds = time.perf_counter() - started
    rate = f", {need / seconds / 1e6:.1f} MB/s" if need and seconds > 0 else ""
    print(f"{args.url}: {len(wanted)} shards, {total:,} bytes in {cache.cache_dir} "
          f"({len(missing)} downloaded in {seconds:.1f}s{rate}, {len(cached)} already cached)")
    return 0


def parse_bytes(text: str) -> int:
    """'500G', '1.5T', '2000000' or '64MiB' -> bytes (K, M, G, T: powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (e.g. 500G, 64M or 2000000)")
    return int(float(match[1]) * _UNITS[match[2]])


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value
