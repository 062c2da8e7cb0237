"""Issue 13, point 9 (the cache's part): tracebacks where one line is due. A full cache disk ended
`ylink cache warm` with an OSError traceback, and manifests with missing or absurd fields (not
JSON, not an object, `shards` not a list, an unknown version, negative or impossible sizes, more
bytes than the server has, a shard listed twice) gave KeyErrors, TypeErrors or a silent success.
Each is now one line naming the manifest (or the cache folder), for warm, the loader and the mount.

Real runs (tests/chaos/cacheruns.py), the real command in its own process, a real full disk: a
small tmpfs mounted for the test (skipped where this process may not mount)."""
from __future__ import annotations

import errno
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from ylink_data.cache import ShardLoader
from ylink_data.cache.mount import RunTree
from ylink_data.core.errors import YlinkError

from ..httpserver import FileServer
from ..test_cache_mount import _force_unmount, _mounted, _stop, fuse_ok  # noqa: F401 -- fuse_ok: a fixture
from .cacheruns import (YLINK, files_under, one_line_error, small_disk, write_manifest, write_run,  # noqa: F401
                        ylink, ylink_env)


def _shards(run: Path) -> list[dict]:
    return write_run(run)["shards"]


# name -> (the manifest made from the run's true shard entries, words the one line must hold)
ABSURD = {
    "not-json": (lambda s: '{"version": 1, "shards": [', "is not JSON"),
    "json-list": (lambda s: s, "a JSON list, not an object"),
    "no-shards": (lambda s: {"version": 1}, "has no 'shards'"),
    "shards-an-object": (lambda s: {"version": 1, "shards": {"0": s[0]}}, "'shards' is a JSON object"),
    "unknown-version": (lambda s: {"version": 7, "shards": s}, "has version 7"),
    "no-version": (lambda s: {"shards": s}, "has no 'version'"),
    "version-true": (lambda s: {"version": True, "shards": s}, "has version True"),
    "shard-a-string": (lambda s: {"version": 1, "shards": [s[0]["path"]]}, "shard 0: a JSON string"),
    "negative-bytes": (lambda s: {"version": 1, "shards": [{**s[0], "bytes": -1}]}, "shard 0: bytes -1"),
    "bytes-beyond-any-file": (lambda s: {"version": 1, "shards": [{**s[0], "bytes": 2 ** 64}]},
                              "more than any file can hold"),
    "impossible-rows": (lambda s: {"version": 1, "shards": [{**s[0], "rows": 10 ** 15}]}, "rows 1000000000000000"),
    "duplicate-path": (lambda s: {"version": 1, "shards": [s[0], s[1], {**s[0]}]}, "shard 2: path"),
}
# Sizes the manifest check cannot judge: only the file (or server) says it has fewer bytes.
BEYOND_SERVED = {
    "a-few-bytes-more": lambda size: size + 4096,
    "absurd-bytes": lambda size: 2 ** 62,
}


def _absurd_run(tmp_path: Path, name: str) -> Path:
    run = tmp_path / "run"
    make, _ = ABSURD[name]
    write_manifest(run, make(_shards(run)))
    return run


@pytest.mark.parametrize("name", list(ABSURD))
def test_warm_says_one_line_for_an_absurd_manifest(tmp_path, name):
    run, cache = _absurd_run(tmp_path, name), tmp_path / "cache"
    message = one_line_error(ylink("cache", "warm", str(run), "--cache-dir", str(cache), "--no-progress"))
    assert str(run.resolve() / "manifest.json") in message and ABSURD[name][1] in message, message
    assert not files_under(cache / "shards")


@pytest.mark.parametrize("cached", [False, True], ids=["direct", "cache_dir"])
@pytest.mark.parametrize("name", list(ABSURD))
def test_loader_says_one_line_for_an_absurd_manifest(tmp_path, name, cached):
    run = _absurd_run(tmp_path, name)
    with pytest.raises(YlinkError) as caught:
        list(ShardLoader(str(run), cache_dir=str(tmp_path / "cache") if cached else None, shuffle=False))
    message = str(caught.value)
    assert "\n" not in message and str(run / "manifest.json") in message and ABSURD[name][1] in message, message


@pytest.mark.parametrize("name", list(ABSURD))
def test_mount_tree_says_one_line_for_an_absurd_manifest(tmp_path, name):
    run = _absurd_run(tmp_path, name)
    with pytest.raises(YlinkError) as caught:
        RunTree.load(str(run))
    message = str(caught.value)
    assert "\n" not in message and str(run / "manifest.json") in message and ABSURD[name][1] in message, message


def test_mount_tree_says_one_line_for_tiers_that_are_not_folders(tmp_path):
    run = tmp_path / "run"
    write_manifest(run, {"version": 1, "shards": _shards(run), "tiers": ["high", "low"]})
    with pytest.raises(YlinkError, match="'tiers' is not an object"):
        RunTree.load(str(run))


def _beyond_served_run(tmp_path: Path, name: str) -> tuple[Path, str]:
    run = tmp_path / name / "run"
    shards = _shards(run)
    shards[1] = {**shards[1], "bytes": BEYOND_SERVED[name](shards[1]["bytes"])}
    write_manifest(run, {"version": 1, "shards": shards})
    return run, shards[1]["path"]


def test_warm_says_one_line_when_the_manifest_claims_more_bytes_than_served(tmp_path):
    """A few bytes more was already caught by the download; 2**62 bytes ended in an OSError from
    reserving the space, with a traceback."""
    for name in BEYOND_SERVED:
        run, shard = _beyond_served_run(tmp_path, name)
        cache = tmp_path / name / "cache"
        with FileServer(run.parent) as server:
            for url in (str(run), server.url("run")):
                message = one_line_error(ylink("cache", "warm", url, "--cache-dir", str(cache), "--no-progress"))
                wanted = str(run.resolve() / shard) if url == str(run) else server.url(f"run/{shard}")
                assert wanted in message and "manifest" in message, message
        assert not [p for p in files_under(cache / "shards") if ".tmp-" in p.name], "a partial download was left"


@pytest.mark.parametrize("name", list(BEYOND_SERVED))
def test_loader_says_one_line_when_the_manifest_claims_more_bytes_than_served(tmp_path, name):
    run, shard = _beyond_served_run(tmp_path, name)
    with FileServer(run.parent) as server:
        for url, cache_dir in ((str(run), None), (server.url("run"), None), (server.url("run"), tmp_path / "c")):
            with pytest.raises(YlinkError) as caught:
                list(ShardLoader(url, cache_dir=cache_dir and str(cache_dir), shuffle=False))
            message = str(caught.value)
            wanted = str(run.resolve() / shard) if url == str(run) else server.url(f"run/{shard}")
            assert "\n" not in message and wanted in message, message


# -- a full disk --------------------------------------------------------------------------------

def test_warm_into_a_full_cache_disk_says_one_line_and_leaves_no_partial_file(tmp_path, small_disk):
    run, disk = tmp_path / "run", small_disk(160)   # room for one shard of about 100 kB, not three
    write_run(run)
    message = one_line_error(ylink("cache", "warm", str(run), "--cache-dir", str(disk), "--no-progress"))
    assert str(disk) in message and "needs" in message and "--max-bytes" in message, message
    assert not [p for p in files_under(disk / "shards") if ".tmp-" in p.name], "a partial download was left"
    # What the message suggests works: a budget the disk can hold warms what fits.
    done = ylink("cache", "warm", str(run), "--cache-dir", str(disk), "--no-progress", "--max-bytes", "120K")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_loader_with_a_full_cache_disk_says_one_line(tmp_path, small_disk):
    run, disk = tmp_path / "run", small_disk(160)
    write_run(run)
    with pytest.raises(YlinkError) as caught:
        list(ShardLoader(str(run), cache_dir=str(disk), shuffle=False))
    message = str(caught.value)
    assert "\n" not in message and str(disk) in message and "needs" in message, message
    assert not [p for p in files_under(disk / "shards") if ".tmp-" in p.name]


def test_loader_without_cache_and_a_full_temporary_folder_says_one_line(tmp_path, small_disk, monkeypatch):
    run, disk = tmp_path / "run", small_disk(64)   # smaller than one shard
    write_run(run)
    monkeypatch.setattr(tempfile, "tempdir", str(disk))   # what TMPDIR sets
    with FileServer(tmp_path) as server:
        url = server.url("run")
        with pytest.raises(YlinkError) as caught:
            list(ShardLoader(url, shuffle=False))
    message = str(caught.value)
    assert "\n" not in message and str(disk) in message and "TMPDIR" in message and f"{url}/data/" in message, message
    assert not files_under(disk)


def test_mount_says_one_line_when_the_manifest_claims_more_bytes_than_served(tmp_path, fuse_ok):
    """The mount shows the manifest's sizes; reading a shard that has fewer bytes fails (EIO) and
    its log says why in one line, naming the shard."""
    run, shard = _beyond_served_run(tmp_path, "absurd-bytes")
    mnt, cache, log = tmp_path / "mnt", tmp_path / "cache", tmp_path / "mount.log"
    mnt.mkdir()
    with open(log, "wb") as out:
        proc = subprocess.Popen([*YLINK, "cache", "mount", str(run), str(mnt), "--cache-dir", str(cache)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=ylink_env())
    try:
        deadline = time.monotonic() + 60
        while "serving" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _mounted(mnt), log.read_text()
        with pytest.raises(OSError) as caught:
            (mnt / shard).read_bytes()
        assert caught.value.errno == errno.EIO
        assert (mnt / "data" / "part-00000.parquet").read_bytes() == (run / "data" / "part-00000.parquet").read_bytes()
    finally:
        _stop(proc)
        _force_unmount(mnt)
    text = log.read_text()
    reasons = [line for line in text.splitlines() if "cannot serve" in line]
    assert "Traceback" not in text and len(reasons) == 1, text
    assert str(run.resolve() / shard) in reasons[0] and "the manifest says" in reasons[0], text
