"""`ylink cache ...`: the node-local shard cache from the command line. `warm` pulls a run's shards
(and Megatron files) into it; `mount` serves a run read-only as files (FUSE), filled from the cache
with prefetch. Each action is an `_add_<action>` function plus a `run_<action>` function; the
options every action shares (cache folder, budget, storage options) come from `_add_cache_options`."""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from ylink_data.core.errors import InputError
from ylink_data.core.redaction import RedactingFilter, redact_text

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the node-local shard cache (warm, mount)")
    csub = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    _add_warm(csub)
    _add_mount(csub)


def _add_cache_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-dir", required=True, metavar="DIR",
                   help="the cache folder; every process and job on the node may share it")
    p.add_argument("--max-bytes", type=parse_bytes, default=None, metavar="N",
                   help="byte budget of the cache, e.g. 500G or 2000000000 (K, M, G, T are powers of 1024); "
                        "unused shards are evicted to stay within it")
    p.add_argument("--storage-options", type=parse_json_object, default=None, metavar="JSON",
                   help='fsspec options for the run\'s URL, e.g. \'{"endpoint_url": "http://..."}\' '
                        "(credentials are better left to the environment, e.g. AWS_ACCESS_KEY_ID)")


def _add_warm(csub: argparse._SubParsersAction) -> None:
    w = csub.add_parser("warm", help="pull a run's shards and Megatron files into the cache (those already there are "
                                     "kept)")
    w.add_argument("url", help="a finished run: local folder or fsspec URL (s3://, gs://, http(s)://...)")
    _add_cache_options(w)
    w.add_argument("--parallel", type=int, default=4, metavar="N", help="shards downloaded at once (default 4)")
    w.add_argument("--no-progress", action="store_true", help="no live progress bar, one summary line")
    w.set_defaults(func=run_warm)


def run_warm(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    from ylink_data.cache import ShardCache
    from ylink_data.cache.download import NoRoomError
    from ylink_data.io.manifest import read_manifest

    if args.parallel < 1:
        raise InputError(f"--parallel must be 1 or more, not {args.parallel}")
    run = read_manifest(args.url, args.storage_options)
    refs = [file.ref for file in run.files()]  # the shards, then the Megatron .bin/.idx pairs
    shard_count = len(run.shards)
    cache = ShardCache(args.cache_dir, max_bytes=args.max_bytes, storage_options=args.storage_options)
    console = Console(stderr=True, soft_wrap=True)
    wanted, total = [], 0
    for ref in refs:  # in manifest order, as many as the budget holds: more would evict the first ones
        if args.max_bytes is not None and total + ref.size > args.max_bytes:
            break
        wanted.append(ref)
        total += ref.size
    if len(wanted) < len(refs):
        console.print(f"the run has {sum(r.size for r in refs):,} bytes in {len(refs)} files; --max-bytes "
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
        except BaseException as exc:
            for future in futures:
                future.cancel()
            if isinstance(exc, NoRoomError):  # the shard's need, and the whole warm-up's
                raise NoRoomError(f"{exc} (warming {len(missing)} shards needs {need:,} bytes in all)") from None
            raise
    seconds = time.perf_counter() - started
    rate = f", {need / seconds / 1e6:.1f} MB/s" if need and seconds > 0 else ""
    shards = min(len(wanted), shard_count)
    tokens = f" and {len(wanted) - shards} Megatron files" if len(wanted) > shards else ""
    print(f"{redact_text(args.url)}: {shards} shards{tokens}, {total:,} bytes in {cache.cache_dir} "
          f"({len(missing)} downloaded in {seconds:.1f}s{rate}, {len(cached)} already cached)")
    return 0


def _add_mount(csub: argparse._SubParsersAction) -> None:
    m = csub.add_parser("mount", help="serve a run read-only at a folder (FUSE), its shards filled from the cache",
                        description="Serve a run read-only at MOUNTPOINT: MOUNTPOINT/manifest.json and "
                                    "MOUNTPOINT/data/*.parquet (and tiers/<tier>/...), its Megatron files "
                                    "megatron/*.bin, *.idx and a data-path.txt naming them under MOUNTPOINT (for "
                                    "--data-args-path), for code that only reads "
                                    "files. Opening a shard fetches it into the cache (and the next ones ahead "
                                    "of the reader). Runs in the foreground until Ctrl-C or SIGTERM, which unmount.")
    m.add_argument("url", help="a finished run: local folder or fsspec URL (s3://, gs://, http(s)://...)")
    m.add_argument("mountpoint", help="an existing empty folder")
    _add_cache_options(m)
    m.add_argument("--prefetch-bytes", type=parse_bytes, default=2 << 30, metavar="N",
                   help="fetch shards after the one opened up to this many bytes ahead (default 2G, at most half "
                        "of --max-bytes; 0: no prefetch)")
    m.add_argument("--parallel", type=int, default=2, metavar="N", help="shards prefetched at once (default 2)")
    m.add_argument("--allow-other", action="store_true",
                   help="let other users read the mount (needs user_allow_other in /etc/fuse.conf unless root)")
    m.add_argument("--background", action="store_true",
                   help="return once mounted and serve from a background process (its log: "
                        "CACHE_DIR/mount.log); unmount with fusermount3 -u MOUNTPOINT")
    m.set_defaults(func=run_mount)


def run_mount(args: argparse.Namespace) -> int:
    import logging

    from ylink_data.cache import mount

    if args.parallel < 1:
        raise InputError(f"--parallel must be 1 or more, not {args.parallel}")
    problem = mount.fuse_problem()
    if problem:
        raise mount.MountError(problem)
    mountpoint = mount.check_mountpoint(args.mountpoint)
    if args.background:
        return _mount_in_background(args, mountpoint)
    logger = logging.getLogger("ylink_data")
    if not logger.handlers:  # the daemon's log: warnings, plus one line per download
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s ylink cache mount: %(message)s", "%H:%M:%S"))
        handler.addFilter(RedactingFilter())  # log lines name shard URLs
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)

    def ready(tree) -> None:
        print(f"serving {redact_text(args.url)} ({len(tree.shards)} files, {tree.total_bytes:,} bytes) read-only at "
              f"{mountpoint}, cache {args.cache_dir}; Ctrl-C or SIGTERM unmounts", file=sys.stderr, flush=True)

    mount.serve(args.url, mountpoint, args.cache_dir, max_bytes=args.max_bytes,
                storage_options=args.storage_options, prefetch_bytes=args.prefetch_bytes, parallel=args.parallel,
                allow_other=args.allow_other, on_ready=ready)
    print(f"unmounted {mountpoint}", file=sys.stderr)
    return 0


def _mount_in_background(args: argparse.Namespace, mountpoint) -> int:
    """Start `ylink cache mount` (foreground) as a detached process and wait until it serves or fails.
    A new process rather than a fork: this one may already run threads (fsspec's event loop)."""
    import subprocess
    from pathlib import Path

    from ylink_data.cache import mount

    cache_dir = Path(args.cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    log_path = cache_dir / "mount.log"
    cmd = [sys.executable, "-m", "ylink_data.cli", "cache", "mount", args.url, str(mountpoint),
           "--cache-dir", str(cache_dir), "--prefetch-bytes", str(args.prefetch_bytes),
           "--parallel", str(args.parallel)]
    if args.max_bytes is not None:
        cmd += ["--max-bytes", str(args.max_bytes)]
    if args.storage_options is not None:
        cmd += ["--storage-options", json.dumps(args.storage_options)]
    if args.allow_other:
        cmd.append("--allow-other")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and not mount.is_mounted(mountpoint) and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.poll() is not None or not mount.is_mounted(mountpoint):
        if proc.poll() is None:
            proc.terminate()
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        reason = lines[-1] if lines else "no message"
        raise InputError(f"the background mount did not start: {reason} (log: {log_path})")
    print(f"serving {redact_text(args.url)} read-only at {mountpoint} from process {proc.pid} (log: {log_path}); "
          f"unmount with: fusermount3 -u {mountpoint}")
    return 0


def parse_bytes(text: str) -> int:
    """'500G', '1.5T', '2000000' or '64MiB' -> bytes (K, M, G, T: powers of 1024)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (e.g. 500G, 64M or 2000000)")
    return int(float(match[1]) * _UNITS[match[2]])


def parse_json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value
