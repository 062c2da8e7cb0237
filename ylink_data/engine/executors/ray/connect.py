"""Ray, one way: `ray.address: null` starts an embedded single-machine Ray (no set-up); "auto",
"host:port" or "ray://host:port" joins a cluster. A process that already has Ray initialised keeps
using it.

Joining a cluster fails in one line that names the address and the fix (no such host, refused, no
cluster running for "auto", another Ray version), and before a run writes anything: `Runner.run`
connects before it plans, and `ylink validate` connects too."""
from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass

from ylink_data.engine.config import RayConfig
from ylink_data.core.errors import ClusterError

EMBEDDED_OBJECT_STORE = 512 * 1024 * 1024  # data moves through files, not the object store
CLIENT_PREFIX = "ray://"
CONNECT_TIMEOUT_S = 5.0
CLIENT_ATTEMPTS = 3  # connections through Ray Client, when its proxy fails to start a server
START_HINT = "start it (`ray start --head` on the head node), or set ray.address: null to run on this machine"


def ensure_ray(cfg: RayConfig) -> Target | None:
    """Connect this process to Ray as `cfg` says; the cluster joined (None: embedded, or Ray was
    already initialised)."""
    import ray

    if ray.is_initialized():
        return None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    common = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True)
    if cfg.address:
        return connect(cfg.address, **common)
    else:
        # An embedded Ray listens on loopback only and lives as long as this process: no token.
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        # "local" always starts a private instance: a bare ray.init() would join any cluster this
        # machine happens to run (`ray start`, another test's cluster), which is not what null means.
        ray.init(address="local", num_cpus=cfg.num_cpus, object_store_memory=cfg.object_store_memory or EMBEDDED_OBJECT_STORE,
                 **common)
        return None


def connect(address: str, **init_args) -> Target:
    """ray.init(address) for a cluster, every failure one line (ClusterError): Ray's own are tracebacks,
    or a minute of retries against an address that cannot answer."""
    import ray

    target = reachable(address)
    if target.client:
        try:
            import grpc  # noqa: F401 -- what Ray Client needs (the ray[client] extra)
        except ImportError:
            raise ClusterError(f"ray.address {address}: Ray Client needs grpcio, which is not installed here; "
                               "pip install 'ray[client]' (ylink-data's own install has it)") from None
    for attempt in range(CLIENT_ATTEMPTS if target.client else 1):
        try:
            ray.init(address=address, **init_args)
            return target
        except Exception as exc:  # every way a connection fails: one line, whatever Ray raised
            with contextlib.suppress(Exception):
                ray.shutdown()  # a half-made connection would otherwise be reused, or kept alive at exit
            text = " ".join(str(exc).split()) or type(exc).__name__
            # Ray Client's proxy starts a server process per connection; on a busy head that start
            # can fail ("Initialization failure from server"), and the next connection's succeed.
            if "Initialization failure from server" in text and attempt + 1 < CLIENT_ATTEMPTS:
                time.sleep(2.0 * (attempt + 1))
                continue
            break
    if "version" in text.lower():
        fix = "run ylink with the same Ray and Python versions as the cluster (ray --version on its head)"
    else:
        fix = f"check that the cluster at {target.hostport} is up and that ray.address names it"
    raise ClusterError(f"ray.address {address}: cannot connect to the Ray cluster: {text[:300]}; {fix}") from None


@dataclass(frozen=True)
class Target:
    """What ray.address points at: `hostport` (a GCS, or a Ray Client server when `client`)."""
    hostport: str
    client: bool


def reachable(address: str) -> Target:
    """Resolve `address` ("auto", "host:port", "ray://host:port") and open a TCP connection to it
    (closed at once), or raise ClusterError saying why not: seconds, not Ray's minute of retries."""
    shown = address
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS") or _last_started_cluster()
        if not address:
            raise ClusterError(f"ray.address auto: no Ray cluster is running on this machine (nor named by "
                               f"RAY_ADDRESS); {START_HINT}")
        shown = f"auto ({address})"
    client = address.startswith(CLIENT_PREFIX)
    hostport = address[len(CLIENT_PREFIX):] if client else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterError(f"ray.address {shown}: not HOST:PORT, ray://HOST:PORT or auto")
    try:
        probe(hostport, CONNECT_TIMEOUT_S)
    except socket.gaierror:
        raise ClusterError(f"ray.address {shown}: no such host {host!r}; correct the host name in ray.address") from None
    except OSError as exc:
        why = "refused" if isinstance(exc, ConnectionRefusedError) else str(exc) if isinstance(exc, HungServer) else (
            f"no answer in {CONNECT_TIMEOUT_S:.0f} s" if isinstance(exc, TimeoutError) else exc.strerror or str(exc))
        what = "Ray Client server (`ray start --head` listens on 10001)" if client else "Ray cluster (GCS)"
        raise ClusterError(f"ray.address {shown}: no {what} answers at {hostport} ({why}); {START_HINT}") from None
    return Target(hostport, client)


def probe(hostport: str, timeout: float) -> None:
    """Open a TCP connection to HOST:PORT and say hello as an HTTP/2 client (what a gRPC server, a
    GCS or a Ray Client server, speaks first); OSError unless the server answers within `timeout`
    each. The connection alone proves nothing: the kernel accepts it for a process that is stopped
    (SIGSTOP) or hung. No RPC is made: a Ray Client server starts a session for each call."""
    host, _, port = hostport.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as conn:
        conn.sendall(HTTP2_HELLO)
        try:
            conn.recv(1)  # its SETTINGS frame, or a TLS server's alert, or its close: any answer will do
        except ConnectionResetError:
            return  # an answer too: only a running process resets a connection
        except TimeoutError:
            raise HungServer(f"it accepts connections but answers nothing in {timeout:g} s: "
                             "its process is hung or stopped") from None


# The HTTP/2 client connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5): a server
# answers with a SETTINGS frame of its own.
HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


class HungServer(TimeoutError):
    """A server that accepts connections (the kernel does that) but answers nothing."""


def alive_nodes(with_cpus: bool = False) -> list[dict]:
    """The cluster's live nodes (ray.nodes()), or only those that run tasks (a CPU or more)."""
    import ray

    return [n for n in ray.nodes() if n.get("Alive") and (not with_cpus or n.get("Resources", {}).get("CPU", 0) > 0)]


def _last_started_cluster() -> str | None:
    """The GCS address of the last `ray start` on this machine, as ray.init("auto") finds it."""
    try:
        from ray._private.utils import read_ray_address
    except ImportError:  # moved in another Ray version: let ray.init look for itself
        return None
    return read_ray_address(None)


def cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def cluster_summary() -> str:
    """The cluster this process joined, in a few words (for `ylink validate`)."""
    import ray

    nodes = alive_nodes()
    cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)
    with_cpus = len(alive_nodes(with_cpus=True))
    summary = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}, {with_cpus} with CPUs ({cpus:g} CPUs), Ray {ray.__version__}"
    return summary + ("; no CPU yet: a run would wait for worker nodes (ray.max_wait_for_cpus_s)" if not cpus else "")
