"""A real multi-node Ray cluster on this machine, started with the `ray` CLI and held to 127.0.0.1.

    with RayCliCluster(tmp_path_factory.mktemp("rc"), workers=2) as cluster:
        subprocess.run([..., "--set", f"ray.address={cluster.address}"], env=cluster.env)
        cluster.kill_worker(1)             # SIGKILL worker node 1: its raylet, agents and Ray workers
        assert cluster.non_loopback_sockets() == []
        cluster.start_worker(1)            # node 1 again, in a fresh temp dir

A head with 0 CPUs (`ray start --head --num-cpus=0 --block`) and `workers` nodes of 1 CPU each
(`ray start --address=... --num-cpus=1 --block`), each with its own `--temp-dir`, fresh free ports and a
small object store. Each `ray start --block` process stays in the foreground as this process's
child, so a node is exactly the process tree under it (gcs_server, raylet, agents, and the Ray
workers the raylet forks): `stop()`, `kill_worker()` and `kill_head()` end those trees by PID and
never run `ray stop` (which ends every Ray on the machine, other tests' included).

Loopback. `--node-ip-address=127.0.0.1` alone does not hold: Ray's CLI and `ray.init` pass every
"localhost" address through `ray._private.services.resolve_ip_for_localhost`, which replaces it with
the machine's own network address (`get_node_ip_address()`, the route towards 8.8.8.8), unless
`ray_constants.ENABLE_RAY_CLUSTER` is false, i.e. `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` in the
environment; then the node IP is 127.0.0.1 and the GCS, raylets, object managers and core workers
bind 127.0.0.1 (gRPC binds the node IP). So every process of the cluster, and the driver (`env`),
runs with `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`:
- the head is the `ray` executable itself;
- a worker node cannot be: with that setting the CLI refuses to start a non-head node ("Multi-node
  Ray clusters are not supported on Windows and OSX"), and without it its `--address=127.0.0.1:P`
  and `--node-ip-address=127.0.0.1` become the machine's address (Ray 2.60: `Local node IP:
  192.0.2.2`, then "Failed to connect to GCS at address 192.0.2.2:P"). So a worker node runs the
  CLI's own entry point (`ray.scripts.scripts.main`, what the `ray` executable calls) in a Python
  process that lets the multi-node guard pass and keeps loopback addresses as written
  (`_WORKER_CLI` below); every process it starts inherits RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0.
`non_loopback_sockets()` checks the result: every inet socket of every process of the cluster.

Per-node temp dirs: Ray 2.60 accepts `--temp-dir` on worker nodes (each node keeps its session,
sockets and logs there). Unix socket paths must stay under 108 bytes, so the temp dirs live under
`root` only when it is short (<= 40 characters); otherwise under a private folder in /tmp, removed
by `stop()`. Logs of the `ray start` processes are `root/<node>.log`.
"""
from __future__ import annotations

import atexit
import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psutil

__all__ = ["LOOPBACK_ENV", "RayCliCluster", "RayClusterError", "ray_cli"]

STARTUP_TIMEOUT_S = 60.0
OBJECT_STORE_BYTES = 100 * 1024 * 1024
#: The environment of every process of the cluster and of its drivers (see the module docstring).
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
#: A killed node is found dead by the GCS's health checks: every 1 s, dead after 5 misses (Ray's
#: defaults, 3 s x 5, make a node loss cost 15 s or more of a test).
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 5}
_MAX_TEMP_ROOT = 40  # + "/w1-0/session_<date>_<time>_<us>_<pid>/sockets/plasma_store" stays under 108 bytes

# `ray start` for a worker node, held to loopback. The `ray` CLI's own entry point; two changes in
# this process only: the CLI's guard against multi-node clusters on Windows/macOS, which reads
# ENABLE_RAY_CLUSTER (false here: RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), passes, and
# resolve_ip_for_localhost keeps 127.0.0.1 as it does when ENABLE_RAY_CLUSTER is false.
_WORKER_CLI = """
import sys
from ray._private import ray_constants, services
from ray._common.network_utils import get_localhost_ip, is_localhost
ray_constants.ENABLE_RAY_CLUSTER = True
services.resolve_ip_for_localhost = lambda host: get_localhost_ip() if is_localhost(host) else host
from ray.scripts.scripts import main
sys.argv[0] = "ray"
sys.exit(main())
"""


class RayClusterError(RuntimeError):
    """A node of the cluster did not start in time (the message holds the tail of its log)."""


def ray_cli() -> str | None:
    """The `ray` executable next to this Python (the venv's bin/), else on PATH; None if absent."""
    candidate = Path(sys.executable).parent / "ray"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("ray")


@dataclass
class _Node:
    name: str  # "head", "w1-0" (worker 1, first start), ...
    temp_dir: Path
    log: Path
    proc: subprocess.Popen
    raylet: int | None = None  # the raylet's PID, once up
    pids: set[int] = field(default_factory=set)  # every PID seen in its tree (for stop after a crash)


def _free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (all held until every one is chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tree(pids) -> dict[int, psutil.Process]:
    """The processes `pids` that are alive and still the ones first seen with these PIDs, and all
    their descendants, by PID."""
    found: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if not _same_process(proc):
                continue
            found[pid] = proc
            for child in proc.children(recursive=True):
                if _same_process(child):
                    found[child.pid] = child
        except psutil.Error:
            continue
    return found


def _is_loopback(ip: str) -> bool:
    """127.0.0.1 only (also as the IPv4-mapped ::ffff:127.0.0.1 that gRPC's dual-stack sockets show)."""
    try:
        addr = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return str(addr) == "127.0.0.1"


def _set_parent_death_signal() -> None:
    """In the child before exec: SIGTERM it when the test process dies, so that a killed pytest does
    not leave the cluster running (`ray start --block` then ends its node)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class RayCliCluster:
    """A head (0 CPUs) and `workers` worker nodes (1 CPU each) started with the `ray` CLI, on
    127.0.0.1 only. Use as a context manager, or call `start()` and `stop()`.

    - `address`: the GCS, "127.0.0.1:PORT" (`ray.address` of a driver run with `env`)
    - `client_address`: the head's Ray Client server, "ray://127.0.0.1:PORT"
    - `env`: the environment a driver subprocess needs to stay on loopback
    - `worker_pids(i)`, `kill_worker(i)`, `start_worker(i)`, `kill_head()`
    - `non_loopback_sockets(*pids)`: sockets of the cluster's processes (and of `pids`' trees) that
      are not on 127.0.0.1; [] when everything stays on loopback
    - `stop()`: ends only the processes this object started
    Worker nodes are numbered from 1.
    """

    def __init__(self, root: Path | str, workers: int = 2, *, object_store_bytes: int = OBJECT_STORE_BYTES,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, system_config: dict | None = None):
        self.root = Path(root)
        self.workers = workers
        self.object_store_bytes = object_store_bytes
        self.startup_timeout_s = startup_timeout_s
        self.system_config = {**HEALTH_CHECKS, **(system_config or {})}
        self._ray = ray_cli()
        self._private_temp: Path | None = None
        self._head: _Node | None = None
        self._workers: dict[int, _Node] = {}
        self._starts: dict[int, int] = {}
        self._dead: list[_Node] = []  # killed nodes, for stop() to make sure of
        self.gcs_port = self.client_port = 0

    # ----------------------------------------------------------------------------------- start
    def __enter__(self) -> RayCliCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def client_address(self) -> str:
        return f"ray://127.0.0.1:{self.client_port}"

    @property
    def env(self) -> dict[str, str]:
        """os.environ with the settings that keep Ray on loopback and without RAY_ADDRESS."""
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        return {**env, **LOOPBACK_ENV}

    def start(self) -> RayCliCluster:
        """Start the head, then every worker node; returns once each is alive in the GCS (or raises
        RayClusterError after `startup_timeout_s` per node, having stopped what it started)."""
        if self._ray is None:
            import pytest

            pytest.skip("the `ray` CLI is not installed")
        self.root.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            self._start_head()
            for i in range(1, self.workers + 1):
                self.start_worker(i)
        except BaseException:
            self.stop()
            raise
        return self

    def _temp_root(self) -> Path:
        if len(str(self.root.resolve())) <= _MAX_TEMP_ROOT:
            return self.root.resolve()
        if self._private_temp is None:
            self._private_temp = Path(tempfile.mkdtemp(prefix="raycli-", dir="/tmp"))
        return self._private_temp

    def _start_head(self) -> None:
        gcs, client, dash, agent_http, agent_grpc, env_agent, metrics = _free_ports(7)
        temp = self._temp_root() / "head"
        temp.mkdir(parents=True, exist_ok=True)
        args = [self._ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs}",
                f"--ray-client-server-port={client}", "--num-cpus=0", f"--object-store-memory={self.object_store_bytes}",
                f"--temp-dir={temp}", "--include-dashboard=false", f"--dashboard-port={dash}",
                f"--dashboard-agent-listen-port={agent_http}", f"--dashboard-agent-grpc-port={agent_grpc}",
                f"--runtime-env-agent-port={env_agent}", f"--metrics-export-port={metrics}", "--disable-usage-stats",
                f"--system-config={json.dumps(self.system_config)}"]
        self.gcs_port, self.client_port = gcs, client
        self._head = self._launch("head", temp, args)
        self._wait_alive(self._head)

    def start_worker(self, i: int) -> None:
        """Start worker node `i` (1..workers), again after `kill_worker(i)` (in a fresh temp dir);
        nothing if it runs. Returns once it is alive in the GCS."""
        if not 1 <= i <= self.workers:
            raise ValueError(f"worker nodes are numbered 1..{self.workers}, not {i}")
        node = self._workers.get(i)
        if node is not None and node.proc.poll() is None:
            return
        k = self._starts[i] = self._starts.get(i, -1) + 1
        temp = self._temp_root() / f"w{i}-{k}"
        temp.mkdir(parents=True, exist_ok=True)
        agent_http, agent_grpc, env_agent, metrics = _free_ports(4)
        args = [sys.executable, "-c", _WORKER_CLI, "start", "--block", f"--address={self.address}",
                "--node-ip-address=127.0.0.1", "--num-cpus=1", f"--object-store-memory={self.object_store_bytes}",
                f"--temp-dir={temp}", f"--dashboard-agent-listen-port={agent_http}",
                f"--dashboard-agent-grpc-port={agent_grpc}", f"--runtime-env-agent-port={env_agent}",
                f"--metrics-export-port={metrics}", "--disable-usage-stats"]
        self._workers[i] = self._launch(f"w{i}-{k}", temp, args)
        self._wait_alive(self._workers[i])

    def _launch(self, name: str, temp: Path, args: list[str]) -> _Node:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=self.env, start_new_session=True, preexec_fn=_set_parent_death_signal)
        return _Node(name, temp, log, proc)

    def _wait_alive(self, node: _Node) -> None:
        """Until the GCS lists `node` (by its temp dir) as alive and its raylet runs."""
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                raise RayClusterError(f"`ray start` of node {node.name} exited with {node.proc.returncode}:\n"
                                      f"{self._log_tail(node)}")
            tree = _tree([node.proc.pid])
            node.pids.update(tree)
            raylets = [p.pid for p in tree.values() if _name(p) == "raylet"]
            if raylets and self._alive_in_gcs(node):
                node.raylet = raylets[0]
                return
            time.sleep(0.2)
        raise RayClusterError(f"node {node.name} was not up after {self.startup_timeout_s:.0f} s:\n{self._log_tail(node)}")

    def _alive_in_gcs(self, node: _Node) -> bool:
        from ray._raylet import GcsClient
        from ray.core.generated.gcs_pb2 import GcsNodeInfo

        try:
            infos = GcsClient(address=self.address).get_all_node_info(
                timeout=2, state_filter=GcsNodeInfo.GcsNodeState.ALIVE).values()
        except Exception:  # the GCS is not answering yet
            return False
        return any(Path(info.temp_dir).resolve() == node.temp_dir.resolve() for info in infos)

    @staticmethod
    def _log_tail(node: _Node, chars: int = 3000) -> str:
        try:
            return node.log.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"<no log: {exc}>"

    # ----------------------------------------------------------------------------------- processes
    def _node_processes(self, node: _Node) -> dict[int, psutil.Process]:
        """The `ray start` process of `node` and its tree, the raylet's tree if the former is gone,
        and any process whose command line names the node's temp dir (a worker left behind)."""
        roots = [node.proc.pid] + ([node.raylet] if node.raylet else [])
        found = _tree(roots)
        temp = str(node.temp_dir)
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error, TypeError):
                if proc.pid not in found and any(temp in arg for arg in proc.info["cmdline"] or ()):
                    found[proc.pid] = proc
        node.pids.update(found)
        # A PID is only ours while the process is the one we saw: drop reused PIDs of dead nodes.
        return {pid: p for pid, p in found.items() if _same_process(p)}

    def worker_pids(self, i: int) -> list[int]:
        """The PIDs of worker node i: its `ray start`, raylet, agents, log monitor and the Ray
        worker processes its raylet spawned."""
        return sorted(self._node_processes(self._worker(i)))

    def kill_worker(self, i: int) -> dict[int, str]:
        """SIGKILL every process of worker node i; returns {pid: name} of those that were alive
        (the raylet's name is "raylet", Ray workers' "ray::..."). Waits until they are gone."""
        node = self._worker(i)
        killed = self._kill(node)
        self._dead.append(node)
        return killed

    def kill_head(self) -> dict[int, str]:
        """SIGKILL every process of the head node (GCS, raylet, Ray Client server...)."""
        if self._head is None:
            return {}
        killed = self._kill(self._head)
        self._dead.append(self._head)
        return killed

    @contextlib.contextmanager
    def stopped_gcs(self) -> Iterator[int]:
        """SIGSTOP the head's GCS process for the block (its port still accepts connections: the
        kernel does that), SIGCONT it on the way out; yields its PID."""
        [gcs] = [p for p in self._node_processes(self._head).values() if _name(p) == "gcs_server"]
        gcs.send_signal(signal.SIGSTOP)
        try:
            yield gcs.pid
        finally:
            with contextlib.suppress(psutil.Error):
                gcs.send_signal(signal.SIGCONT)

    def _kill(self, node: _Node) -> dict[int, str]:
        # Stop the tree first, so that no process forks a new one between listing and killing; only
        # the tree here (fast: the kill lands when the caller decided), then any leftover by temp dir.
        procs = _tree([node.proc.pid] + ([node.raylet] if node.raylet else []))
        for p in procs.values():
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGSTOP)
        procs.update(_tree(procs))
        names = {pid: _name(p) for pid, p in procs.items()}
        killed = {}
        for pid, p in procs.items():
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGKILL)
                killed[pid] = names[pid]
        node.pids.update(procs)
        for pid, p in self._node_processes(node).items():
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGKILL)
                procs[pid] = p
        with contextlib.suppress(Exception):
            node.proc.wait(timeout=10)  # reap our own child
        _wait_dead(procs.values())
        return killed

    def _worker(self, i: int) -> _Node:
        if i not in self._workers:
            raise ValueError(f"no worker node {i} (worker nodes: {sorted(self._workers)})")
        return self._workers[i]

    def _all_nodes(self) -> list[_Node]:
        return [n for n in [self._head, *self._workers.values(), *self._dead] if n is not None]

    def non_loopback_sockets(self, *pids: int) -> list[str]:
        """Every inet socket of the cluster's processes (and of the trees of `pids`, e.g. a driver)
        whose local or remote address is not 127.0.0.1 (listening on 0.0.0.0 or :: counts), as
        "pid name local -> remote status"."""
        procs: dict[int, psutil.Process] = {}
        for node in self._all_nodes():
            procs.update(self._node_processes(node))
        procs.update(_tree(pids))
        bad = []
        for pid, proc in sorted(procs.items()):
            try:
                conns = proc.net_connections(kind="inet")
            except psutil.Error:
                continue
            for c in conns:
                remote = f"{c.raddr.ip}:{c.raddr.port}" if c.raddr else ""
                if not _is_loopback(c.laddr.ip) or (c.raddr and not _is_loopback(c.raddr.ip)):
                    bad.append(f"{pid} {_name(proc)} {c.laddr.ip}:{c.laddr.port} -> {remote} {c.status}")
        return bad

    # ----------------------------------------------------------------------------------- stop
    def stop(self) -> None:
        """SIGKILL every process this cluster started (its nodes' trees, nothing else); idempotent."""
        procs: dict[int, psutil.Process] = {}
        for node in self._all_nodes():
            procs.update(self._node_processes(node))
            procs.update(_tree(node.pids))
        for p in procs.values():
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGKILL)
        for node in self._all_nodes():
            with contextlib.suppress(Exception):
                node.proc.wait(timeout=10)  # reap our own children
        _wait_dead(procs.values())
        self._dead.extend(n for n in [self._head, *self._workers.values()] if n is not None)
        self._head, self._workers = None, {}
        if self._private_temp is not None:
            shutil.rmtree(self._private_temp, ignore_errors=True)
            self._private_temp = None
        atexit.unregister(self.stop)


def _wait_dead(procs, timeout: float = 10.0) -> None:
    """Until every process of `procs` is gone or a zombie (dead, waiting for init to reap it)."""
    deadline = time.monotonic() + timeout
    left = list(procs)
    while left and time.monotonic() < deadline:
        alive = []
        for p in left:
            with contextlib.suppress(psutil.Error):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
        left = alive
        if left:
            time.sleep(0.02)


_STARTED: dict[int, float] = {}  # pid -> create_time of the processes seen, to detect PID reuse


def _same_process(proc: psutil.Process) -> bool:
    """Whether `proc` is still the process first seen with its PID (not a later one reusing it)."""
    try:
        created = proc.create_time()
    except psutil.Error:
        return False
    return _STARTED.setdefault(proc.pid, created) == created


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"
