"""What the steps of a flow read and write, checked against each other before the first step runs
(by `ylink validate` and `ylink run` alike), so that a mistake costs nothing: a flow whose third
step cannot start used to be found out after the first, often a paid LLM step, had run.

- Every place a step reads (a run step's `input.paths` and the files its ops name; a `quality_train`
  step's `from`) is either written by an earlier step, or is there now (the same check as a
  pipeline's inputs). Reading what a later step writes, or what the step writes itself, is refused.
- No two steps write one place, and no step writes inside another step's run folder (a run takes
  its folder over: `--fresh` removes it, and its files are the run's).
- Every place a step writes can be written (io/writable.py)."""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass

from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import filesystem
from ylink_data.io.listing import GLOB_CHARS, expand_paths
from ylink_data.io.writable import check_writable
from ylink_data.engine.files_read import op_files
from ylink_data.engine.node_paths import strings_in
from ylink_data.flow.steps import Step


@dataclass(frozen=True)
class Place:
    """A path a step reads or writes: `key` as errors name it, `path` as written, `where` comparable."""
    step: int
    key: str
    path: str
    where: str
    op_file: bool = False  # a file an op reads (`Op.files_read`): it must be there, not listed as input


def flow_problems(steps: list[Step]) -> list[str]:
    """One line per problem, each naming its key (`steps[2].run.input.paths[0]`)."""
    writes = [w for i, s in enumerate(steps) for w in _writes(i, s)]
    problems = _clashes(writes)
    for i, step in enumerate(steps):
        for read, required in _reads(i, step):
            writer = next((w for w in writes if _feeds(w.where, read.where)), None)
            if writer is None:
                # a folder that holds an earlier step's output (made by then) need not be there yet
                made = any(w.step < i and _inside(w.where, read.where) for w in writes)
                if required and not made:
                    problems += _missing(step, read)
            elif writer.step == i and required:  # an op's own files in its run folder (llm-cache/) are no input
                problems.append(f"{read.key}: {read.path} is this step's own output ({writer.key}); a step "
                                "cannot read what it writes: read an earlier step's output or an existing path")
            elif writer.step > i:
                problems.append(f"{read.key}: {read.path} is written by {writer.key}, a later step; "
                                f"move this step after it")
    if not problems:  # a folder that cannot be written: once the steps agree with each other
        for w in writes:
            problems += _unwritable(steps[w.step], w)
    return problems


def _comparable(path: str) -> str:
    if "://" in path and not path.startswith("file://"):
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path.removeprefix("file://")))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _feeds(written: str, read: str) -> bool:
    """Whether reading `read` (a path or glob) reads what was written at `written` or inside it. A
    folder that merely holds an output does not count: a run leaves its own output out of its inputs."""
    if GLOB_CHARS & set(read):
        return fnmatch.fnmatchcase(written, read) or any(
            fnmatch.fnmatchcase(written, read.rsplit("/", n)[0]) for n in range(1, read.count("/")))
    return _inside(read, written)


def _writes(i: int, step: Step) -> list[Place]:
    if step.pipeline is not None:
        path = step.pipeline.output.path
        return [Place(i, f"steps[{i}].run.output.path", path, _comparable(path))]
    return [Place(i, f"steps[{i}].quality_train.output", step.train.output, _comparable(step.train.output))]


def _reads(i: int, step: "Step") -> list[tuple[Place, bool]]:
    """(place, whether it is an input: it must exist unless an earlier step writes it, and must not be
    the step's own output). The strings of a run step's op parameters count only where another step
    writes them (a model an earlier step trains): most are no path at all, some name the run's own
    files (an LLM op's cache), and the ops check their own files."""
    if step.train is not None:
        return [(Place(i, f"steps[{i}].quality_train.from", step.train.run, _comparable(step.train.run)), True)]
    cfg = step.pipeline
    reads = [(Place(i, f"steps[{i}].run.input.paths[{k}]", p, _comparable(p)), True)
             for k, p in enumerate(cfg.input.paths or [])]
    files = op_files(cfg)
    reads += [(Place(i, f"steps[{i}].run.{key}", url, _comparable(url), op_file=True), True) for key, url in files]
    named = {key for key, _ in files}
    for j, (name, params) in enumerate(cfg.ops):
        reads += [(Place(i, f"steps[{i}].run.{key}", value, _comparable(value)), False)
                  for key, value in strings_in(params, f"stages[{j}].{name}") if key not in named]
    return reads


def _clashes(writes: list[Place]) -> list[str]:
    problems = []
    for n, w in enumerate(writes):
        for other in writes[:n]:
            if w.where == other.where:
                problems.append(f"{w.key}: {w.path} is also {other.key}: two steps would write one place; "
                                "give each step its own")
            elif _inside(w.where, other.where) or _inside(other.where, w.where):
                inner, outer = (w, other) if _inside(w.where, other.where) else (other, w)
                if outer.key.endswith("run.output.path"):
                    problems.append(f"{inner.key}: {inner.path} is inside {outer.key} ({outer.path}), another "
                                    "step's run folder, which that run owns; write it beside the folder")
    return problems


def _missing(step: "Step", read: Place) -> list[str]:
    """Why `read`, which no step writes, cannot be read now ([] when it can)."""
    if read.op_file:
        cfg = step.pipeline
        fs, path = filesystem(read.path, cfg.storage_options(read.path))
        if fs.exists(path):
            return []
        return [f"{read.key}: {cfg.redact(read.path)} does not exist and no earlier step writes it; give the "
                "path or URL of an existing file"]
    try:
        if step.train is not None:
            from ylink_data.io.manifest import read_manifest

            read_manifest(read.path)
        else:
            cfg = step.pipeline
            expand_paths([read.path], cfg.storage_options, exclude=cfg.output.path)
    except YlinkError as exc:
        said = str(exc).removeprefix("input.paths[0]: ")
        return [f"{read.key}: {said} (and no earlier step writes it)"]
    return []


def _unwritable(step: "Step", w: Place) -> list[str]:
    if step.pipeline is not None:
        folder, options = w.path, step.pipeline.storage_options(w.path)
    else:  # a model file: its folder, made by the training command if need be
        folder, options = (w.path.rsplit("/", 1)[0] if "/" in w.path else "."), {}
    try:
        check_writable(folder, options)
    except YlinkError as exc:
        return [f"{w.key}: {exc}"]
    return []
