"""Filesystem access through fsspec: every path may be local, a glob, or a URL (s3://, gs://,
http(s)://, memory://). Writers publish atomically: a reader never sees half a file."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import IO, Any, Iterator

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ylink_data.core.errors import InputError, OutputError, YlinkError
from ylink_data.core.redaction import redact_url
from ylink_data.io.entries import Skipped, classify

log = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem for `url` and the path within it."""
    return fsspec.core.url_to_fs(url, **(storage_options or {}))


def is_local(fs: fsspec.AbstractFileSystem) -> bool:
    return isinstance(fs, LocalFileSystem)


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def full_url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """A path as users write it: plain for local files, with its protocol otherwise."""
    return path if is_local(fs) else fs.unstrip_protocol(path)


@dataclass(frozen=True)
class InputFile:
    url: str
    size: int | None
    # A published shard of a finished ylink run named in input.paths: read as Parquet of the document
    # schema whatever input.format says (readers/parquet.py), fingerprinted by its sha256 as well.
    run_shard: bool = False
    sha256: str | None = None


def expand_paths(patterns: list[str], storage_options_for, exclude: str | None = None) -> list[InputFile]:
    """Every file the patterns name, sorted and deduplicated (URLs that differ only in their
    credentials are one file: documents are named by the URL without them; two URLs that differ in
    more but look the same without them are refused, as their ids would); fails up front, naming
    the pattern, when one matches nothing or cannot be listed (missing path, no permission,
    unknown bucket). What a folder or a wildcard expands into skips hidden and `_` entries, files
    and folders alike (.git/, .ipynb_checkpoints/, _SUCCESS), and every file under `exclude` (the
    run's own output). A finished ylink run (manifest.json), whether named, matched by a wildcard or
    inside a named folder, expands into the shards its manifest lists, and nothing else of it
    (`_expand`); each shard is checked against its sha256 when it is read (`readers.open_split`)."""
    return _expand_entries(((f"input.paths[{i}]", p) for i, p in enumerate(patterns)), storage_options_for, exclude)


def input_files(inp, storage_options_for, exclude: str | None = None) -> list[InputFile]:
    """The files of `input.paths`, or of the lines of `input.paths_from` (io/path_list.py): a local
    line is expanded like an entry of input.paths, a URL line is one file taken as listed, without a
    request per line (a Common Crawl dump lists ~90k files; their sizes are found when read). A line
    that fails is named by the list and its line number."""
    if inp.paths_from is None:
        return expand_paths(inp.paths, storage_options_for, exclude)
    from ylink_data.io.path_list import listed_paths

    shown_list = redact_url(inp.paths_from)
    lines = listed_paths(inp.paths_from, inp.paths_base, storage_options_for)
    try:
        return _expand_entries(((f"input.paths_from {shown_list} line {n}", p) for n, p in lines),
                               storage_options_for, exclude, probe_urls=False)
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"input.paths_from: {shown_list!r} does not exist (check the path or URL)") from None
    except Exception as exc:  # the list itself unreadable: fsspec's own types, gzip, UTF-8
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InputError(f"input.paths_from: cannot read the path list {shown_list!r}: {type(exc).__name__}: "
                         f"{first}") from None


def _expand_entries(entries, storage_options_for, exclude: str | None, probe_urls: bool = True) -> list[InputFile]:
    """Every file the (where, pattern) entries name; `probe_urls` False takes a URL entry as one file
    without asking its server (a path list's lines)."""
    excluded = _Excluded(exclude, storage_options_for(exclude)) if exclude else None
    found: dict[str, InputFile] = {}
    for where, pattern in entries:
        try:
            fs, path = filesystem(pattern, storage_options_for(pattern))
            if probe_urls or is_local(fs):
                listed = _expand(fs, path, pattern, storage_options_for(pattern), excluded)
            else:
                listed = [(path, None, None)]
            if excluded and any(excluded.is_root(fs, p) for p, _, _ in listed):
                raise InputError(f"{pattern!r} is also output.path, where the run writes its folder; choose "
                                 f"another output.path")
            files = [(p, size, sha) for p, size, sha in listed if not (excluded and excluded.holds(fs, p))]
            if is_local(fs):
                files, skipped = _regular_files(files)
                if not files and skipped:
                    raise InputError(f"{pattern!r} holds no file to read: {skipped[0].line()}")
        except YlinkError as exc:  # InputError, and ManifestError for a run's damaged manifest
            raise InputError(f"{where}: {exc}") from None
        except FileNotFoundError:
            raise InputError(f"{where}: {pattern!r} does not exist (check the path, or that the bucket exists)") from None
        except PermissionError as exc:
            raise InputError(f"{where}: no permission to list or read {pattern!r} ({exc})") from None
        except Exception as exc:  # fsspec backends raise their own types (auth, DNS, HTTP...)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise InputError(f"{where}: cannot open {pattern!r}: {type(exc).__name__}: {first}") from None
        if not files:
            hint = " (does the bucket exist?)" if "://" in pattern else ""
            raise InputError(f"{where}: nothing matches {pattern!r}{hint}")
        for path, size, sha256 in files:
            url = full_url(fs, path)
            shown = redact_url(url)  # what names the file's documents (ids, the source column)
            if shown in found and not _same_file(found[shown].url, url):
                raise InputError(f"{where}: two inputs are both {shown} once their credentials are hidden, "
                                 f"so their documents would get the same ids; make the URLs differ in "
                                 f"something else (e.g. add a parameter such as &file=...)")
            if sha256 is not None:
                found[shown] = InputFile(url, size, run_shard=True, sha256=sha256)
            elif shown not in found or not found[shown].run_shard:  # a shard named twice stays one
                found[shown] = InputFile(url, size)
    return [found[u] for u in sorted(found)]


def _expand(fs: fsspec.AbstractFileSystem, path: str, pattern: str, storage_options: dict[str, Any],
            excluded: "_Excluded | None") -> list[tuple[str, int | None, str | None]]:
    """(path, bytes, sha256 when it is a finished run's shard) of every file `path` names. A finished
    run, named itself, matched by a wildcard (`runs/*`) or inside a named folder (a folder of runs),
    gives the shards its manifest lists and nothing else of it: never its rejected/, quarantine/,
    llm-cache/ nor its JSON files, which a plain listing would read as documents."""
    shards = _run_shards(fs, path, pattern, storage_options)
    if shards is not None:
        return [(p, size, sha) for p, (size, sha) in shards.items()]
    files, folders = _list(fs, path)
    # Runs in the listing: folders matched by a wildcard, and folders holding a ylink run.json; the
    # outermost only (a run's tier folders hold manifests of their own, listed by the run's), and
    # never the run's own output folder (`excluded`), which is no input even while it is unfinished.
    candidates = sorted(set(folders) | {p.rpartition("/")[0] for p, _ in files
                                        if p.endswith("/run.json") and _is_ylink_run(fs, p)})
    runs: dict[str, dict[str, tuple[int, str]]] = {}
    for root in candidates:
        if any(root.startswith(r + "/") for r in runs) or (excluded and excluded.holds(fs, root)):
            continue
        found = _run_shards(fs, root, full_url(fs, root), storage_options)
        if found is not None:
            runs[root] = found
    out = [(p, size, None) for p, size in files if not any(p.startswith(r + "/") for r in runs)]
    out += [(p, size, sha) for found in runs.values() for p, (size, sha) in found.items()]
    return sorted(out)


def _regular_files(files: list[tuple[str, int | None, str | None]]
                   ) -> tuple[list[tuple[str, int | None, str | None]], list[Skipped]]:
    """The local files that are regular files, and the entries skipped, each logged in one line
    (entries.classify; it refuses some)."""
    kept, skipped = [], []
    for listed in files:
        entry = classify(listed[0])
        if entry is None:
            kept.append(listed)
        else:
            log.warning(entry.line())
            skipped.append(entry)
    return kept, skipped


def _run_shards(fs: fsspec.AbstractFileSystem, path: str, pattern: str,
                storage_options: dict[str, Any]) -> dict[str, tuple[int, str]] | None:
    """{shard path: (bytes, sha256)} of the finished ylink run in the folder `path` (it holds
    manifest.json), in the manifest's order, each checked to be there with the size the manifest
    gives; None if `path` is no run folder. Only the shards: a run's stats.json, run.json, rejected/
    and quarantine/ hold no documents of it, and a plain listing would read them as input.

    A folder that holds an unfinished run (run.json, no manifest.json yet) is refused rather than
    listed: its data/ holds only the shards published so far (and _work/ is skipped as hidden), so
    a listing would read part of the run, and its bookkeeping, as documents without a word; whoever
    names a run folder means the run's output, which does not exist yet."""
    if GLOB_CHARS & set(path) or pattern.startswith(("http://", "https://")) or not fs.isdir(path):
        return None
    root = path.rstrip("/")
    if not fs.exists(join(root, "manifest.json")):
        if _is_ylink_run(fs, join(root, "run.json")):
            raise InputError(f"{pattern!r} is an unfinished ylink run (run.json, no manifest.json): rerun that "
                             "run to finish it, then read it; or name the files inside it to read them as they are")
        return None
    from ylink_data.io.manifest import read_manifest  # late import: manifest.py uses this module

    run = read_manifest(pattern, storage_options)  # checked: every shard inside the run folder
    shards: dict[str, tuple[int, str]] = {}
    sizes: dict[str, dict[str, int | None]] = {}  # one listing per folder of shards
    for shard in run.shards:
        full = join(run.root, shard.path)
        folder, _, name = full.rpartition("/")
        if folder not in sizes:
            fs.invalidate_cache(folder)
            sizes[folder] = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e.get("size")
                             for e in fs.ls(folder, detail=True) if e.get("type") == "file"}
        if sizes[folder].get(name) != shard.ref.size:
            raise InputError(f"{pattern!r}: the run's manifest lists {shard.path} ({shard.ref.size} bytes), "
                             "which is missing or of another size: the run is damaged; rerun it")
        shards[full] = (shard.ref.size, shard.ref.sha256)
    return shards


def _is_ylink_run(fs: fsspec.AbstractFileSystem, run_json: str) -> bool:
    """Whether `run_json` is the run.json of a ylink run (its fingerprint and version), not any file so named."""
    try:
        info = json.loads(fs.cat_file(run_json))
    except (FileNotFoundError, ValueError):
        return False
    return isinstance(info, dict) and "fingerprint" in info and "ylink_version" in info


def _same_file(a: str, b: str) -> bool:
    """True when two URLs differ at most in credentials: user:password, or a signature or token in
    the query (a password or a SAS signature that changed). Other parameters that redaction hides
    (`key=`, which may name a file) must be equal."""
    return _without_credentials(a) == _without_credentials(b)


def _without_credentials(url: str) -> tuple:
    parts = urllib.parse.urlsplit(url)
    query = [(name, "" if _signs(name) else value)
             for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
    return parts.scheme, parts.netloc.rpartition("@")[2], parts.path, query, parts.fragment


def _signs(name: str) -> bool:
    """sig, X-Amz-Signature, SharedAccessSignature, access_token, X-Amz-Security-Token..."""
    return any(word.endswith(("sig", "signature", "token", "credential"))
               for word in re.split(r"[^a-z0-9]+", name.lower()))


def _list(fs: fsspec.AbstractFileSystem, path: str) -> tuple[list[tuple[str, int | None]], list[str]]:
    """(files, folders a wildcard matched) that `path` names."""
    if GLOB_CHARS & set(path) and not path.startswith(("http://", "https://")):
        entries = fs.glob(path, detail=True)
        parts = path.split("/")
        literal = next(k for k, part in enumerate(parts) if GLOB_CHARS & set(part))
        # A wildcard written with a leading "." or "_" asks for such entries: no skipping then.
        wants_hidden = any(part.startswith((".", "_")) for part in parts[literal:])
        shown = {p: i for p, i in entries.items() if wants_hidden or not _hidden(p.split("/")[literal:])}
        return (sorted((p, i.get("size")) for p, i in shown.items() if i.get("type") != "directory"),
                sorted(p.rstrip("/") for p, i in shown.items() if i.get("type") == "directory"))
    info = fs.info(path)
    if info.get("type") == "directory":
        root = info.get("name", path).rstrip("/")
        entries = fs.find(path, detail=True)
        return sorted((p, i.get("size")) for p, i in entries.items()
                      if not _hidden(p[len(root):].strip("/").split("/"))), []
    return [(info.get("name", path) if not path.startswith(("http://", "https://")) else path, info.get("size"))], []


def _hidden(parts: list[str]) -> bool:
    return any(part.startswith((".", "_")) for part in parts)


class _Excluded:
    """Every file under one folder (local folders compared after resolving symlinks)."""

    def __init__(self, url: str, storage_options: dict[str, Any]):
        self.fs, root = filesystem(url, storage_options)
        self.local = is_local(self.fs)
        self.root = os.path.realpath(root) if self.local else self.fs.unstrip_protocol(root.rstrip("/"))
        self._real_dirs: dict[str, str] = {}

    def is_root(self, fs: fsspec.AbstractFileSystem, path: str) -> bool:
        """`path` is the output folder itself (a file named as both input and output.path)."""
        return is_local(fs) == self.local and self._resolved(fs, path) == self.root

    def holds(self, fs: fsspec.AbstractFileSystem, path: str) -> bool:
        if is_local(fs) != self.local:
            return False
        path = self._resolved(fs, path)
        return path == self.root or path.startswith(self.root.rstrip("/") + "/")

    def _resolved(self, fs: fsspec.AbstractFileSystem, path: str) -> str:
        if self.local:
            folder, _, name = path.rpartition("/")
            if folder not in self._real_dirs:
                self._real_dirs[folder] = os.path.realpath(folder or "/")
            return os.path.join(self._real_dirs[folder], name)
        return fs.unstrip_protocol(path)


class HashingWriter:
    """A write-only file wrapper that counts bytes and computes sha256 as data passes through, so a
    shard's checksum costs no second read."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.bytes = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.raw.write(data)
        self.sha256.update(data)
        self.bytes += len(data)
        return len(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
# No room on the disk, in the user's quota, or in one file (EFBIG: past the file system's or the
# process's largest file): the same fix for the user, more space.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def output_error(exc: BaseException, folder: str) -> OutputError | None:
    """The one-line error for a write into `folder` that failed because the folder is read-only,
    not ours to write, or full; None for any other failure."""
    if isinstance(exc, PermissionError) or (isinstance(exc, OSError) and exc.errno in _NOT_WRITABLE):
        return OutputError(f"{folder} is not writable ({_reason(exc)}): choose a writable output.path")
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:
        return OutputError(f"no space left for {folder} ({_reason(exc)}): free some space, then rerun the "
                           "same command to resume (finished work is kept)")
    return None


def _reason(exc: BaseException) -> str:
    if getattr(exc, "strerror", None):
        return exc.strerror
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def atomic_write(fs: fsspec.AbstractFileSystem, path: str, mode: str = "wb") -> Iterator[IO]:
    """Write `path` so that it appears complete or not at all. Local files go to a temporary name in
    the same folder and are renamed; on object stores an upload only becomes visible when it
    completes, so the object is written in place. Nothing is published if the block raises.
    A folder that is read-only, not ours or full raises OutputError naming it."""
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    with writing_into(full_url(fs, parent) if parent else "."):
        if is_local(fs):
            yield from _atomic_write_local(path, parent, mode)
        else:
            yield from _atomic_write_remote(fs, path, mode)


def _atomic_write_local(path: str, parent: str, mode: str) -> Iterator[IO]:
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
    f = open(tmp, mode)
    try:
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, path)
    except BaseException:
        # Clean-up must never replace the error that brought us here: on a full disk the close
        # fails too, in a read-only folder the removal.
        with contextlib.suppress(OSError):
            f.close()
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _atomic_write_remote(fs: fsspec.AbstractFileSystem, path: str, mode: str) -> Iterator[IO]:
    f = fs.open(path, mode)
    try:
        yield f
    except BaseException:
        with contextlib.suppress(Exception):
            if hasattr(f, "discard"):
                f.discard()  # abort the pending upload instead of committing it
            else:
                f.close()
            if fs.exists(path):
                fs.rm(path)
        raise
    f.close()


@contextlib.contextmanager
def writing_into(folder: str) -> Iterator[None]:
    """Writes into `folder` in the block: a read-only, foreign or full folder becomes an OutputError."""
    try:
        yield
    except OSError as exc:
        error = output_error(exc, folder)
        if error is None:
            raise
        raise error from None


def write_json(fs: fsspec.AbstractFileSystem, path: str, obj: Any) -> None:
    data = json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False).encode()
    with atomic_write(fs, path) as f:
        f.write(data + b"\n")


def read_json(fs: fsspec.AbstractFileSystem, path: str) -> Any:
    # One GET: opening a file over HTTP asks for its size first, a second round trip.
    return json.loads(fs.cat_file(path))


def publish_copy(fs: fsspec.AbstractFileSystem, src: str, dst: str) -> None:
    """Make `dst` a copy of `src` atomically, keeping `src` (so a crash mid-publish can redo it).
    Local: a hard link when possible (no bytes copied); object stores: a server-side copy."""
    if is_local(fs):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        tmp = f"{dst}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            os.link(src, tmp)
        except OSError:
            fs.copy(src, tmp)
        os.replace(tmp, dst)
    else:
        fs.copy(src, dst)
