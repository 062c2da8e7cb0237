"""stats.json's `timing` (issue 40 point 3): every batch of tasks a run ran (each phase, each step of a
global op, publish) is a step with each of its tasks' wall and CPU seconds, in task order, wherever
the tasks ran; the scheduler hands tasks out longest first; a resumed run lists the tasks it ran."""
from __future__ import annotations

import json
import re

import pytest
import yaml

import ylink_data
from ylink_data.engine.submit import longest_first

from .conftest import REPO
from .test_resume import _ylink_run

CRAWL = REPO / "samples" / "crawl"
# Progress lines of every batch: "phase 0: read → ...: 8/8 tasks", "  minhash_dedup: band keys: 4/4 tasks".
_STEP_LINE = re.compile(r"^\s*(.+): (\d+)/(\d+) tasks", re.M)


def _config(out, execution: str, cpus: int = 2) -> dict:
    return {"name": "timing", "input": {"paths": [str(p) for p in sorted(CRAWL.glob("*.warc.gz"))],
                                        "split_bytes": 200_000},
            "output": {"path": str(out)},
            "stages": [{"extract": {}}, {"gopher_quality": {}}, {"minhash_dedup": {}}],
            "ray": {"execution": execution, "num_cpus": cpus}}


def _check_timing(stats: dict, log: str, tasks: int) -> None:
    timing = stats["timing"]
    names = [s["name"] for s in timing["steps"]]
    assert list(timing["tasks"]) == names
    # Every batch the progress shows is a step, in the same order, with as many tasks.
    shown = [(label, int(total)) for label, _, total in _STEP_LINE.findall(log)]
    assert len(shown) == len(names) and shown, (shown, names)
    for (label, total), step in zip(shown, timing["steps"]):
        expected = "publish" if label.startswith("publish") else label.split(":")[0] if label.startswith("phase") else label
        assert step["name"] == expected and step["tasks"] == total == len(timing["tasks"][step["name"]])
    assert [n for n in names if n.startswith("phase")] == ["phase 0", "phase 1"]
    assert any(n.startswith("minhash_dedup: ") for n in names) and names[-1] == "publish"
    for name, listed in timing["tasks"].items():
        numbers = [t["task"] for t in listed]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), name  # in task order, once each
        if name.startswith("phase"):
            assert numbers == list(range(tasks))
        for t in listed:
            assert t["wall_s"] >= 0 and t["cpu_s"] >= 0 and 0 <= t["start_s"] <= timing["wall_s"]
            assert re.fullmatch(r".+:\d+", t["worker"])
    step = {s["name"]: s for s in timing["steps"]}
    for s in timing["steps"]:
        assert 0 <= s["start_s"] and s["start_s"] + s["wall_s"] <= timing["wall_s"] + 1e-3
        assert s["cpu_s"] == pytest.approx(sum(t["cpu_s"] for t in timing["tasks"][s["name"]]), abs=0.01)
    # phase 0 extracts pages: its CPU (the extractor child's included) is most of the tasks' CPU
    assert step["phase 0"]["cpu_s"] > 0.5 * sum(s["cpu_s"] for s in timing["steps"])


@pytest.mark.parametrize("execution", ["local", "processes", "ray"])
def test_every_step_has_each_tasks_wall_and_cpu(tmp_path, execution, capfd, request):
    if execution == "ray":
        request.getfixturevalue("ray_session")  # a real local Ray of 2 CPUs
    out = tmp_path / "run"
    _, stats = ylink_data.run(_config(out, execution), progress=False)
    log = capfd.readouterr().err
    tasks = json.loads((out / "run.json").read_text())["tasks"] if (out / "run.json").exists() else None
    tasks = tasks or len(stats["timing"]["tasks"]["phase 0"])
    assert tasks >= 8
    _check_timing(stats, log, tasks)
    assert json.loads((out / "stats.json").read_text())["timing"] == stats["timing"]
    if execution in ("processes", "ray"):  # two worker processes, or Ray's workers on 2 CPUs
        assert len({t["worker"] for t in stats["timing"]["tasks"]["phase 0"]}) >= 2


def test_tasks_are_handed_out_longest_first(tmp_path):
    """In the driver tasks run one after the other in the order they are handed out: phase 0's by
    input bytes, largest first, whatever their numbers (files of several sizes, packed by name)."""
    out = tmp_path / "run"
    cfg = _config(out, "local")
    cfg["stages"] = [{"gopher_quality": {}}]
    cfg["input"]["split_bytes"] = 300_000
    _, stats = ylink_data.run(cfg, progress=False)
    started = sorted(stats["timing"]["tasks"]["phase 0"], key=lambda t: t["start_s"])
    from ylink_data.engine.runner import Runner
    from ylink_data.engine.config import load_config
    from ylink_data.engine.tasks import split_bytes

    plan = Runner(load_config(cfg, {})).plan()
    sizes = [sum(split_bytes(s) for s in splits) for splits in plan.tasks]
    assert len(set(sizes)) > 2  # the tasks differ in size, so the order says something
    assert [t["task"] for t in started] == longest_first(sizes)
    assert [t["task"] for t in started] != list(range(len(sizes)))


@pytest.mark.parametrize("costs", [[], [1.0], [3, 1, 2], [1, 1, 1], [5, 5, 1, 9, 0, 9], list(range(20))[::-1],
                                   [(7 * k) % 11 for k in range(30)]])
def test_longest_first_is_a_stable_sort_by_cost(costs):
    order = longest_first(costs)
    assert sorted(order) == list(range(len(costs)))
    assert [costs[i] for i in order] == sorted(costs, reverse=True)
    for a, b in zip(order, order[1:]):  # ties keep task order
        assert costs[a] > costs[b] or a < b


def test_a_resumed_run_lists_the_tasks_it_ran(tmp_path):
    out = tmp_path / "run"
    config = tmp_path / "p.yaml"
    cfg = _config(out, "processes")
    cfg["stages"] = [{"gopher_quality": {}}]
    config.write_text(yaml.safe_dump(cfg))
    first = _ylink_run(config, fail_after=3)
    assert first.returncode == 75, first.stderr
    second = _ylink_run(config, fail_after=None)
    assert second.returncode == 0, second.stderr
    stats = json.loads((out / "stats.json").read_text())
    ran = [t["task"] for t in stats["timing"]["tasks"]["phase 0"]]
    tasks = json.loads((out / "run.json").read_text())["tasks"] if (out / "run.json").exists() else None
    done_before = 3
    assert len(ran) == stats["timing"]["steps"][0]["tasks"]
    assert 0 < len(ran) <= (tasks or len(ran) + done_before) - done_before + 1
    assert ran == sorted(ran)
