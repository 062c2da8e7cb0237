"""The worker processes of a run on one machine (engine/workers.py), driven directly: results come
back for every task, a task's error comes back as itself with the worker's traceback as its cause,
an error that cannot travel pickled comes back by name, and a task runs where an op's time limit
(SIGALRM) works: the main thread of a process that is not the driver."""
from __future__ import annotations

import os
import threading

import pytest

from ylink_data.engine.workers import RemoteError, RemoteTraceback, WorkerPool


def where_am_i(k: int) -> tuple[int, int, bool, str | None]:
    return k, os.getpid(), threading.current_thread() is threading.main_thread(), os.environ.get("OMP_NUM_THREADS")


def fails_to_parse(text: str) -> None:
    int(text)


class _TwoArguments(Exception):
    def __init__(self, code: int, what: str):
        super().__init__(f"{what} ({code})")


def raises_what_cannot_be_unpickled() -> None:
    raise _TwoArguments(7, "the disk said no")


def _run(pool: WorkerPool, fn, args_list) -> dict[int, object]:
    done: dict[int, object] = {}
    pool.run(fn, args_list, done.__setitem__, lambda i, exc: exc)
    return done


def test_every_task_runs_once_in_a_worker_main_thread_alone_on_its_cpu():
    pool = WorkerPool(2)
    try:
        done = _run(pool, where_am_i, [(k,) for k in range(9)])
    finally:
        pool.close()
    assert sorted(done) == list(range(9)) and all(done[k][0] == k for k in done)
    pids = {pid for _, pid, _, _ in done.values()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert all(main for _, _, main, _ in done.values())
    assert {omp for *_, omp in done.values()} == {os.environ.get("OMP_NUM_THREADS", "1")}


def test_a_task_error_comes_back_as_itself_with_where_it_happened():
    pool = WorkerPool(2)
    try:
        with pytest.raises(ValueError, match="invalid literal for int") as caught:
            _run(pool, fails_to_parse, [("12",), ("twelve",)])
        assert isinstance(caught.value.__cause__, RemoteTraceback)
        assert "in fails_to_parse" in str(caught.value.__cause__)
        assert _run(pool, where_am_i, [(1,)])[0][0] == 1  # the pool serves the next batch
    finally:
        pool.close()


def test_an_error_that_cannot_be_unpickled_comes_back_by_name_and_message():
    pool = WorkerPool(1)
    try:
        with pytest.raises(RemoteError) as caught:
            _run(pool, raises_what_cannot_be_unpickled, [()])
    finally:
        pool.close()
    assert caught.value.type_name == "_TwoArguments" and str(caught.value) == "the disk said no (7)"


def loaded_op_modules() -> list[str]:
    """The modules whose ops are registered in this process (each registers its ops on import)."""
    from ylink_data.ops import REGISTRY

    return sorted({cls.__module__ for cls in REGISTRY.values()})


def builds(name: str) -> str:
    from ylink_data.ops import build_op

    return type(build_op(name, {})).__module__


def test_a_worker_loads_its_runs_op_modules_only_and_any_other_op_on_demand():
    """Importing every op module cost each worker 1.1 CPU s against 0.8 for the task functions and
    one op module (measured 2026-12): a worker loads what the run's ops need (runner._worker_modules)."""
    from ylink_data.engine.runner import _worker_modules

    modules = _worker_modules([("minhash_dedup", {}), ("gopher_quality", {})])
    assert modules == sorted({"ylink_data.ops.minhash_dedup", "ylink_data.ops.gopher", "ylink_data.text.dedup.kernels"})
    pool = WorkerPool(1, ["ylink_data.ops.gopher"])
    try:
        assert _run(pool, loaded_op_modules, [()])[0] == ["ylink_data.ops.gopher"]
        assert _run(pool, builds, [("pii",)])[0] == "ylink_data.ops.pii"  # not preloaded: loaded when named
    finally:
        pool.close()
