"""One file a run's manifest lists, checked before a byte of it is read: a path inside the run folder
on every filesystem, whole non-negative sizes, and a sha256 to verify it against.

A manifest is input like any other: written by hand, damaged, or made to read files outside the
run (`../../etc/shadow`, `s3://other-bucket/...`, `data/%2e%2e/%2e%2e/other-run/...` over HTTP).
These checks are shared by the manifest reader (`manifest.py`: the shards) and by every sink's own
section (`sinks/*`: Megatron pairs, JSONL files), so each refuses the same things with one line
naming the manifest, the entry and the field.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import fsspec

from ylink_data.core.digest import sha256_of
from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import full_url, is_local, join

MAX_FILE_BYTES = 2 ** 63 - 1  # the largest size a file can have (a signed 64-bit offset)
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
# Characters a URL reads as syntax, not as part of a name: a path holding one does not name the
# same file over HTTP as on disk ('%2e%2e' is '..' to an HTTP client, '?' and '#' end the path),
# ':' starts a scheme or an fsspec chain ('x::s3://...'), and '\\' is a separator on Windows.
_URL_SYNTAX = set(":?#%\\")


class ManifestError(YlinkError):
    """A run's manifest that cannot be trusted: nothing of the run is read."""


@dataclass(frozen=True)
class ShardRef:
    """One shard of a run, as the manifest names it. `etag`, when given, becomes part of the
    cache key (the manifest's sha256 already pins the content, so read_manifest leaves it None)."""

    url: str
    sha256: str
    size: int
    etag: str | None = None


@dataclass(frozen=True)
class RunFile:
    """A file of the run other than a shard (a Megatron .bin or .idx, a JSONL file of the sft,
    preference or prompts sections), checked as shards are."""

    path: str
    ref: ShardRef


def check_file(fs: fsspec.AbstractFileSystem, root: str, what: str, entry: Any) -> RunFile:
    """A {"path", "bytes", "sha256"} entry: inside the run, sized, with a digest to verify against."""
    if not isinstance(entry, dict):
        raise ManifestError(f"{what}: a JSON {json_type(entry)}, not an object with path, bytes and sha256")
    path = inside_run(fs, root, entry.get("path"), what)
    size = count(entry, "bytes", what)
    if size > MAX_FILE_BYTES:
        raise ManifestError(f"{what}: bytes {size} is more than any file can hold; refusing it")
    digest = entry.get("sha256")
    if not is_sha256(digest):
        said = "no 'sha256'" if "sha256" not in entry else f"sha256 {digest!r} is not 64 hex digits"
        raise ManifestError(f"{what}: {said}, so the file cannot be verified; refusing it")
    return RunFile(path, ShardRef(url=full_url(fs, join(root, path)), sha256=digest.lower(), size=size))


def check_files(fs: fsspec.AbstractFileSystem, root: str, what: str, section: Any, seen: dict[str, Any]) -> list[RunFile]:
    """A section {"files": [{"path", "bytes", "sha256"}, ...], ...} (a JSONL sink's, rejected/,
    quarantine/): every file checked as a shard is, and listed once (`seen`)."""
    if not isinstance(section, dict) or not isinstance(section.get("files"), list):
        raise ManifestError(f"{what}: not an object with a 'files' list; refusing the run")
    return [check_listed_once(check_file(fs, root, f"{what} file {index}", entry), f"{what} file {index}", seen)
            for index, entry in enumerate(section["files"])]


def damaged(url: str, what: str) -> str:
    """The one line for a file of a finished run that is not what its manifest lists."""
    return f"{url}: {what}: the run was damaged after it was written; rerun that run, or copy it again"


def verify(fs: fsspec.AbstractFileSystem, path: str, ref: ShardRef) -> None:
    """The file at `path` is the one its manifest's entry (`ref`) vouches for, as a pipeline checks a
    run's shard before reading it: its size, then its sha256; else a ManifestError in one line."""
    try:
        size = fs.size(path)
    except FileNotFoundError:
        raise ManifestError(damaged(ref.url, "listed in its run's manifest.json but missing")) from None
    if size != ref.size:
        raise ManifestError(damaged(ref.url, f"{size} bytes, not the {ref.size} its run's manifest.json lists"))
    digest = sha256_of(fs, path)
    if digest != ref.sha256:
        raise ManifestError(damaged(ref.url, f"its sha256 is not the one its run's manifest.json lists "
                                             f"({digest[:12]}... vs {ref.sha256[:12]}...)"))


def check_listed_once(file: RunFile, what: str, seen: dict[str, Any]) -> RunFile:
    """`file`, unless another entry of the manifest (`seen`: path -> where) already lists its path."""
    if file.path in seen:
        raise ManifestError(f"{what}: path {file.path!r} is listed twice; refusing it")
    seen[file.path] = what
    return file


def clean_path(path: Any, what: str) -> str:
    """A manifest's relative path, normalised ("data/./x" -> "data/x"); a ManifestError naming
    `what` ("<manifest> shard 3") unless it stays inside the run folder on every filesystem."""
    if not isinstance(path, str) or not path:
        raise ManifestError(f"{what}: path {path!r} is not a relative path in the run folder; refusing it")
    if path.startswith("/"):
        raise ManifestError(f"{what}: path {path!r} is absolute, not inside the run folder; refusing it")
    odd = sorted({c for c in path if c in _URL_SYNTAX or ord(c) < 0x20 or ord(c) == 0x7F})
    if odd:
        shown = " ".join(repr(c) for c in odd)
        raise ManifestError(f"{what}: path {path!r} holds {shown}, which a URL or another filesystem reads "
                            "differently; refusing it")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        raise ManifestError(f"{what}: path {path!r} leaves the run folder; refusing it")
    return "/".join(parts)


def inside_run(fs: fsspec.AbstractFileSystem, root: str, path: Any, what: str) -> str:
    """`path` from the manifest of the run at `root` (resolved, for local runs: `check_manifest`'s
    `RunManifest.root`), normalised as `clean_path` does; a ManifestError naming `what` unless it
    stays inside the run folder, for local runs also once symbolic links are followed."""
    path = clean_path(path, what)
    if is_local(fs):
        real = os.path.realpath(join(root, path))
        if not real.startswith(root.rstrip("/") + "/"):
            raise ManifestError(f"{what}: path {path!r} leads to {real}, outside the run folder "
                                "(a symbolic link?); refusing it")
    return path


def is_sha256(text: Any) -> bool:
    """Whether `text` is a SHA-256 digest in hex (64 hex digits)."""
    return isinstance(text, str) and _SHA256.fullmatch(text) is not None


def count(entry: dict, field: str, what: str) -> int:
    """A whole number, 0 or more (JSON true/false and 2.0 are not counts)."""
    if field not in entry:
        raise ManifestError(f"{what}: no {field!r}; refusing it")
    value = entry[field]
    if type(value) is not int or value < 0:
        raise ManifestError(f"{what}: {field} {value!r} is not a whole number of 0 or more; refusing it")
    return value


def json_type(value: Any) -> str:
    for kind, name in ((dict, "object"), (list, "list"), (str, "string"), (bool, "boolean"), (int, "number"),
                       (float, "number")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def listed_entries(section: Any, what: str, key: str = "files") -> list[dict]:
    """`section[key]`, a list of objects; a ManifestError naming `what` when it is not one."""
    entries = section.get(key) if isinstance(section, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ManifestError(f"{what}: not an object with a '{key}' list of objects; refusing the run")
    return entries
