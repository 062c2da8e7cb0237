"""Word lists that ops read: bundled ones by name (`ylink_data/assets/<kind>/<name>.txt`, each folder
with a SOURCE note) or any file by path or fsspec URL (`.gz` and other compressions by extension).
One entry per line; `#` starts a comment, blank lines are skipped."""
from __future__ import annotations

import fsspec

from ylink_data.core.errors import InputError
from ylink_data.core.paths import ASSETS, package_path


def parse_entries(lines: list[str]) -> list[str]:
    return [e for e in (line.split("#", 1)[0].strip() for line in lines) if e]


def bundled_names(kind: str) -> list[str]:
    """Names of the lists bundled for `kind` (e.g. `badwords`)."""
    return sorted(p.stem for p in (ASSETS / kind).glob("*.txt"))


def bundled_list(kind: str, name: str) -> list[str]:
    return parse_entries((ASSETS / kind / f"{name}.txt").read_text(encoding="utf-8").splitlines())


def read_list(path: str, what: str = "list") -> list[str]:
    """Entries of the list file at `path` (local path or fsspec URL)."""
    try:
        with fsspec.open(package_path(path), "rt", encoding="utf-8", errors="replace", compression="infer") as f:
            lines = f.read().splitlines()
    except Exception as exc:  # fsspec backends raise their own types
        raise InputError(f"{what}: cannot read list {path!r}: {type(exc).__name__}: {exc}") from None
    return parse_entries(lines)


def load_word_list(spec: str, kind: str) -> list[str]:
    """A bundled list of `kind` by name, or the file at path/URL `spec`."""
    if "/" not in spec and (ASSETS / kind / f"{spec}.txt").is_file():
        return bundled_list(kind, spec)
    try:
        return read_list(spec, kind)
    except InputError as exc:
        raise InputError(f"{exc}; give a path or URL, or a bundled list: {', '.join(bundled_names(kind))}") from None
