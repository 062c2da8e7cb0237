"""The node-local shard cache and its prefetcher, against a real S3 server (SeaweedFS on 127.0.0.1),
a real HTTP server that can misbehave (tests/httpserver.py) and real processes sharing one cache.

The run they read is real: eight Parquet shards of about 200 KB written by ylink's own Parquet
writer from the pages of the bundled crawl, with a manifest as a run writes it."""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ylink_data.cache import Prefetcher, ShardCache, ShardRef, run_shards
from ylink_data.cache.download import DownloadError, DownloadPolicy

from .conftest import REPO
from .httpserver import FileServer
from .s3server import s3_server
from .shardruns import write_run

SHARDS = 8
DOCS_PER_SHARD = 100  # documents of about 2 KB: shards of about 200 KB, within a few % of each other
FAST = dict(backoff_s=0.01, max_backoff_s=0.05)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("run")
    write_run(root, SHARDS, DOCS_PER_SHARD)
    return root


@pytest.fixture(scope="module")
def s3(tmp_path_factory, run_dir):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        server.upload_folder(run_dir, "runs/r1")
        yield server


@pytest.fixture(scope="module")
def s3_refs(s3) -> list[ShardRef]:
    return run_shards("s3://runs/r1", s3.storage_options())


@pytest.fixture
def http(run_dir):
    with FileServer(run_dir) as server:
        yield server


def _http_refs(server: FileServer, run_dir: Path) -> list[ShardRef]:
    return [ShardRef(server.url(f"data/part-{i:05d}.parquet"), r.sha256, r.size)
            for i, r in enumerate(run_shards(str(run_dir)))]


def _downloads(cache_dir: Path) -> Counter:
    log = cache_dir / "downloads.log"
    return Counter(json.loads(line)["url"] for line in log.read_text().splitlines()) if log.exists() else Counter()


def _sha(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _visible(cache_dir: Path) -> list[str]:
    return sorted(p.name for p in (cache_dir / "shards").iterdir())


def _wait(condition, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# A process that opens the cache, says "ready", waits for the go file, then reads its shards.
WORKER = """
import hashlib, json, sys, time
from pathlib import Path
from ylink_data.cache import ShardCache, ShardRef
from ylink_data.cache.download import DownloadPolicy
args = json.loads(sys.argv[1])
cache = ShardCache(args["cache"], storage_options=args["options"], policy=DownloadPolicy(**args["policy"]))
print("ready", flush=True)
while args["go"] and not Path(args["go"]).exists():
    time.sleep(0.002)
digests = []
for ref in args["refs"]:
    with cache.get(ShardRef(**ref)) as path:
        digests.append(hashlib.sha256(Path(path).read_bytes()).hexdigest())
print(json.dumps(digests), flush=True)
"""


def _worker(cache_dir: Path, refs: list[ShardRef], options: dict | None = None, go: Path | None = None,
            **policy) -> subprocess.Popen:
    args = {"cache": str(cache_dir), "options": options, "go": str(go) if go else None, "policy": policy,
            "refs": [{"url": r.url, "sha256": r.sha256, "size": r.size} for r in refs]}
    proc = subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(args)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


# -- reading a run ----------------------------------------------------------------------------

def test_run_shards_lists_the_manifest_in_order(s3, s3_refs, run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [r.url for r in s3_refs] == [f"s3://runs/r1/{s['path']}" for s in manifest["shards"]]
    assert [(r.sha256, r.size) for r in s3_refs] == [(s["sha256"], s["bytes"]) for s in manifest["shards"]]
    local = run_shards(os.path.relpath(run_dir))  # relative paths become absolute: one key per file
    assert [r.url for r in local] == [str(run_dir / s["path"]) for s in manifest["shards"]]
    with pytest.raises(Exception, match=r"s3://runs/nothing-here is not a finished ylink run"):
        run_shards("s3://runs/nothing-here", s3.storage_options())


def test_get_downloads_once_verifies_and_reads_back(s3, s3_refs, run_dir, tmp_path):
    cache = ShardCache(tmp_path / "cache", storage_options=s3.storage_options())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for ref, shard in zip(s3_refs, manifest["shards"]):
        assert not cache.contains(ref)
        with cache.get(ref) as path:
            assert _sha(path) == ref.sha256
            assert pq.read_metadata(path).num_rows == shard["rows"]
            assert Path(path).parent == tmp_path / "cache" / "shards" and path.endswith(".parquet")
        assert cache.contains(ref)
    for ref in s3_refs:  # second pass: all hits
        with cache.get(ref):
            pass
    assert _downloads(tmp_path / "cache") == Counter({r.url: 1 for r in s3_refs})
    assert len(_visible(tmp_path / "cache")) == SHARDS and not any(".tmp-" in n for n in _visible(tmp_path / "cache"))
    assert cache.usage() == sum(r.size for r in s3_refs)


def test_local_run_and_threads_share_one_download(run_dir, tmp_path):
    refs = run_shards(str(run_dir))
    cache = pickle.loads(pickle.dumps(ShardCache(tmp_path / "cache")))  # as DataLoader workers get it
    digests: list[str] = []

    def read() -> None:
        with cache.get(refs[3]) as path:
            digests.append(_sha(path))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert digests == [refs[3].sha256] * 4
    assert _downloads(tmp_path / "cache") == Counter({refs[3].url: 1})


def test_ranged_parts_in_parallel(http, run_dir, tmp_path):
    ref = _http_refs(http, run_dir)[0]
    cache = ShardCache(tmp_path / "cache", policy=DownloadPolicy(part_bytes=64 << 10, parallel=3))
    with cache.get(ref) as path:
        assert _sha(path) == ref.sha256
    gets = http.gets("data/part-00000.parquet")
    assert len(gets) == math.ceil(ref.size / (64 << 10)) >= 3
    assert {g.status for g in gets} == {206} and sum(g.sent for g in gets) == ref.size
    assert len({g.range for g in gets}) == len(gets)


def test_a_small_shard_is_split_across_every_connection(http, run_dir, tmp_path):
    """A shard smaller than parallel x part_bytes still goes out as `parallel` ranged GETs (the
    default part is 16 MiB; a shard the reader waits for must not come down one connection)."""
    ref = _http_refs(http, run_dir)[1]
    cache = ShardCache(tmp_path / "cache", policy=DownloadPolicy(min_part_bytes=4 << 10, parallel=4))
    with cache.get(ref) as path:
        assert _sha(path) == ref.sha256
    gets = http.gets("data/part-00001.parquet")
    assert ref.size > 16 << 10 and len(gets) == 4
    assert sorted(g.sent for g in gets)[-1] == math.ceil(ref.size / 4) and sum(g.sent for g in gets) == ref.size


# -- the budget, pins and eviction --------------------------------------------------------------

def test_budget_evicts_least_recently_used_but_never_a_pinned_shard(s3, s3_refs, tmp_path, caplog):
    r = s3_refs
    budget = r[0].size + r[1].size + r[2].size
    cache = ShardCache(tmp_path / "cache", max_bytes=budget, storage_options=s3.storage_options())
    with cache.get(r[0]) as pinned:
        for ref in r[1:3]:
            with cache.get(ref):
                pass
        with cache.get(r[3]):  # r0 is the least recently used, but pinned: r1 goes
            pass
        assert Path(pinned).exists() and cache.contains(r[0])
        assert not cache.contains(r[1]) and cache.contains(r[3])
        assert cache.usage() <= budget
    # Everything cached is in use: the cache grows past its budget rather than wait forever.
    with contextlib.ExitStack() as stack:
        held = [ref for ref in r[:4] if cache.contains(ref)]
        for ref in held:
            stack.enter_context(cache.get(ref))
        with caplog.at_level(logging.WARNING, logger="ylink_data.cache"):
            with cache.get(r[4]):
                pass
        assert "over its budget" in caplog.text
        assert all(cache.contains(ref) for ref in held + [r[4]]) and cache.usage() > budget
    with cache.get(r[5]):  # released: back within the budget
        pass
    assert cache.usage() <= budget


def test_evict_hint_never_needed_first_then_furthest(s3, s3_refs, tmp_path):
    r = s3_refs
    budget = r[0].size + r[1].size + r[2].size + min(ref.size for ref in r) // 2
    cache = ShardCache(tmp_path / "cache", max_bytes=budget, storage_options=s3.storage_options())
    for ref in r[:3]:
        with cache.get(ref):
            pass
    # LRU alone would evict r0, then r1; the hint says r1 is never needed, r2 furthest, r0 next.
    cache.evict_hint({r[0]: 1.0, r[1]: math.inf, r[2]: 50.0, r[3]: 2.0, r[4]: 3.0}.get)
    with cache.get(r[3]):
        pass
    assert [cache.contains(ref) for ref in r[:4]] == [True, False, True, True]
    with cache.get(r[4]):
        pass
    assert [cache.contains(ref) for ref in r[:5]] == [True, False, False, True, True]


# -- processes sharing one cache ----------------------------------------------------------------

def test_two_processes_download_each_shard_once(s3, s3_refs, tmp_path):
    go = tmp_path / "go"
    procs = [_worker(tmp_path / "cache", s3_refs, s3.storage_options(), go) for _ in range(2)]
    go.touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    for out, _ in outs:
        assert json.loads(out) == [r.sha256 for r in s3_refs]
    assert _downloads(tmp_path / "cache") == Counter({r.url: 1 for r in s3_refs})


def test_two_processes_one_get_per_byte_while_downloads_overlap(http, run_dir, tmp_path):
    refs = _http_refs(http, run_dir)[:3]
    http.rate = 2e6  # ~0.1 s per shard: the second process surely asks while the first downloads
    go = tmp_path / "go"
    procs = [_worker(tmp_path / "cache", refs, None, go) for _ in range(2)]
    go.touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    for ref, i in zip(refs, range(3)):
        assert http.bytes_sent(f"data/part-{i:05d}.parquet") == ref.size
    assert all(json.loads(out) == [r.sha256 for r in refs] for out, _ in outs)


# -- damage and crashes -------------------------------------------------------------------------

def test_corrupted_cached_shard_is_detected_and_fetched_again(s3, s3_refs, tmp_path, caplog):
    ref = s3_refs[2]
    cache = ShardCache(tmp_path / "cache", storage_options=s3.storage_options())
    with cache.get(ref) as path:
        pass
    with open(path, "r+b") as f:  # same size, different bytes
        f.seek(ref.size // 2)
        f.write(b"\0garbage\0")
    assert not cache.contains(ref)
    with caplog.at_level(logging.WARNING, logger="ylink_data.cache"):
        with cache.get(ref) as path:
            assert _sha(path) == ref.sha256
    assert "sha256 differs" in caplog.text
    os.truncate(path, ref.size - 100)  # shorter
    with cache.get(ref) as path:
        assert _sha(path) == ref.sha256
    assert _downloads(tmp_path / "cache")[ref.url] == 3
    # Damage the cheap check cannot see (bit rot keeps size, inode and times) is found by verify().
    cache2 = ShardCache(tmp_path / "cache", storage_options=s3.storage_options())
    assert cache2.verify(ref)
    with open(path, "r+b") as f:
        f.write(b"PAR2")
    meta = tmp_path / "cache" / "meta" / f"{cache.key(ref)}.json"
    st = os.stat(path)  # record the damaged file's stamp, as if nothing had touched it
    stamp = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "stamp": stamp}))
    assert cache2.contains(ref)  # fooled, by design of the cheap check
    assert not cache2.verify(ref)
    with cache2.get(ref) as path:
        assert _sha(path) == ref.sha256
    assert _downloads(tmp_path / "cache")[ref.url] == 4


def test_kill_9_during_a_download_leaves_no_partial_shard_and_no_stale_lock(http, run_dir, tmp_path):
    ref = _http_refs(http, run_dir)[1]
    name = "data/part-00001.parquet"
    cache_dir = tmp_path / "cache"
    http.rate = 100_000  # bytes/s: the whole shard would take about 2 s
    policy = dict(part_bytes=32 << 10, parallel=1)

    def kill_mid_download() -> None:
        proc = _worker(cache_dir, [ref], **policy)
        _wait(lambda: any(g.complete for g in http.gets(name)) and any(".tmp-" in n for n in _visible(cache_dir)),
              what="the first part to arrive")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL

    kill_mid_download()
    visible = _visible(cache_dir)
    assert len(visible) == 1 and ".tmp-" in visible[0]  # never at the shard's own name
    assert sum(g.sent for g in http.gets(name)) < ref.size
    http.rate = None
    cache = ShardCache(cache_dir, policy=DownloadPolicy(**policy))  # a restart: the dead download is removed
    assert _visible(cache_dir) == []
    with cache.get(ref) as path:
        assert _sha(path) == ref.sha256

    # A process waiting on the lock takes over when the downloader is killed.
    cache_dir = tmp_path / "cache2"
    http.log.clear()
    http.rate = 100_000
    result: list[str] = []

    def wait_then_read() -> None:
        with ShardCache(cache_dir, policy=DownloadPolicy(**policy)).get(ref) as path:
            result.append(_sha(path))

    proc = _worker(cache_dir, [ref], **policy)
    _wait(lambda: any(".tmp-" in n for n in _visible(cache_dir)), what="the download to start")
    waiter = threading.Thread(target=wait_then_read)
    waiter.start()
    _wait(lambda: any(g.complete for g in http.gets(name)), what="the first part to arrive")
    assert result == []
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    http.rate = None
    waiter.join(30)
    assert result == [ref.sha256]
    assert _visible(cache_dir) == [f"{ShardCache.key(ref)}.parquet"]
    assert _downloads(cache_dir) == Counter({ref.url: 1})


# -- unreliable servers -------------------------------------------------------------------------

def test_503s_are_retried_until_the_server_answers(http, run_dir, tmp_path, caplog):
    ref = _http_refs(http, run_dir)[0]
    http.fail_next("data/part-00000.parquet", 503, times=2)
    cache = ShardCache(tmp_path / "cache", policy=DownloadPolicy(attempts=4, **FAST))
    with caplog.at_level(logging.WARNING, logger="ylink_data.cache"):
        with cache.get(ref) as path:
            assert _sha(path) == ref.sha256
    assert [g.status for g in http.gets("data/part-00000.parquet")] == [503, 503, 206]
    assert caplog.text.count("HTTP 503") == 2


def test_a_server_that_always_503s_gives_one_line_naming_the_url(http, run_dir, tmp_path):
    ref = _http_refs(http, run_dir)[0]
    http.always_fail = 503
    cache = ShardCache(tmp_path / "cache", policy=DownloadPolicy(attempts=3, **FAST))
    with pytest.raises(DownloadError) as err:
        with cache.get(ref):
            pass
    message = str(err.value)
    assert "\n" not in message and ref.url in message and "HTTP 503" in message and "after 3 attempts" in message
    assert len(http.gets("data/part-00000.parquet")) == 3
    assert _visible(tmp_path / "cache") == [] and not cache.contains(ref)


def test_a_stalled_request_times_out_and_is_retried(http, run_dir, tmp_path, caplog):
    ref = _http_refs(http, run_dir)[0]
    http.stall_next("data/part-00000.parquet", 5.0)
    cache = ShardCache(tmp_path / "cache", policy=DownloadPolicy(timeout_s=0.5, **FAST))
    with caplog.at_level(logging.WARNING, logger="ylink_data.cache"):
        with cache.get(ref) as path:
            assert _sha(path) == ref.sha256
    assert "no answer within 0.5s" in caplog.text
    assert [(g.status, g.complete) for g in http.gets("data/part-00000.parquet")] == [(206, True)]


def test_a_remote_file_that_differs_from_the_manifest_is_refused(run_dir, tmp_path):
    ref = run_shards(str(run_dir))[0]
    wrong = ShardRef(ref.url, "0" * 64, ref.size)
    cache = ShardCache(tmp_path / "cache")
    with pytest.raises(DownloadError, match="sha256 is .* the manifest says 0000"):
        with cache.get(wrong):
            pass
    assert _visible(tmp_path / "cache") == []


# -- prefetch ----------------------------------------------------------------------------------

def test_prefetcher_fetches_the_shard_the_reader_waits_for_alone_then_two_at_a_time(http, run_dir, tmp_path):
    """Cold start: the reader's first shard goes alone, over every connection; only once it is in
    does the next start, and then two shards download at once."""
    refs = _http_refs(http, run_dir)[:4]
    http.rate = 2 << 20  # bytes/s per connection: each shard takes a measurable time
    cache = ShardCache(tmp_path / "cache", policy=DownloadPolicy(min_part_bytes=4 << 10, parallel=4))
    with Prefetcher(cache, parallel=2) as prefetcher:
        prefetcher.schedule(refs)
        _wait(lambda: all(cache.contains(ref) for ref in refs), what="the four shards")
    gets = [http.gets(f"data/part-{i:05d}.parquet") for i in range(4)]
    assert [len(g) for g in gets] == [4, 4, 4, 4]
    assert min(g.began for g in gets[1]) >= max(g.ended for g in gets[0])  # the first went alone
    assert min(g.began for g in gets[2]) < max(g.ended for g in gets[1])   # then two at a time


def test_prefetcher_stays_within_its_window_and_never_fetches_a_shard_twice(s3, s3_refs, tmp_path):
    r = s3_refs
    window = 3 * max(ref.size for ref in r)  # three shards, never four
    assert window < sum(sorted(ref.size for ref in r)[:4])
    budget = 2 * window  # the window is at most half the budget: the rest is for shards in use
    cache = ShardCache(tmp_path / "cache", max_bytes=budget, storage_options=s3.storage_options())
    rows = 0
    with Prefetcher(cache, window_bytes=10 * budget, parallel=2) as prefetcher:
        assert prefetcher.window_bytes == window
        prefetcher.schedule(r)
        _wait(lambda: all(cache.contains(ref) for ref in r[:3]), what="the first window")
        time.sleep(0.2)  # give a wrong prefetcher time to overreach
        assert not cache.contains(r[3])
        for i, ref in enumerate(r):
            prefetcher.advance(i)
            with cache.get(ref) as path:
                rows += pq.read_metadata(path).num_rows
            assert cache.usage() <= budget
            if i == 2:  # what eviction is told: shards behind the reader are never needed again
                assert [prefetcher.next_use(ref) for ref in r[:5]] == [math.inf, math.inf, 0, 1, 2]
    assert rows == SHARDS * DOCS_PER_SHARD
    # Every shard fetched exactly once: eviction never dropped one that was about to be read.
    assert _downloads(tmp_path / "cache") == Counter({ref.url: 1 for ref in r})


# -- ylink cache warm -------------------------------------------------------------------------

def _warm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", "cache", "warm", *args, "--no-progress"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_cli_cache_warm(s3, s3_refs, tmp_path):
    options = json.dumps(s3.storage_options())
    cache_dir = tmp_path / "cache"
    first_three = sum(ref.size for ref in s3_refs[:3])
    proc = _warm("s3://runs/r1", "--cache-dir", str(cache_dir), "--storage-options", options,
                 "--max-bytes", str(first_three + 1000))
    assert proc.returncode == 0, proc.stderr
    assert "holds the first 3" in proc.stderr and "3 downloaded" in proc.stdout
    proc = _warm("s3://runs/r1", "--cache-dir", str(cache_dir), "--storage-options", options, "--parallel", "3")
    assert proc.returncode == 0, proc.stderr
    assert f"{SHARDS} shards" in proc.stdout and f"{SHARDS - 3} downloaded" in proc.stdout
    assert "3 already cached" in proc.stdout
    cache = ShardCache(cache_dir)
    assert all(cache.contains(ref) for ref in s3_refs)
    assert _downloads(cache_dir) == Counter({ref.url: 1 for ref in s3_refs})
    proc = _warm("s3://runs/no-such-run", "--cache-dir", str(cache_dir), "--storage-options", options)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "s3://runs/no-such-run" in lines[0]
    assert s3.secret not in proc.stderr


def test_cli_cache_warm_names_a_missing_shard_in_one_line(run_dir, tmp_path):
    (tmp_path / "run" / "data").mkdir(parents=True)
    (tmp_path / "run" / "manifest.json").write_bytes((run_dir / "manifest.json").read_bytes())
    with FileServer(tmp_path / "run") as server:  # a manifest whose shards are gone: 404, not retried
        proc = _warm(server.url("").rstrip("/"), "--cache-dir", str(tmp_path / "cache"))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1
    assert "cannot download http://127.0.0.1:" in lines[0] and "not found" in lines[0]
