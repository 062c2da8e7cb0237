"""Where a driver's tasks run: `base.Executor` and its registry; one module per executor (`here`,
`processes`, `ray`). Ray is imported nowhere in ylink_data but in `ray/` (tests/test_executors.py)."""
from ylink_data.engine.executors.base import Executor, Shared, executor_class, get, register  # noqa: F401
