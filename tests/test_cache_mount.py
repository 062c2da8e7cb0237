"""`ylink cache mount`: a real run (the pipeline over the bundled crawl, 11 shards of about 30 kB) on
the real S3 server, mounted by the `ylink` command in its own process, read by plain pyarrow.

Skipped, with the reason, where FUSE cannot mount here: no /dev/fuse, no fusermount3, no libfuse3
or mfusepy, or a trial mount of a trivial file system fails (a container without SYS_ADMIN). Every
mount is unmounted in teardown (`fusermount3 -u -z`), whatever the test did."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import ylink_data
from ylink_data.cache import ShardCache, run_shards
from ylink_data.text.tokens.load import load_tokenizer

from .conftest import quickstart_config
from .s3server import s3_server
from .shardruns import crawl_documents
from .tokenruns import crawl_tokenizer, write_token_run

RUN_URL = "s3://runs/r1"

_TRIAL_FS = textwrap.dedent("""
    import sys, mfusepy
    class Empty(mfusepy.Operations):
        use_ns = True
        def getattr(self, path, fh=None):
            if path == "/":
                return {"st_mode": 0o40555, "st_nlink": 2}
            raise mfusepy.FuseOSError(2)
        def readdir(self, path, fh):
            return [".", ".."]
    mfusepy.FUSE(Empty(), sys.argv[1], foreground=True, ro=True)
""")


def _mounted(path: Path) -> bool:
    """Whether /proc/mounts lists `path` (read here, not through the code under test)."""
    target = str(path.resolve()) if path.exists() else str(path)
    with open("/proc/mounts") as f:
        return any(line.split()[1].replace("\\040", " ") == target for line in f if len(line.split()) > 1)


def _force_unmount(path: Path) -> None:
    if _mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


@pytest.fixture(scope="module")
def fuse_ok(tmp_path_factory) -> None:
    """Skips the module unless a FUSE file system can be mounted here (a trial mount, then unmount)."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("FUSE cannot mount here: /dev/fuse is missing")
    if shutil.which("fusermount3") is None:
        pytest.skip("FUSE cannot mount here: fusermount3 is missing (apt-get install fuse3)")
    try:
        import mfusepy  # noqa: F401 -- loads libfuse3
    except ImportError:
        pytest.skip("the mfusepy package is not installed (pip install mfusepy)")
    except OSError as exc:
        pytest.skip(f"FUSE cannot mount here: libfuse3 cannot be loaded: {exc}")
    mnt = tmp_path_factory.mktemp("trial-mnt")
    proc = subprocess.Popen([sys.executable, "-c", _TRIAL_FS, str(mnt)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 10
        while not _mounted(mnt) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _mounted(mnt):
            _stop(proc)
            tail = (proc.stdout.read() or "").strip().splitlines()[-1:] if proc.stdout else []
            pytest.skip(f"FUSE cannot mount here: a trial mount failed ({' '.join(tail) or 'no message'})")
    finally:
        _force_unmount(mnt)
        _stop(proc)
        if proc.stdout:
            proc.stdout.close()


@pytest.fixture(scope="module")
def run_dir(fuse_ok, ray_session, tmp_path_factory) -> Path:
    """A real run of the pipeline over the bundled crawl, with small shards (11 of about 30 kB)."""
    cfg = quickstart_config(tmp_path_factory.mktemp("crawl") / "run", output__shard_bytes=30_000,
                            input__split_bytes=100_000)
    cfg["stages"] = [{"extract": {}}, {"exact_dedup": {}}]
    path, _ = ylink_data.run(cfg)
    return Path(path)


@pytest.fixture(scope="module")
def s3(run_dir, tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        server.upload_folder(run_dir, "runs/r1")
        yield server


@pytest.fixture
def manifest(run_dir) -> dict:
    data = json.loads((run_dir / "manifest.json").read_text())
    assert len(data["shards"]) >= 3, "the run should have several shards"
    return data


class Mount:
    def __init__(self, proc: subprocess.Popen, mnt: Path, cache_dir: Path, log: Path):
        self.proc, self.mnt, self.cache_dir, self.log = proc, mnt, cache_dir, log

    def downloads(self) -> list[dict]:
        path = self.cache_dir / "downloads.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Mounts:
    """Starts `ylink cache mount URL MNT --cache-dir DIR` (a fresh cache each) and waits until it
    serves; `stop_all` stops and unmounts every one, whatever happened."""

    def __init__(self, tmp_path: Path, storage_options: dict | None = None):
        self.tmp_path, self.storage_options, self.started = tmp_path, storage_options, []
        ylink = Path(sys.executable).parent / "ylink"
        self.command = [str(ylink)] if ylink.exists() else [sys.executable, "-m", "ylink_data.cli"]

    def start(self, url: str = RUN_URL) -> Mount:
        n = len(self.started)
        mnt, cache_dir, log = self.tmp_path / f"mnt{n}", self.tmp_path / f"cache{n}", self.tmp_path / f"mount{n}.log"
        mnt.mkdir()
        options = ["--storage-options", json.dumps(self.storage_options)] if self.storage_options else []
        with open(log, "wb") as out:
            proc = subprocess.Popen(self.command + ["cache", "mount", url, str(mnt), "--cache-dir", str(cache_dir),
                                                    *options],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        m = Mount(proc, mnt, cache_dir, log)
        self.started.append(m)
        deadline = time.monotonic() + 30
        while "serving" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "serving" in log.read_text(), f"the mount did not start:\n{log.read_text()}"
        assert _mounted(mnt)
        return m

    def stop_all(self) -> None:
        for m in self.started:
            try:
                _stop(m.proc)
            finally:
                _force_unmount(m.mnt)
        for m in self.started:
            assert "Traceback" not in m.log.read_text(), m.log.read_text()


@pytest.fixture
def mount(s3, tmp_path):
    """`mount()` serves s3://runs/r1 (or another URL on the same server) from a fresh cache."""
    mounts = Mounts(tmp_path, s3.storage_options())
    yield mounts.start
    mounts.stop_all()


def _pin_is_free(cache_dir: Path, ref) -> bool:
    """Whether no process pins `ref` (its pin lock can be taken exclusively)."""
    pin = cache_dir / "locks" / f"{ShardCache.key(ref)}.pin"
    if not pin.exists():
        return True
    fd = os.open(pin, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _wait(predicate, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_layout_comes_from_the_manifest_alone_and_is_read_only(mount, run_dir, manifest):
    m = mount()
    names = [Path(s["path"]).name for s in manifest["shards"]]
    assert sorted(os.listdir(m.mnt)) == ["data", "manifest.json"]
    assert sorted(os.listdir(m.mnt / "data")) == sorted(names)
    for shard in manifest["shards"]:
        st = os.stat(m.mnt / shard["path"])
        assert st.st_size == shard["bytes"]
        assert oct(st.st_mode & 0o777) == oct(0o444)
    assert (m.mnt / "manifest.json").read_bytes() == (run_dir / "manifest.json").read_bytes()
    assert not (m.mnt / "stats.json").exists()

    shard = m.mnt / manifest["shards"][0]["path"]
    attempts = [
        lambda: open(m.mnt / "data" / "new.parquet", "wb"),
        lambda: open(shard, "r+b"),
        lambda: open(m.mnt / "manifest.json", "ab"),
        lambda: os.remove(shard),
        lambda: os.rename(shard, m.mnt / "data" / "moved.parquet"),
        lambda: os.mkdir(m.mnt / "more"),
        lambda: os.truncate(shard, 0),
        lambda: os.chmod(shard, 0o644),
    ]
    for attempt in attempts:
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EROFS, info.value
    assert os.stat(shard).st_size == manifest["shards"][0]["bytes"]
    assert m.downloads() == [], "listing, stat and refused writes must not download shards"




def test_reading_one_shard_pins_it_and_prefetches_the_next(mount, run_dir, manifest, s3):
    m = mount()
    first = manifest["shards"][0]["path"]
    assert pq.read_table(m.mnt / first).equals(pq.read_table(run_dir / first))

    refs = run_shards(RUN_URL, s3.storage_options())
    cache = ShardCache(m.cache_dir)
    assert cache.contains(refs[0]) and cache.verify(refs[0])
    # Nothing opened the other shards: the prefetcher fetched them (the default window, 2 GiB, holds
    # the whole run), in the mount's process.
    assert _wait(lambda: all(cache.contains(ref) for ref in refs[1:])), m.downloads()
    fetched = {d["url"]: d for d in m.downloads()}
    assert set(fetched) == {ref.url for ref in refs}
    assert {d["pid"] for d in fetched.values()} == {m.proc.pid}

    # An open file pins its shard (eviction cannot take it); closing it unpins it (FUSE sends the
    # release after close returns, hence the wait).
    with open(m.mnt / first, "rb") as f:
        assert f.read(4) == b"PAR1"
        assert not _pin_is_free(m.cache_dir, refs[0])
    assert _wait(lambda: _pin_is_free(m.cache_dir, refs[0]), 10)


def test_a_dataset_over_the_mount_reads_every_row(mount, run_dir, manifest):
    m = mount()
    table = pads.dataset(str(m.mnt / "data"), format="parquet").to_table()
    expected = ylink_data.open_run(str(run_dir)).to_arrow()
    assert table.num_rows == expected.num_rows == sum(s["rows"] for s in manifest["shards"])
    assert table.sort_by("id").equals(expected.sort_by("id"))
    assert len(m.downloads()) == len(manifest["shards"])


def test_tiers_are_served_at_their_paths(mount, run_dir, tmp_path):
    """A run with output tiers (laid out by hand from the real shards, as the runner writes one):
    each tier folder is served with its own manifest, so it reads as a run of its own."""
    run = json.loads((run_dir / "manifest.json").read_text())
    tiered = tmp_path / "tiered"
    shards, tiers = [], {}
    for i, shard in enumerate(run["shards"]):
        tier = "hq" if i % 2 == 0 else "lq"
        rel = f"tiers/{tier}/data/part-{len([s for s in shards if s['tier'] == tier]):05d}.parquet"
        (tiered / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run_dir / shard["path"], tiered / rel)
        shards.append({**shard, "path": rel, "tier": tier})
    for tier in ("hq", "lq"):
        own = [{k: v for k, v in s.items() if k != "tier"} | {"path": s["path"][len(f"tiers/{tier}/"):]}
               for s in shards if s["tier"] == tier]
        rows = sum(s["rows"] for s in own)
        (tiered / "tiers" / tier / "manifest.json").write_text(
            json.dumps({**run, "tier": tier, "rows": rows, "shards": own}))
        tiers[tier] = {"path": f"tiers/{tier}", "rows": rows}
    (tiered / "manifest.json").write_text(json.dumps({**run, "shards": shards, "tiers": tiers}))

    m = mount(str(tiered))
    assert sorted(os.listdir(m.mnt)) == ["manifest.json", "tiers"]
    assert sorted(os.listdir(m.mnt / "tiers")) == ["hq", "lq"]
    assert sorted(os.listdir(m.mnt / "tiers" / "hq")) == ["data", "manifest.json"]
    for tier in ("hq", "lq"):
        assert (m.mnt / "tiers" / tier / "manifest.json").read_bytes() == \
            (tiered / "tiers" / tier / "manifest.json").read_bytes()
    hq = ylink_data.open_run(str(m.mnt / "tiers" / "hq")).to_arrow()
    assert hq.num_rows == tiers["hq"]["rows"]
    assert hq.sort_by("id").equals(ylink_data.open_run(str(tiered / "tiers" / "hq")).to_arrow().sort_by("id"))
    # Opening hq's first shard prefetched hq's others, not lq's (the next shards in its folder).
    assert _wait(lambda: len(m.downloads()) >= len(os.listdir(tiered / "tiers" / "hq" / "data")))
    time.sleep(0.3)
    assert {Path(d["url"]).parent.parent.name for d in m.downloads()} == {"hq"}


@pytest.mark.parametrize("file_open", [False, True], ids=["idle", "file-open"])
def test_sigterm_unmounts(mount, manifest, run_dir, file_open):
    m = mount()
    shard = m.mnt / manifest["shards"][1]["path"]
    assert shard.read_bytes()[:4] == b"PAR1"
    held = os.open(shard, os.O_RDONLY) if file_open else None
    try:
        m.proc.send_signal(signal.SIGTERM)
        assert m.proc.wait(20) == 0, m.log.read_text()
        assert not _mounted(m.mnt), "the mount is still listed in /proc/mounts"
        assert os.listdir(m.mnt) == []
        if held is not None:
            # The connection is gone: a read fails with ENOTCONN, or is answered from the kernel's page
            # cache (shards never change, so the mount lets it keep pages) -- never with wrong bytes.
            try:
                data = os.pread(held, 1 << 20, 0)
            except OSError as exc:
                assert exc.errno == errno.ENOTCONN
            else:
                assert data == (run_dir / manifest["shards"][1]["path"]).read_bytes()[:len(data)] and data
    finally:
        if held is not None:
            with contextlib.suppress(OSError):  # ENOTCONN: the flush on close cannot reach the mount
                os.close(held)
    assert "unmounted" in m.log.read_text()


# -- Megatron files (issue 14) ------------------------------------------------------------------

def _indexed_dataset(prefix: str):
    with warnings.catch_warnings():  # megatron-core warns that Apex/Transformer Engine are absent (CPU)
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    return IndexedDataset(prefix)


def test_megatron_files_are_served_for_megatron_to_read_by_path(fuse_ok, tmp_path):
    """A real token run (tokenruns: crawl documents, real BPE) on local disk: the mount shows its
    .bin/.idx byte for byte and a data-path.txt naming them under the mount, and megatron-core's own
    IndexedDataset reads every document through it, equal to the tokenizer's ids."""
    run = tmp_path / "tokens" / "run"
    counts = [4, 6, 2]
    manifest = write_token_run(run, counts)
    files = manifest["megatron"]["files"]
    mounts = Mounts(tmp_path / "mounts")
    (tmp_path / "mounts").mkdir()
    try:
        m = mounts.start(str(run))
        names = [Path(f[kind]["path"]).name for f in files for kind in ("bin", "idx")]
        assert sorted(os.listdir(m.mnt)) == ["manifest.json", "megatron"]
        assert sorted(os.listdir(m.mnt / "megatron")) == sorted(names + ["data-path.txt"])
        for f in files:
            for kind in ("bin", "idx"):
                served = m.mnt / f[kind]["path"]
                assert os.stat(served).st_size == f[kind]["bytes"]
                assert served.read_bytes() == (run / f[kind]["path"]).read_bytes()
        words = (m.mnt / "megatron" / "data-path.txt").read_text().split()
        assert words == [w for f in files for w in (str(f["tokens"]), str(m.mnt / f["prefix"]))]

        tok = load_tokenizer(str(crawl_tokenizer(run.parent / "tokenizer")))
        docs, at = crawl_documents(), 0
        for (_, prefix), n in zip(zip(words[::2], words[1::2]), counts):
            dataset = _indexed_dataset(prefix)  # by path, through the mount
            assert len(dataset) == n
            for i in range(n):
                assert dataset[i].tolist() == tok.tokenizer.encode(docs[at + i]).ids + [tok.eod_id]
            at += n
        assert {Path(d["url"]).name for d in m.downloads()} == set(names)
    finally:
        mounts.stop_all()
