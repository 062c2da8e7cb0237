"""Watching the Ray cluster a run's tasks go to, so that losing it is one line and not a silent wait.

- The head node. A thread opens a TCP connection to the cluster's GCS (or, over Ray Client, to the
  head's client server) every second. Once it has not answered for `head_lost_after_s`, the driver
  ends with one line that says so and how to resume. It must be a thread and it must end the
  process: while the GCS is gone, Ray's calls in the main thread block, and after 60 s Ray
  terminates the process with a line of its own and no word of resuming.
- CPUs. `check_cpus`, called from the loop that waits for tasks, notices a cluster with no CPU
  left (every worker node lost; an autoscaler not yet done adding one): the progress line says the
  run waits, and after `ray.max_wait_for_cpus_s` the run stops with one line. Ray itself would wait
  for ever.

Either way the tasks that finished are kept, and rerunning the same command resumes."""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable

from ylink_data.core.errors import ClusterError
from ylink_data.core.redaction import redact_text
from ylink_data.engine.executors.ray.connect import probe

LOST_EXIT_CODE = 75  # EX_TEMPFAIL, as YLINK_FAIL_AFTER_TASKS: try again later and it resumes
PROBE_EVERY_S = 1.0
CPU_CHECK_EVERY_S = 2.0
# Ray's driver gives the GCS gcs_rpc_server_reconnect_timeout_s (60 s) to come back, then exits. A
# head that restarts (GCS fault tolerance) may be given longer; we speak 5 s before Ray would.
RAY_RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"
HEAD_LOST_AFTER_S = 15.0


def head_lost_after_s() -> float:
    configured = os.environ.get(RAY_RECONNECT_ENV)
    return max(float(configured) - 5, 1.0) if configured and configured.isdigit() else HEAD_LOST_AFTER_S


class ClusterWatch:
    """Watches the cluster this process is connected to (ray.init was called) for the driver."""

    def __init__(self, max_wait_for_cpus_s: float, notice: Callable[[str | None], None],
                 resume_hint: str, client_address: str | None = None):
        self.max_wait_for_cpus_s = max_wait_for_cpus_s
        self._notice = notice
        self._resume_hint = resume_hint
        self.head: str | None = client_address or _gcs_address()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_cpu_check = 0.0
        self._no_cpu_since: float | None = None

    def start(self) -> None:
        if not self.head:
            return  # a Ray Client connection this process made itself: its server's address is not known here
        self._thread = threading.Thread(target=self._watch_head, name="ylink-head-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _watch_head(self) -> None:
        lost_after = head_lost_after_s()
        answered = time.monotonic()
        while not self._stopped.wait(PROBE_EVERY_S):
            try:
                probe(self.head, PROBE_EVERY_S)
                answered = time.monotonic()
            except OSError:
                if time.monotonic() - answered >= lost_after and not self._stopped.is_set():
                    sys.stdout.flush()
                    print(f"\nylink: error: lost the Ray cluster: its head node at {self.head} has not answered for "
                          f"{lost_after:.0f} s; finished work is kept: {self._resume_hint} once the cluster is back",
                          file=sys.stderr, flush=True)
                    os._exit(LOST_EXIT_CODE)

    def check_cpus(self) -> None:
        """From the loop that waits for tasks (at most every CPU_CHECK_EVERY_S): tell while no node
        has a CPU, raise ClusterError once that lasted ray.max_wait_for_cpus_s."""
        import ray

        now = time.monotonic()
        if now < self._next_cpu_check:
            return
        self._next_cpu_check = now + CPU_CHECK_EVERY_S
        if ray.cluster_resources().get("CPU", 0) > 0:
            if self._no_cpu_since is not None:
                self._no_cpu_since = None
                self._notice(None)
            return
        if self._no_cpu_since is None:
            self._no_cpu_since = now
        waited = now - self._no_cpu_since
        limit = self.max_wait_for_cpus_s
        if waited >= limit:
            raise ClusterError(redact_text(
                f"no node of the Ray cluster at {self.head} has had a CPU for {waited:.0f} s "
                f"(ray.max_wait_for_cpus_s: {limit:g}): every worker node is gone; finished work is kept: "
                f"start worker nodes (ray start --address=...) and {self._resume_hint}"))
        self._notice(f"waiting for a CPU: no node of the Ray cluster has one "
                     f"({waited:.0f} of {limit:g} s, ray.max_wait_for_cpus_s)")


def _gcs_address() -> str | None:
    """The GCS this process reaches, None over Ray Client: the address its server gives may be one
    only the cluster's own nodes reach (and the client's server address is not known here)."""
    import ray
    from ray.util.client import ray as client

    return None if client.is_connected() else ray.get_runtime_context().gcs_address
