"""`--set KEY=VALUE` overrides of a YAML document (a pipeline, a flow, a mixture): dotted keys into
nested mappings and lists, a mapping value merged into what is there."""
from __future__ import annotations

import copy
from typing import Any

import yaml

from ylink_data.core.errors import ConfigError
from ylink_data.core.yaml_file import MAX_DEPTH, YamlLimit, dotted, load_yaml, nesting


def parse_overrides(overrides: list[str] | dict[str, Any] | None,
                    source: str | None = None) -> list[tuple[str, Any]]:
    """(dotted key, value) of each `--set KEY=VALUE` (the value read as YAML, else kept as text), or of
    a mapping given from Python; `source` names the file in errors."""
    if not overrides:
        return []
    if isinstance(overrides, dict):
        return list(overrides.items())
    parsed = []
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set output.path=/tmp/out")
        try:
            value = load_yaml(text) if text.strip() else ""
        except YamlLimit as exc:  # YAML, but past a bound: taken as text, the user would not know
            raise ConfigError(f"--set {key.strip()}: {exc.problem}", source) from None
        except yaml.YAMLError:
            value = text
        parsed.append((key.strip(), value))
    return parsed


def set_dotted(raw: dict, key: str, value: Any, source: str | None) -> None:
    """Set `a.b.0.c` in nested dicts/lists; a dict value is merged into what is there. The key and
    the value together nest at most MAX_DEPTH deep, as a YAML file does (core/yaml_file.py)."""
    parts = key.split(".")
    if len(parts) + nesting(value) > MAX_DEPTH:
        raise ConfigError(f"--set {dotted(parts)}: the key and its value nest more than {MAX_DEPTH} levels "
                          f"deep; write it flatter", source)
    node: Any = raw
    for depth, part in enumerate(parts[:-1]):
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            node = node[_list_index(node, part, where, source)]
        elif isinstance(node, dict):
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
        else:
            raise ConfigError(f"--set {key}: {where} is not a mapping", source)
    last = parts[-1]
    if isinstance(node, list):
        node[_list_index(node, last, key, source)] = value
    elif isinstance(value, dict) and isinstance(node.get(last), dict):
        node[last] = deep_merge(node[last], value)
    else:
        node[last] = value


def _list_index(node: list, part: str, where: str, source: str | None) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"--set {where}: no list item {part!r} (the list has {len(node)} items)", source)
    return int(part)


def deep_merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
