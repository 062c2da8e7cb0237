"""In this process, one task after the other, in the calling thread: a batch one process would run
anyway (one task, or one CPU) under `ray.execution: auto`, and every batch under `local`. The
scheduler sends tasks here only from the main thread, where ops' SIGALRM time limits work, as in a
worker. A task that crashes the process (the OOM killer) takes the driver with it: the run stops as
a killed `ylink run` does, and a rerun resumes."""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from ylink_data.core.errors import YlinkError
from ylink_data.engine.executors.base import Executor, Fail, local_cpus, register


@register
class Here(Executor):
    name = "here"
    in_this_process = True

    def cpus(self) -> int:
        return local_cpus(self.cfg)

    def map(self, fn: Callable, args_list: Sequence[tuple], fail: Fail) -> Iterator[tuple[int, Any]]:
        for i, args in enumerate(args_list):
            try:
                result = fn(*args)
            except YlinkError:
                raise
            except Exception as exc:
                raise fail(i, exc) from exc
            yield i, result
