"""Executors (engine/executors/): every registered one runs the same real task batch to the same
results and the same one-line failure, objects put by the driver reach the tasks, a new executor
is one registered class picked by its name, and Ray is imported nowhere but in the Ray executor."""
from __future__ import annotations

import ast
import gzip
import hashlib
import json

import pytest

from ylink_data.core.errors import ConfigError
from ylink_data.engine import executors
from ylink_data.engine.config import RayConfig
from ylink_data.engine.executors.base import EXECUTORS, executor_class, register
from ylink_data.engine.executors.here import Here
from ylink_data.engine.submit import Scheduler
from ylink_data.text.transform.units import english_words

from .conftest import REPO, TEST_DATA

DOCUMENTS = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # 10 real Common Crawl documents (SOURCE.md)
PACKAGE = REPO / "ylink_data"
RAY_EXECUTOR = PACKAGE / "engine" / "executors" / "ray"
NAMES = ("here", "processes", "ray")


def words_in_document(data, k: int) -> tuple[int, int, str]:
    """A task: document `k` of a JSONL file put by the driver, its English word count and digest."""
    text = json.loads(gzip.decompress(executors.get(data)).splitlines()[k])["text"]
    return k, len(english_words(text)), hashlib.sha256(text.encode()).hexdigest()


def _one_line(i: int, exc: BaseException) -> BaseException:
    return RuntimeError(f"task {i} failed: {type(exc).__name__}")


@pytest.fixture(params=NAMES)
def executor(request):
    if request.param == "ray":
        request.getfixturevalue("ray_session")  # the tests' shared Ray, joined as a notebook's
    made = executor_class(request.param)(RayConfig(num_cpus=2))
    made.start()
    yield made
    made.close()


def test_the_registry_holds_one_executor_per_place():
    assert {name: executor_class(name).name for name in NAMES} == {name: name for name in NAMES}
    with pytest.raises(ConfigError, match=r"^ray\.execution: no executor named 'fast' .*use auto, local"):
        executor_class("fast")


def test_every_executor_runs_the_same_batch_to_the_same_results(executor):
    n = 10  # the file's documents: more tasks than CPUs
    data = executor.put(DOCUMENTS.read_bytes())
    got = dict(executor.map(words_in_document, [(data, k) for k in range(n)], _one_line))
    raw = DOCUMENTS.read_bytes()
    assert got == {k: words_in_document(raw, k) for k in range(n)}  # computed here, in this process
    assert sum(words for _, words, _ in got.values()) > 1000


def test_every_executor_reports_a_failed_task_as_the_same_one_line(executor):
    data = executor.put(DOCUMENTS.read_bytes())
    with pytest.raises(RuntimeError, match=r"^task 1 failed: IndexError$"):
        dict(executor.map(words_in_document, [(data, 0), (data, 10**6), (data, 2)], _one_line))
    # It serves the next batch.
    assert dict(executor.map(words_in_document, [(data, 3)], _one_line))[0][0] == 3


def test_every_executor_counts_cpus_and_no_other_node(executor):
    assert executor.cpus() >= 1 and executor.other_nodes() == 0  # the tests' Ray is this machine only


class Recording(Here):
    """A toy executor: runs tasks here and remembers what it ran."""
    name = "recording"
    ran: list = []

    def map(self, fn, args_list, fail):
        for i, result in super().map(fn, args_list, fail):
            self.ran.append(i)
            yield i, result


def test_a_registered_executor_is_picked_by_its_name(tmp_path):
    """Adding one is its class and `@register`: `ray.execution` names it and the scheduler uses it."""
    register(Recording)
    try:
        cfg = RayConfig(num_cpus=2).model_copy(update={"execution": "recording"})
        done = {}
        with Scheduler(cfg) as scheduler:
            assert scheduler.where(3) == "recording"
            raw = DOCUMENTS.read_bytes()
            scheduler.run(words_in_document, [(raw, k) for k in range(3)], done.__setitem__, describe=str)
        assert Recording.ran == [0, 1, 2] and done == {k: words_in_document(raw, k) for k in range(3)}
    finally:
        EXECUTORS.pop("recording", None)


def _imports_ray(node: ast.AST) -> bool:
    """`import ray`, `import ray.x`, `from ray... import`, importlib.import_module / __import__ /
    find_spec of "ray" or "ray.x"."""
    def is_ray(name: str | None) -> bool:
        return name is not None and (name == "ray" or name.startswith("ray."))

    if isinstance(node, ast.Import):
        return any(is_ray(alias.name) for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and is_ray(node.module)
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return called in ("import_module", "__import__", "find_spec") and is_ray(str(node.args[0].value))
    return False


def test_no_module_outside_the_ray_executor_imports_ray():
    found = [f"{path.relative_to(REPO)}:{node.lineno}"
             for path in sorted(PACKAGE.rglob("*.py")) if not path.is_relative_to(RAY_EXECUTOR)
             for node in ast.walk(ast.parse(path.read_text(), str(path))) if _imports_ray(node)]
    assert found == []
    # The walk sees the Ray executor's own imports: it would catch them elsewhere.
    assert any(_imports_ray(node) for node in ast.walk(ast.parse((RAY_EXECUTOR / "__init__.py").read_text())))


@pytest.mark.parametrize("source", ["import ray", "import ray.util as u", "from ray.util import client",
                                    "import importlib; importlib.import_module('ray')", "__import__('ray.exceptions')",
                                    "importlib.util.find_spec('ray')"])
def test_the_check_sees_every_way_of_importing_ray(source):
    assert any(_imports_ray(node) for node in ast.walk(ast.parse(source)))
    assert not any(_imports_ray(node) for node in ast.walk(ast.parse(source.replace("ray", "rayon"))))
