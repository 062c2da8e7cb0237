"""Worker processes on this machine (engine/workers.py), one per CPU: a batch of several tasks
without a Ray cluster under `ray.execution: auto`, and every batch under `processes`. They start in
a fraction of a second, where an embedded Ray takes seconds to start and stop."""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from ylink_data.engine.executors.base import Executor, Fail, local_cpus, register
from ylink_data.engine.workers import WorkerPool


@register
class Processes(Executor):
    name = "processes"
    _pool: WorkerPool | None = None

    def cpus(self) -> int:
        return local_cpus(self.cfg)

    def warm_up(self) -> None:
        self._workers().start()  # they load the code (about half a second each) while the driver plans

    def map(self, fn: Callable, args_list: Sequence[tuple], fail: Fail) -> Iterator[tuple[int, Any]]:
        return self._workers().results(fn, args_list, fail)

    @property
    def warm(self) -> bool:
        return self._pool is not None

    def _workers(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(local_cpus(self.cfg), self.preload)
        return self._pool

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
