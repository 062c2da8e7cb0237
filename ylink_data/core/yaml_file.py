"""YAML files of every kind ylink reads (pipelines, flows, presets, mixtures), loaded safely: plain
data only, and bounded while it is composed, before anything is built from it:
- aliases may add at most MAX_ALIAS_VALUES values and MAX_ALIAS_BYTES bytes of text in all, so that
  a "billion laughs" document (aliases of aliases...) or 4,000 aliases of a 1 MB string (4 GB once
  expanded: `run` spent 740 s redacting it, issue 39 point 12) is refused;
- a value may be nested at most MAX_DEPTH deep, aliases expanded (YAML nested 500 deep gave a
  3,000-line RecursionError, issue 39 point 17). `set_dotted` (core/overrides.py) holds a `--set`
  key and its value to the same depth (`nesting`).
Each refusal is a `YamlLimit` naming the key and the line; `read_yaml` makes it one line naming the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ylink_data.core.errors import ConfigError

# What YAML aliases may add to a document in all: far more than any preset repeats, far less than
# the billion of a "billion laughs" or the gigabytes of a long string aliased thousands of times.
MAX_ALIAS_VALUES = 10_000
MAX_ALIAS_BYTES = 1 << 20
# How deep a value may be nested (the document is level 1; `storage: {s3: {key: v}}` puts v at 4):
# far deeper than any configuration (the bundled ones reach 7), shallow enough that everything that
# walks a configuration recursively (validation, environment expansion, copies, run.json) stays far
# within Python's recursion limit.
MAX_DEPTH = 64


class YamlLimit(yaml.YAMLError):
    """Valid YAML past a bound of this module: `key` (dotted, where it happened), `problem` (what and
    the fix), `problem_mark` (the line)."""

    def __init__(self, key: str, problem: str, mark: Any = None):
        super().__init__(f"{key}: {problem}")
        self.key, self.problem, self.problem_mark = key, problem, mark


def read_yaml(path: Path, what: str = "pipeline") -> Any:
    """The YAML file at `path` (a pipeline, flow, preset or mixture: `what`) as plain data; {} when empty.
    A missing or unreadable file, invalid YAML or YAML past the bounds is a ConfigError naming the
    file (and line, and key)."""
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
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        if isinstance(exc, YamlLimit):
            raise ConfigError(f"{exc.key} ({where}): {exc.problem}", str(path)) from None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid YAML{f' ({where})' if where else ''}: {problem}", str(path)) from None
    return {} if data is None else data


def load_yaml(text: str) -> Any:
    """YAML text as plain data, safely: no Python objects, no alias bombs, no nesting past MAX_DEPTH."""
    return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass


def nesting(value: Any) -> int:
    """How deep `value` nests (a scalar 1, `[1]` 2, `{a: [1]}` 3), walked without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            todo += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            todo += [(v, depth + 1) for v in item]
    return deepest


def dotted(parts: list[str]) -> str:
    """A key path for a message (`storage.s3.x[0][1]`), its middle left out when it is long."""
    if len(parts) > 8:
        parts = [*parts[:5], f"[...{len(parts) - 7} more...]", *parts[-2:]]
    return "".join(p if p.startswith("[") or i == 0 else f".{p}" for i, p in enumerate(parts)) or "the top level"


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing while it composes: aliases that add more than MAX_ALIAS_VALUES values
    or MAX_ALIAS_BYTES bytes in all, an alias inside the node it refers to, and nodes nested deeper
    than MAX_DEPTH (an alias counting as deep as what it expands to). Composing is where a bomb is
    still small: the composed document shares aliased nodes, but everything that walks it later
    (environment expansion, validation, redaction, run.json) would copy each one."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._alias_values = 0
        self._alias_bytes = 0
        self._sizes: dict[int, tuple[int, int, int]] = {}  # id(node) -> values, bytes, height
        self._open: set[str] = set()  # anchors of the nodes being composed
        self._path: list[str] = []  # the keys from the top to the node being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(index, yaml.ScalarNode):  # a mapping's value: its key names it
            label = str(index.value)
        elif isinstance(index, int):  # a sequence's item
            label = f"[{index}]"
        else:  # the document, or a mapping's key
            label = ""
        self._path.append(label)
        try:
            depth = len(self._path)
            if isinstance(event, yaml.AliasEvent) and event.anchor in self.anchors:
                self._alias(event, depth)
            elif depth > MAX_DEPTH:
                self._refuse(f"nested more than {MAX_DEPTH} levels deep; write it flatter", event.start_mark)
            anchor = getattr(event, "anchor", None)
            if anchor is None or isinstance(event, yaml.AliasEvent):
                return super().compose_node(parent, index)
            self._open.add(anchor)
            try:
                return super().compose_node(parent, index)
            finally:
                self._open.discard(anchor)
        finally:
            self._path.pop()

    def _alias(self, event: yaml.AliasEvent, depth: int) -> None:
        if event.anchor in self._open:
            self._refuse(f"alias *{event.anchor} refers to the value it is in; write the values out",
                         event.start_mark)
        values, size, height = self._size(self.anchors[event.anchor])
        if depth + height - 1 > MAX_DEPTH:
            self._refuse(f"alias *{event.anchor} nests it more than {MAX_DEPTH} levels deep; write it flatter",
                         event.start_mark)
        self._alias_values += values
        self._alias_bytes += size
        if self._alias_values > MAX_ALIAS_VALUES or self._alias_bytes > MAX_ALIAS_BYTES:
            self._refuse(f"aliases expand too far (past {MAX_ALIAS_VALUES:,} values or {MAX_ALIAS_BYTES:,} bytes "
                         f"of text in all); write the values out", event.start_mark)

    def _refuse(self, problem: str, mark: Any) -> None:
        raise YamlLimit(dotted([p for p in self._path if p]), problem, mark)

    def _size(self, node: yaml.Node) -> tuple[int, int, int]:
        """(values, bytes of text, height) of a composed node, its aliases expanded (they are the
        same node objects): its children are composed already, so the walk is over what is built."""
        if id(node) not in self._sizes:
            if isinstance(node, yaml.SequenceNode):
                parts = [self._size(item) for item in node.value]
            elif isinstance(node, yaml.MappingNode):
                parts = [self._size(n) for pair in node.value for n in pair]
            else:
                parts = []
            scalar = len(node.value.encode("utf-8", "replace")) if isinstance(node, yaml.ScalarNode) else 0
            self._sizes[id(node)] = (1 + sum(p[0] for p in parts), scalar + sum(p[1] for p in parts),
                                     1 + max((p[2] for p in parts), default=0))
        return self._sizes[id(node)]
