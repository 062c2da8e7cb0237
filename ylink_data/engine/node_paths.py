"""Local paths in a config that tasks on another node may not see: a run on a Ray cluster reads its
inputs and writes its output from every worker node, and ops open their files (tokenizers, models,
benchmark and prompt files) there too. Checked once, when the run joins the cluster (and by `ylink
validate`): one warning naming every such path, or none when tasks run only on this node (the
executor says how many other nodes run tasks: engine/executors)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

from ylink_data.engine.config import PipelineConfig
from ylink_data.core.paths import PACKAGE

_SAME_ON_EVERY_NODE = (PACKAGE, Path(sys.prefix).resolve())  # the package, the environment


def local_paths(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """(key, path) for input.paths and output.path when local, and for every other string of the
    config that names an existing local file or folder, but for ylink's own files and those of its
    Python environment, which every node has as the same environment."""
    found = [(f"input.paths[{i}]", p) for i, p in enumerate(cfg.input.paths or []) if _local(p)]
    found += [(key, p) for key, p in (("input.paths_from", cfg.input.paths_from), ("input.paths_base", cfg.input.paths_base))
              if p and _local(p)]
    if _local(cfg.output.path):
        found.append(("output.path", cfg.output.path))
    output = cfg.output.model_dump(exclude={"path"})
    for key, value in [*strings_in(output, "output"),
                       *(kv for i, (name, params) in enumerate(cfg.ops) for kv in strings_in(params, f"stages[{i}].{name}"))]:
        if _local(value) and os.path.exists(_os_path(value)) and not _ships_with_environment(value):
            found.append((key, value))
    return found


def node_local_warning(cfg: PipelineConfig, other_nodes: int) -> str | None:
    """The warning for a run whose tasks may run on `other_nodes` nodes other than this one (its
    executor's `other_nodes()`: those of a Ray cluster that have CPUs)."""
    if not other_nodes:
        return None
    paths = local_paths(cfg)
    if not paths:
        return None
    nodes = f"{other_nodes} other node{'s' if other_nodes > 1 else ''} with CPUs"
    named = "; ".join(f"{key}: {path}" for key, path in paths)
    return (f"warning: this Ray cluster runs tasks on {nodes}, which must see these local paths at the same place "
            f"(a shared file system), or use s3://... or gs://... instead: {named}")


def _local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _os_path(path: str) -> str:
    return os.path.expanduser(path.removeprefix("file://"))


def _ships_with_environment(path: str) -> bool:
    resolved = Path(_os_path(path)).resolve()
    return any(resolved.is_relative_to(root) for root in _SAME_ON_EVERY_NODE)


def strings_in(value: Any, key: str) -> Iterator[tuple[str, str]]:
    """(key path, string) for every string inside `value` (mappings and lists walked), keys as errors name them."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings_in(v, f"{key}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from strings_in(v, f"{key}[{i}]")
