"""On Ray: a bounded number of tasks in flight, each retried on worker loss (not on bugs), under
`ray.execution: auto` when `ray.address` names a cluster or this process already runs Ray (a
notebook's `ray.init()`), and every batch under `ray` (an embedded Ray when the address is null).

The only place in ylink_data that imports Ray (tests/test_executors.py checks): joining it
(`connect`), watching the cluster for a lost head or no CPU left (`watch`), and what the CLI and
the driver ask of a cluster (`check_cluster`, `other_nodes`). Ray is imported inside the functions
that use it: a run that never goes to Ray never loads it."""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ylink_data.engine.config import PipelineConfig
from ylink_data.engine.executors.base import RESUME_HINT, Executor, Fail, Shared, local_cpus, register
from ylink_data.engine.executors.ray.connect import alive_nodes, cluster_cpus, cluster_summary, ensure_ray
from ylink_data.engine.executors.ray.watch import ClusterWatch
from ylink_data.engine.node_paths import node_local_warning

MAX_RETRIES = 3  # retried on worker loss, not on bugs (engine/workers.py retries as often)
WAIT_S = 1.0  # how often the loop that waits for tasks looks at the cluster's CPUs


@register
class RayExecutor(Executor):
    name = "ray"
    _watch: ClusterWatch | None = None

    @classmethod
    def in_use(cls) -> bool:
        ray = sys.modules.get("ray")  # deciding must not import Ray
        return ray is not None and ray.is_initialized()

    def start(self) -> None:
        if self._watch is not None:
            return
        # An embedded Ray gets the CPUs worker processes would (Ray itself ignores a `taskset`).
        joined = ensure_ray(self.cfg if self.cfg.address else
                            self.cfg.model_copy(update={"num_cpus": local_cpus(self.cfg)}))
        self._watch = ClusterWatch(self.cfg.max_wait_for_cpus_s, self.on_notice, RESUME_HINT,
                                   client_address=joined.hostport if joined and joined.client else None)
        self._watch.start()

    def cpus(self) -> int:
        return cluster_cpus()

    def map(self, fn: Callable, args_list: Sequence[tuple], fail: Fail) -> Iterator[tuple[int, Any]]:
        """A bounded number in flight (driver memory stays flat for 100k tasks); while they wait for
        a CPU, the watch tells so and gives up after ray.max_wait_for_cpus_s."""
        import ray

        remote = _remote(fn)
        limit = 2 * cluster_cpus()
        queue = list(enumerate(args_list))
        queue.reverse()
        in_flight: dict[Any, int] = {}
        try:
            while queue or in_flight:
                while queue and len(in_flight) < limit:
                    i, args = queue.pop()
                    in_flight[remote.remote(*args)] = i
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_S)
                if not ready:
                    self._watch.check_cpus()
                for ref in ready:
                    i = in_flight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        # Every failure Ray reports is one line: an error the task raised, and as well
                        # a worker that died under it (OOM killer, segfault) once its retries ran out,
                        # an object lost with its node...
                        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                        error = fail(i, cause)
                        raise error from (None if error is cause else exc)
                    yield i, result
        except (Exception, GeneratorExit):
            _settle(in_flight)
            raise

    def put(self, data: bytes) -> Shared:
        import ray

        return RayObject(ray.put(data))

    def other_nodes(self) -> int:
        """Nodes with CPUs but this one (a head started with --num-cpus=0 runs no task)."""
        import ray

        here = ray.get_runtime_context().get_node_id()
        return sum(1 for n in alive_nodes(with_cpus=True) if n.get("NodeID") != here)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.stop()  # this process may leave Ray now (ray.shutdown at exit): no alarm


@dataclass(frozen=True)
class RayObject(Shared):
    """An object in Ray's object store: tasks on any node fetch it."""
    ref: Any

    def get(self) -> Any:
        import ray

        return ray.get(self.ref)


_REMOTES: dict[Callable, Any] = {}  # each function becomes a Ray remote function once per process


def _remote(fn: Callable):
    import ray

    if fn not in _REMOTES:
        _REMOTES[fn] = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(fn)
    return _REMOTES[fn]


def _settle(in_flight: dict) -> None:
    """Stop the other tasks of a failed phase and collect their outcomes: Ray prints the error of
    every task whose result is never fetched ("Unhandled error ..."), burying the one line that says
    what went wrong under tracebacks of the same failure."""
    import ray

    for ref in in_flight:
        ray.cancel(ref, force=True)  # the run stops here; what they finished is kept by its markers
    for ref in in_flight:
        with contextlib.suppress(Exception):  # cancelled, or failed too: the first error is the one reported
            ray.get(ref)


def check_cluster(cfg: PipelineConfig) -> tuple[str | None, str]:
    """For `ylink validate`: join the cluster of ray.address as a run would (its errors are the
    run's), and leave it; the warning about local paths other nodes may not see, and the cluster
    in a few words."""
    import ray

    executor = RayExecutor(cfg.ray)
    ensure_ray(cfg.ray)
    try:
        return node_local_warning(cfg, executor.other_nodes()), cluster_summary()
    finally:
        ray.shutdown()



def assigned_cpus() -> int | None:
    """The CPUs the Ray task running in this process holds (`OpContext.task_cpus`); None outside a
    Ray worker (a driver, a worker process, a script)."""
    ray = sys.modules.get("ray")  # a task run in the driver or a worker process must not import Ray
    if ray is None or not ray.is_initialized():
        return None
    ctx = ray.get_runtime_context()
    if ctx.worker.mode != ray._private.worker.WORKER_MODE:  # no public name for it
        return None
    return max(1, int(ctx.get_assigned_resources().get("CPU", 1)))
