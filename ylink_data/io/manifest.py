"""A finished run's manifest, read and checked: every entry before a byte of any shard is read.

A manifest is input like any other: written by hand, damaged, or made to read files outside the
run (`../../etc/shadow`, `s3://other-bucket/...`, `data/%2e%2e/%2e%2e/other-run/...` over HTTP).
`read_manifest` is the one way a run is turned into shards, by `open_run` (and so `ylink inspect`,
the report and the notebook helpers) as by `ylink cache warm`, `ShardLoader` and `ylink cache
mount`: each shard's path must name a file inside the run folder on every filesystem (no `..`, no
absolute path, no URL syntax, and for local runs no symbolic link out of the folder: `inside_run`,
which the mount's tier folders go through too), and each must carry a sha256 to verify it against
and whole, non-negative `bytes` and `rows`. Anything else is refused with one line naming the
manifest, the shard and the field.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import fsspec

from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import filesystem, full_url, is_local, join

VERSIONS = (1,)           # the manifest versions this code reads (ylink_data.engine.runner.FORMAT_VERSION)
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
class RunShard:
    """One checked manifest entry: its path inside the run folder (normalised, "data/part-00000.parquet"),
    its row count, and where to fetch it."""

    path: str
    rows: int
    ref: ShardRef


@dataclass(frozen=True)
class RunFile:
    """A file of the run other than a shard (a Megatron .bin or .idx, a JSONL file of the sft,
    preference or prompts sections), checked as shards are."""

    path: str
    ref: ShardRef


@dataclass(frozen=True)
class MegatronPair:
    """One Megatron-LM indexed dataset of the run (`manifest["megatron"]["files"]`): `prefix` is what
    Megatron's --data-path takes ("megatron/part-00000" for part-00000.bin and .idx), relative to
    the run folder."""

    prefix: str
    documents: int
    tokens: int
    bin: RunFile
    idx: RunFile


JSONL_SECTIONS = ("sft", "preference", "prompts")  # files beside the shards (pipeline/sft.py)


@dataclass
class RunManifest:
    """A run's manifest, read and checked: `url` is the manifest's own (for messages), `raw` its bytes.
    `megatron`: the run's Megatron files (empty without `output.megatron`), `megatron_dtype` theirs."""

    url: str
    fs: fsspec.AbstractFileSystem
    root: str
    data: dict[str, Any]
    shards: list[RunShard]
    raw: bytes = b""
    megatron: list[MegatronPair] = field(default_factory=list)
    megatron_dtype: str | None = None
    sft: list[RunFile] = field(default_factory=list)  # output.sft_format's JSONL files
    preference: list[RunFile] = field(default_factory=list)  # output.preference_format's
    prompts: list[RunFile] = field(default_factory=list)  # output.prompts_format's

    def files(self) -> list[RunFile]:
        """Every file the manifest lists: shards, Megatron .bin/.idx pairs, then the JSONL files."""
        return ([RunFile(s.path, s.ref) for s in self.shards]
                + [f for pair in self.megatron for f in (pair.bin, pair.idx)] + self.sft + self.preference + self.prompts)


def read_manifest(url: str, storage_options: dict | None = None) -> RunManifest:
    """Read and check the manifest of the finished run at `url` (a local folder or any fsspec URL)."""
    fs, root = filesystem(url, storage_options)
    root = root.rstrip("/")
    try:
        raw = bytes(fs.cat_file(join(root, "manifest.json")))
    except FileNotFoundError:
        hint = ""
        try:  # a run folder without a manifest: an unfinished run
            if fs.exists(join(root, "run.json")):
                hint = " (the run is unfinished: rerun it to resume)"
        except Exception:  # noqa: BLE001 -- the hint is optional; the error below is the point
            pass
        raise ManifestError(f"{url} is not a finished ylink run: no manifest.json{hint}") from None
    except Exception as exc:  # noqa: BLE001 -- backends raise their own types (auth, DNS, HTTP...)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ManifestError(f"cannot read the manifest of {url}: {type(exc).__name__}: {first}") from None
    where = full_url(fs, join(root, "manifest.json"))
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ManifestError(f"{where} is not JSON ({exc}); is {url} a ylink run?") from None
    manifest = check_manifest(fs, root, where, data)
    manifest.raw = raw
    return manifest


def check_manifest(fs: fsspec.AbstractFileSystem, root: str, where: str, data: Any) -> RunManifest:
    """Check an already parsed manifest (`where`: its URL, for messages) of the run at `root` on `fs`."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where} is not a ylink manifest: a JSON {_json_type(data)}, not an object")
    version = data.get("version")
    if type(version) is not int or version not in VERSIONS:  # JSON true and 1.0 equal 1 in Python
        said = "has no 'version'" if "version" not in data else f"has version {version!r}"
        raise ManifestError(f"{where} {said}; this ylink reads version {', '.join(map(str, VERSIONS))} "
                            "(written by another ylink? use the ylink that wrote it)")
    entries = data.get("shards")
    if not isinstance(entries, list):
        said = "has no 'shards'" if "shards" not in data else f"'shards' is a JSON {_json_type(entries)}"
        raise ManifestError(f"{where} {said}, not a list of shards")
    if is_local(fs):  # one spelling per file, so that every process finds the same cache entry
        root = os.path.realpath(root)
    shards, seen = [], {}
    for index, entry in enumerate(entries):
        shard = _check_shard(fs, root, f"{where} shard {index}", entry)
        if shard.path in seen:
            raise ManifestError(f"{where} shard {index}: path {shard.path!r} is also shard {seen[shard.path]}; "
                                "a run lists each shard once, refusing it")
        seen[shard.path] = index
        shards.append(shard)
    manifest = RunManifest(url=where, fs=fs, root=root, data=data, shards=shards)
    if data.get("megatron") is not None:
        manifest.megatron_dtype, manifest.megatron = _check_megatron(fs, root, where, data["megatron"], seen)
    for kind in JSONL_SECTIONS:
        if data.get(kind) is not None:
            setattr(manifest, kind, _check_listed_files(fs, root, f"{where} {kind}", data[kind], seen))
    return manifest


def _check_listed_files(fs: fsspec.AbstractFileSystem, root: str, what: str, section: Any,
                        seen: dict[str, Any]) -> list[RunFile]:
    """A section {"files": [{"path", "bytes", "sha256"}, ...], ...}, every file checked as a shard is."""
    if not isinstance(section, dict) or not isinstance(section.get("files"), list):
        raise ManifestError(f"{what}: not an object with a 'files' list; refusing the run")
    files = []
    for index, entry in enumerate(section["files"]):
        file = _check_file(fs, root, f"{what} file {index}", entry)
        if file.path in seen:
            raise ManifestError(f"{what} file {index}: path {file.path!r} is listed twice; refusing it")
        seen[file.path] = index
        files.append(file)
    return files


def _check_megatron(fs: fsspec.AbstractFileSystem, root: str, where: str, section: Any,
                    seen: dict[str, Any]) -> tuple[str, list[MegatronPair]]:
    """`manifest["megatron"]`: {"dtype": "uint16", "files": [{"prefix", "documents", "tokens", "bin":
    {"path", "bytes", "sha256"}, "idx": {...}}, ...], ...}, every file checked as a shard is."""
    from ylink_data.io.megatron.indexed import DTYPE_CODES

    what = f"{where} megatron"
    if not isinstance(section, dict) or not isinstance(section.get("files"), list):
        raise ManifestError(f"{what}: not an object with a 'files' list; refusing the run")
    dtype = section.get("dtype")
    if dtype not in DTYPE_CODES:
        raise ManifestError(f"{what}: dtype {dtype!r} is not one of {', '.join(DTYPE_CODES)}; refusing the run")
    pairs = []
    for index, entry in enumerate(section["files"]):
        at = f"{what} file {index}"
        if not isinstance(entry, dict):
            raise ManifestError(f"{at}: a JSON {_json_type(entry)}, not an object with prefix, bin and idx")
        prefix = clean_path(entry.get("prefix"), at)
        documents, tokens = _count(entry, "documents", at), _count(entry, "tokens", at)
        files = []
        for kind in ("bin", "idx"):
            file = _check_file(fs, root, f"{at} {kind}", entry.get(kind))
            if file.path != f"{prefix}.{kind}":
                raise ManifestError(f"{at}: {kind} path {file.path!r} is not {prefix}.{kind}; refusing it")
            if file.path in seen:
                raise ManifestError(f"{at}: path {file.path!r} is listed twice; refusing it")
            seen[file.path] = at
            files.append(file)
        pairs.append(MegatronPair(prefix, documents, tokens, *files))
    return dtype, pairs


def _check_file(fs: fsspec.AbstractFileSystem, root: str, what: str, entry: Any) -> RunFile:
    """A {"path", "bytes", "sha256"} entry: inside the run, sized, with a digest to verify against."""
    if not isinstance(entry, dict):
        raise ManifestError(f"{what}: a JSON {_json_type(entry)}, not an object with path, bytes and sha256")
    path = inside_run(fs, root, entry.get("path"), what)
    size = _count(entry, "bytes", what)
    if size > MAX_FILE_BYTES:
        raise ManifestError(f"{what}: bytes {size} is more than any file can hold; refusing it")
    digest = entry.get("sha256")
    if not is_sha256(digest):
        said = "no 'sha256'" if "sha256" not in entry else f"sha256 {digest!r} is not 64 hex digits"
        raise ManifestError(f"{what}: {said}, so the file cannot be verified; refusing it")
    return RunFile(path, ShardRef(url=full_url(fs, join(root, path)), sha256=digest.lower(), size=size))


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


def _check_shard(fs: fsspec.AbstractFileSystem, root: str, what: str, entry: Any) -> RunShard:
    if not isinstance(entry, dict):
        raise ManifestError(f"{what}: a JSON {_json_type(entry)}, not an object with path, rows, bytes and sha256")
    file = _check_file(fs, root, what, entry)
    rows = _count(entry, "rows", what)
    if rows > file.ref.size:  # every row holds at least its own id: a shard has fewer rows than bytes
        raise ManifestError(f"{what}: rows {rows} in a shard of {file.ref.size} bytes is impossible; refusing it")
    return RunShard(path=file.path, rows=rows, ref=file.ref)


def is_sha256(text: Any) -> bool:
    """Whether `text` is a SHA-256 digest in hex (64 hex digits)."""
    return isinstance(text, str) and _SHA256.fullmatch(text) is not None


def _count(entry: dict, field: str, what: str) -> int:
    """A whole number, 0 or more (JSON true/false and 2.0 are not counts)."""
    if field not in entry:
        raise ManifestError(f"{what}: no {field!r}; refusing it")
    value = entry[field]
    if type(value) is not int or value < 0:
        raise ManifestError(f"{what}: {field} {value!r} is not a whole number of 0 or more; refusing it")
    return value


def _json_type(value: Any) -> str:
    for kind, name in ((dict, "object"), (list, "list"), (str, "string"), (bool, "boolean"), (int, "number"),
                       (float, "number")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def run_shards(url: str, storage_options: dict | None = None) -> list[ShardRef]:
    """The shards of the finished run at `url` (a local folder or any fsspec URL), in manifest order."""
    return [shard.ref for shard in read_manifest(url, storage_options).shards]
