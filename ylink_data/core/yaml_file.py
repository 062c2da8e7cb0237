"""YAML files of every kind ylink reads (pipelines, flows, presets, mixtures), loaded safely: plain
data only, and aliases bounded so that a "billion laughs" document is refused before it is built."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ylink_data.core.errors import ConfigError

# YAML aliases may add this many values to a document in all: far more than any preset repeats,
# far less than the billion of a "billion laughs" (aliases of aliases of aliases...).
MAX_ALIAS_VALUES = 10_000


def read_yaml(path: Path, what: str = "pipeline") -> Any:
    """The YAML file at `path` (a pipeline, flow, preset or mixture: `what`) as plain data; {} when empty.
    A missing or unreadable file or invalid YAML is a ConfigError naming the file (and line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} file {path}: {exc}") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid YAML{where}: {problem}", str(path)) from None
    return {} if data is None else data


def load_yaml(text: str) -> Any:
    """YAML text as plain data, safely: no Python objects, and no alias bombs."""
    return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing aliases that add more than MAX_ALIAS_VALUES values in all, or that
    refer to a node from inside it. Counting while composing stops a bomb before it is built:
    the composed document shares aliased nodes, but everything that walks it later (environment
    expansion, validation, run.json) would copy each one."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._alias_values = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values in it, aliases expanded
        self._open: set[str] = set()  # anchors of the nodes being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) and event.anchor in self.anchors:
            if event.anchor in self._open:
                raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} refers to the value "
                                                  "it is in; write the values out", event.start_mark)
            self._alias_values += self._size(self.anchors[event.anchor])
            if self._alias_values > MAX_ALIAS_VALUES:
                raise yaml.composer.ComposerError(None, None, f"aliases expand too far (more than "
                                                  f"{MAX_ALIAS_VALUES:,} values); write the values out",
                                                  event.start_mark)
        anchor = getattr(event, "anchor", None)
        if anchor is None or isinstance(event, yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._open.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.discard(anchor)

    def _size(self, node: yaml.Node) -> int:
        if id(node) not in self._sizes:
            if isinstance(node, yaml.SequenceNode):
                size = 1 + sum(self._size(item) for item in node.value)
            elif isinstance(node, yaml.MappingNode):
                size = 1 + sum(self._size(k) + self._size(v) for k, v in node.value)
            else:
                size = 1
            self._sizes[id(node)] = size
        return self._sizes[id(node)]
