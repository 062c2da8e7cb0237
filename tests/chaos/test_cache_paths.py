"""Issue 13, point 5: the cache read files outside the run. A manifest entry such as
`{"path": "../../../../etc/shadow", "bytes": 64, "sha256": ""}` made `ylink cache warm` copy the
file's first bytes into the cache as a "verified" shard, `ShardLoader` read it too, and over HTTP
`data/../../other-run/...` fetched another run's shard. Every manifest is now checked in one place
(`ylink_data.io.manifest`) before any shard is read, by warm, the loader, the mount and `open_run` alike; and
a loader without `cache_dir` verifies size and sha256 as the cache does, hashing a local shard once
per process while its file is unchanged.

The runs are real (ylink's Parquet writer over the bundled crawl's pages), the command runs in its
own process, the HTTP server is real (tests/httpserver.py on 127.0.0.1). /etc/passwd stands for
/etc/shadow: readable everywhere, so that a test would see its bytes leak."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import ylink_data
from ylink_data.cache import ShardLoader, verified
from ylink_data.cache.mount import RunTree
from ylink_data.core.errors import YlinkError

from ..httpserver import FileServer
from ..test_cache_mount import _force_unmount, _mounted, fuse_ok  # noqa: F401 -- fuse_ok: a fixture
from .cacheruns import files_under, one_line_error, write_manifest, write_run, ylink

SECRET = Path("/etc/passwd")
VALID_SHA = hashlib.sha256(SECRET.read_bytes()[:64]).hexdigest()  # what a careful attacker would put

# (entry, words the one-line error must hold besides the manifest and "shard 3")
HOSTILE = {
    "issue-entry": ({"path": "../../../../etc/passwd", "bytes": 64, "sha256": "", "rows": 1}, "leaves the run folder"),
    "dotdot-with-sha": ({"path": "../../../../etc/passwd", "bytes": 64, "sha256": VALID_SHA, "rows": 1},
                        "leaves the run folder"),
    "dotdot-inside": ({"path": "data/../../../../../../etc/passwd", "bytes": 64, "sha256": VALID_SHA, "rows": 1},
                      "leaves the run folder"),
    "absolute": ({"path": str(SECRET), "bytes": 64, "sha256": VALID_SHA, "rows": 1}, "absolute"),
    "foreign-bucket": ({"path": "s3://other-bucket/data/part-00000.parquet", "bytes": 64, "sha256": VALID_SHA,
                        "rows": 1}, "':'"),
    "file-url": ({"path": f"file://{SECRET}", "bytes": 64, "sha256": VALID_SHA, "rows": 1}, "':'"),
    "fsspec-chain": ({"path": f"data/x::file://{SECRET}", "bytes": 64, "sha256": VALID_SHA, "rows": 1}, "':'"),
    "backslash": ({"path": "data\\..\\..\\..\\..\\etc\\passwd", "bytes": 64, "sha256": VALID_SHA, "rows": 1},
                  "'\\\\'"),
    "nul": ({"path": "data/part-00000.parquet\x00.txt", "bytes": 64, "sha256": VALID_SHA, "rows": 1}, "'\\x00'"),
    "percent-dotdot": ({"path": "data/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "bytes": 64, "sha256": VALID_SHA,
                        "rows": 1}, "'%'"),
    "empty-path": ({"path": "", "bytes": 64, "sha256": VALID_SHA, "rows": 1}, "path ''"),
    "no-path": ({"bytes": 64, "sha256": VALID_SHA, "rows": 1}, "path None"),
    "empty-sha": ({"path": "data/part-00003.parquet", "bytes": 64, "sha256": "", "rows": 1}, "sha256"),
    "no-sha": ({"path": "data/part-00003.parquet", "bytes": 64, "rows": 1}, "sha256"),
    "short-sha": ({"path": "data/part-00003.parquet", "bytes": 64, "sha256": "abc123", "rows": 1}, "sha256"),
    "no-bytes": ({"path": "data/part-00003.parquet", "sha256": VALID_SHA, "rows": 1}, "'bytes'"),
    "negative-bytes": ({"path": "data/part-00003.parquet", "bytes": -64, "sha256": VALID_SHA, "rows": 1}, "bytes -64"),
    "string-bytes": ({"path": "data/part-00003.parquet", "bytes": "64", "sha256": VALID_SHA, "rows": 1}, "bytes '64'"),
    "fraction-bytes": ({"path": "data/part-00003.parquet", "bytes": 64.5, "sha256": VALID_SHA, "rows": 1},
                       "bytes 64.5"),
    "no-rows": ({"path": "data/part-00003.parquet", "bytes": 64, "sha256": VALID_SHA}, "'rows'"),
    "negative-rows": ({"path": "data/part-00003.parquet", "bytes": 64, "sha256": VALID_SHA, "rows": -1}, "rows -1"),
}


def _hostile_run(tmp_path: Path, entry: dict) -> Path:
    """A real four-shard run whose manifest lists `entry` in place of its shard 3 (whose file,
    data/part-00003.parquet, is there: the entries with a bad field name it). Everything before it is
    fine, so a check that came after any download would have copied something."""
    run = tmp_path / "run"
    manifest = write_run(run, shards=4)
    manifest["shards"][3] = entry
    write_manifest(run, manifest)
    return run


def _no_secret_in(folder: Path) -> None:
    secret = SECRET.read_bytes()[:64]
    for path in files_under(folder):
        assert secret not in path.read_bytes(), f"{path} holds bytes of {SECRET}"


def _check_message(message: str, run: Path, words: str) -> None:
    assert str(run.resolve() / "manifest.json") in message and "shard 3" in message and words in message, message


@pytest.mark.parametrize("name", list(HOSTILE))
def test_warm_refuses_a_hostile_manifest_before_copying_anything(tmp_path, name):
    entry, words = HOSTILE[name]
    run, cache = _hostile_run(tmp_path, entry), tmp_path / "cache"
    message = one_line_error(ylink("cache", "warm", str(run), "--cache-dir", str(cache), "--no-progress"))
    _check_message(message, run, words)
    assert not files_under(cache / "shards"), "nothing may be copied into the cache"
    _no_secret_in(cache)


def test_warm_refuses_a_link_out_of_the_run_folder(tmp_path):
    run = _hostile_run(tmp_path, {"path": "data/part-00003.parquet", "bytes": 64, "sha256": VALID_SHA, "rows": 1})
    link, cache = run / "data" / "part-00003.parquet", tmp_path / "cache"
    link.unlink()
    link.symlink_to(SECRET)
    message = one_line_error(ylink("cache", "warm", str(run), "--cache-dir", str(cache), "--no-progress"))
    _check_message(message, run, "outside the run folder")
    assert not files_under(cache / "shards")
    _no_secret_in(cache)


@pytest.mark.parametrize("cached", [False, True], ids=["direct", "cache_dir"])
@pytest.mark.parametrize("name", ["issue-entry", "absolute", "file-url", "percent-dotdot", "empty-sha",
                                  "negative-bytes", "no-rows"])
def test_loader_refuses_a_hostile_manifest(tmp_path, name, cached):
    entry, words = HOSTILE[name]
    run, cache = _hostile_run(tmp_path, entry), tmp_path / "cache"
    with pytest.raises(YlinkError) as caught:
        loader = ShardLoader(str(run), cache_dir=str(cache) if cached else None, shuffle=False, batch_size=64)
        list(loader)
    message = str(caught.value)
    assert "\n" not in message
    _check_message(message, run, words)
    assert not files_under(cache / "shards")
    _no_secret_in(cache)


@pytest.mark.parametrize("name", ["issue-entry", "dotdot-with-sha", "absolute", "foreign-bucket", "percent-dotdot",
                                  "empty-sha", "no-sha", "negative-bytes", "no-rows"])
def test_mount_tree_refuses_a_hostile_manifest(tmp_path, name):
    """What `ylink cache mount` serves comes from `RunTree.load`: it refuses the same manifests, with
    the same words (the FUSE side needs no manifest of its own)."""
    entry, words = HOSTILE[name]
    run = _hostile_run(tmp_path, entry)
    with pytest.raises(YlinkError) as caught:
        RunTree.load(str(run))
    _check_message(str(caught.value), run, words)


# -- open_run, and so `ylink inspect`, the report and the notebook helpers -------------------------

@pytest.mark.parametrize("name", list(HOSTILE))
def test_open_run_refuses_a_hostile_manifest(tmp_path, name):
    entry, words = HOSTILE[name]
    run = _hostile_run(tmp_path, entry)
    with pytest.raises(YlinkError) as caught:
        ylink_data.open_run(str(run)).to_arrow()
    assert "\n" not in str(caught.value)
    _check_message(str(caught.value), run, words)


# how runs/a's manifest names runs/b's first shard: (its path, or None for a link; the words of the error)
_ELSEWHERE = {"dotdot": ("../b/data/part-00000.parquet", "leaves the run folder"),
              "absolute": ("{b}/data/part-00000.parquet", "absolute"),
              "link": (None, "outside the run folder")}


@pytest.mark.parametrize("how", list(_ELSEWHERE))
def test_inspect_refuses_a_shard_of_another_run(tmp_path, how):
    """runs/a lists runs/b's first shard as its shard 3, with its true size, rows and sha256: a run
    that reads it would show b's documents as a's."""
    path, words = _ELSEWHERE[how]
    theirs = write_run(tmp_path / "b")["shards"][0]
    run = tmp_path / "a"
    ours = write_run(run)
    (run / "stats.json").write_text(json.dumps({"input_records": 200, "output_records": 200, "quarantined": 0,
                                                "stages": []}))
    if path is None:
        path = "data/part-00003.parquet"
        (run / path).symlink_to(tmp_path / "b" / "data" / "part-00000.parquet")
    ours["shards"].append({**theirs, "path": path.format(b=tmp_path / "b")})
    write_manifest(run, ours)
    proc = ylink("inspect", str(run), "--limit", "1000")
    _check_message(one_line_error(proc), run, words)
    assert "b-0-" not in proc.stdout, "a document of another run was shown"
    with pytest.raises(YlinkError) as caught:
        ylink_data.open_run(str(run))
    _check_message(str(caught.value), run, words)


# -- over HTTP: two runs side by side on one server ---------------------------------------------

@pytest.fixture
def two_runs(tmp_path):
    """runs/a and runs/b on one real HTTP server; a's manifest lists b's first shard through `..`
    as its shard 3, with b's true size, rows and sha256, so that it would even verify."""
    root = tmp_path / "served"
    theirs = write_run(root / "runs" / "b")["shards"][0]
    ours = write_run(root / "runs" / "a")
    with FileServer(root) as server:
        yield server, root, ours, theirs


@pytest.mark.parametrize("path", ["data/../../b/data/part-00000.parquet",
                                  "data/%2e%2e/%2e%2e/b/data/part-00000.parquet"], ids=["dotdot", "percent"])
def test_http_manifest_cannot_reach_another_run(tmp_path, two_runs, path):
    server, root, ours, theirs = two_runs
    ours["shards"].append({**theirs, "path": path})
    write_manifest(root / "runs" / "a", ours)
    url, cache = server.url("runs/a"), tmp_path / "cache"
    message = one_line_error(ylink("cache", "warm", url, "--cache-dir", str(cache), "--no-progress"))
    assert server.url("runs/a/manifest.json") in message and "shard 3" in message, message
    for cache_dir in (None, str(tmp_path / "loader-cache")):
        with pytest.raises(YlinkError, match="shard 3"):
            list(ShardLoader(url, cache_dir=cache_dir, shuffle=False))
    assert not [g for g in server.gets() if g.path.startswith("runs/b/")], "another run's shard was fetched"
    assert not files_under(cache / "shards")


# -- a loader without cache_dir verifies what it reads -----------------------------------------

def _damage(run: Path, how: str) -> str:
    """Damage shard 1 of `run` (`truncated`: its last half is gone; `other-sha`: the manifest's
    sha256 no longer matches, the file is intact Parquet); returns its path in the run."""
    shard = run / "data" / "part-00001.parquet"
    if how == "truncated":
        data = shard.read_bytes()
        shard.write_bytes(data[: len(data) // 2])
    else:
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["shards"][1]["sha256"] = hashlib.sha256(b"another file").hexdigest()
        write_manifest(run, manifest)
    return "data/part-00001.parquet"


@pytest.mark.parametrize("how", ["truncated", "other-sha"])
def test_loader_without_cache_verifies_a_local_shard(tmp_path, how):
    run = tmp_path / "run"
    write_run(run)

    def ids(**options) -> list[str]:
        return [i for batch in ShardLoader(str(run), seed=3, batch_size=40, **options) for i in batch["id"].to_pylist()]

    # Intact, it reads what the cache reads: verifying changes nothing in what is read.
    direct = ids()
    assert direct == ids(cache_dir=str(tmp_path / "cache"))
    assert sorted(direct) == sorted(f"run-{s}-{j}" for s in range(3) for j in range(50))
    shard = _damage(run, how)
    with pytest.raises(YlinkError) as caught:
        ids()
    message = str(caught.value)
    assert "\n" not in message and str(run.resolve() / shard) in message, message
    assert ("bytes" if how == "truncated" else "sha256") in message, message


@pytest.mark.parametrize("how", ["truncated", "other-sha"])
def test_loader_without_cache_verifies_a_shard_over_http(tmp_path, how):
    run = tmp_path / "run"
    write_run(run)
    shard = _damage(run, how)
    with FileServer(tmp_path) as server:
        with pytest.raises(YlinkError) as caught:
            list(ShardLoader(server.url("run"), shuffle=False, batch_size=32))
        message = str(caught.value)
        assert "\n" not in message and server.url(f"run/{shard}") in message, message


def test_a_local_shard_is_hashed_once_per_process_whichever_loader_reads_it(tmp_path, monkeypatch):
    """TextDataset makes a loader per iter(), per worker and per state: the memo of verified files
    belongs to the process, keyed by the file's stamp, or every epoch would hash every shard again."""
    from ylink_data.torch import TextDataset

    run = tmp_path / "run"
    write_run(run)
    hashed: list[int] = []
    real = verified.sha256_file
    monkeypatch.setattr(verified, "sha256_file", lambda fd: hashed.append(fd) or real(fd))  # counts, hashes for real

    ds = TextDataset(str(run), seed=1, batch_size=40)
    for epoch in range(2):
        ds.set_epoch(epoch)
        assert sum(len(b["id"]) for b in ds) == 150
        ds.load_state_dict(ds.state_after(1))
        ds.state_dict()
    assert sum(len(b["id"]) for b in ShardLoader(str(run), batch_size=40)) == 150
    assert len(hashed) == 3, f"{len(hashed)} hashes of 3 unchanged shards"
    shard = run / "data" / "part-00001.parquet"
    shard.write_bytes(shard.read_bytes())   # the same bytes, written again: another file stamp
    ds.set_epoch(2)
    assert sum(len(b["id"]) for b in ds) == 150
    assert len(hashed) == 4, "a shard written again must be hashed again"


# -- the mount, through FUSE (skipped where FUSE cannot mount) ----------------------------------

@pytest.mark.parametrize("name", ["issue-entry", "percent-dotdot", "empty-sha"])
def test_mount_refuses_a_hostile_manifest(tmp_path, fuse_ok, name):
    entry, words = HOSTILE[name]
    run, mnt, cache = _hostile_run(tmp_path, entry), tmp_path / "mnt", tmp_path / "cache"
    mnt.mkdir()
    try:
        # a mount that starts would serve until stopped: 60 s is long enough to refuse
        message = one_line_error(ylink("cache", "mount", str(run), str(mnt), "--cache-dir", str(cache), timeout=60))
    finally:
        _force_unmount(mnt)
    _check_message(message, run, words)
    assert not _mounted(mnt) and not files_under(cache / "shards")
    _no_secret_in(cache)


@pytest.mark.parametrize("link", ["folder", "manifest"])
def test_mount_refuses_a_tier_linked_out_of_the_run(tmp_path, fuse_ok, link):
    """A tier's manifest is served as it lies: tiers/x (or tiers/x/manifest.json) as a symbolic link
    to another folder would serve that folder's manifest.json. Refused like a shard linked out."""
    elsewhere = tmp_path / "elsewhere"
    write_run(elsewhere)
    run, mnt, cache = tmp_path / "run", tmp_path / "mnt", tmp_path / "cache"
    manifest = write_run(run)
    manifest["tiers"] = {"x": {"path": "tiers/x", "rows": 0}}
    write_manifest(run, manifest)
    (run / "tiers").mkdir()
    if link == "folder":
        (run / "tiers" / "x").symlink_to(elsewhere)
    else:
        (run / "tiers" / "x").mkdir()
        (run / "tiers" / "x" / "manifest.json").symlink_to(elsewhere / "manifest.json")
    with pytest.raises(YlinkError) as caught:
        RunTree.load(str(run))
    message = str(caught.value)
    assert "tier 'x'" in message and "outside the run folder" in message and "\n" not in message, message
    mnt.mkdir()
    try:
        message = one_line_error(ylink("cache", "mount", str(run), str(mnt), "--cache-dir", str(cache), timeout=60))
    finally:
        _force_unmount(mnt)
    assert str(run.resolve() / "manifest.json") in message and "tier 'x'" in message, message
    assert "outside the run folder" in message and not _mounted(mnt)
