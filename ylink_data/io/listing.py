"""The input files a pipeline names: globs, folders and URLs (s3://, gs://, http(s)://, memory://)
expanded to a sorted list of regular files, folders of finished runs read as their shards only, path
lists (`input.paths_from`), and the entries that are not files skipped or refused in one line."""
from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import time
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple

import fsspec

from ylink_data.core.digest import store_version
from ylink_data.core.errors import InputError, YlinkError
from ylink_data.core.file_errors import file_problem
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import filesystem, full_url, is_local, join
from ylink_data.io.entries import Skipped, classify
from ylink_data.io.input_versions import Listed, listed_local

log = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class InputFile:
    url: str
    size: int | None
    # A published shard of a finished ylink run named in input.paths: read as Parquet of the document
    # schema whatever input.format says (readers/parquet.py), fingerprinted by its sha256 as well.
    run_shard: bool = False
    sha256: str | None = None
    # What the listing saw of it (a local file's stamp, a store's content hash), which every task that
    # reads it checks it still is (io/input_versions.py).
    listed: Listed = Listed()


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
    except Exception as exc:  # the list itself unreadable: fsspec's own types, gzip, UTF-8
        raise InputError(f"input.paths_from: {file_problem(exc, inp.paths_from, shown=repr(shown_list))}") from None


class _Entry(NamedTuple):
    """One file a listing found: its path in its filesystem, size, the sha256 a finished run's
    manifest gives it (its shards only) and the content hash its store keeps (`store_version`)."""
    path: str
    size: int | None
    sha256: str | None = None
    version: str | None = None


def _expand_entries(entries, storage_options_for, exclude: str | None, probe_urls: bool = True) -> list[InputFile]:
    """Every file the (where, pattern) entries name, each once however it is spelled (`_Names`);
    `probe_urls` False takes a URL entry as one file without asking its server (a path list's lines)."""
    excluded = _Excluded(exclude, storage_options_for(exclude)) if exclude else None
    names = _Names()
    fresh: set[int] = set()
    for where, pattern in entries:
        try:
            fs, path = filesystem(pattern, storage_options_for(pattern))
            if not is_local(fs) and id(fs) not in fresh:
                fs.invalidate_cache()  # list the store now: fsspec keeps listings (sizes, ETags) per process
                fresh.add(id(fs))
            if probe_urls or is_local(fs):
                listed = _expand(fs, path, pattern, storage_options_for(pattern), excluded)
            else:
                listed = [_Entry(path, None)]
            if excluded and any(excluded.is_root(fs, e.path) for e in listed):
                raise InputError(f"{pattern!r} is also output.path, where the run writes its folder; choose "
                                 f"another output.path")
            files = [e for e in listed if not (excluded and excluded.holds(fs, e.path))]
            if is_local(fs):
                files, skipped = _regular_files(files)
                if not files and skipped:
                    raise InputError(f"{pattern!r} holds no file to read: {skipped[0].line()}")
            if not files:
                raise InputError(_nothing_in(fs, path, pattern, excluded, bool(listed)))
            for entry in files:
                names.add(fs, entry, pattern)
        except YlinkError as exc:  # InputError, and ManifestError for a run's damaged manifest
            raise InputError(f"{where}: {exc}") from None
        except Exception as exc:  # fsspec backends raise their own types (auth, DNS, HTTP...)
            problem = file_problem(exc, pattern, "check the path, or that the bucket exists", shown=repr(pattern))
            raise InputError(f"{where}: {problem}") from None
    return names.files()


class _Names:
    """The input files found so far, each once however it is spelled (issue 39 point 7). Names are
    normalised per filesystem: a local path without `.`, `..` and doubled slashes (`local_name`), a
    remote one as fsspec strips it (an object key's `//` or `..` is part of the key, so no more).
    Local names that are one file (symlinks, hard links: the same device and inode) are one input,
    named by the first of its names in sorted order, so that its ids do not depend on the order of
    input.paths. Each such file is read once, and `files()` says so in one logged line."""

    def __init__(self) -> None:
        self.found: dict[str, InputFile] = {}
        # shown name -> (entry of input.paths or line, the path its listing gave) of each way it was named
        self.spellings: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self.same: dict[tuple[int, int], set[str]] = defaultdict(set)  # a local file's (device, inode) -> names
        self.now = time.time_ns()

    def add(self, fs: fsspec.AbstractFileSystem, entry: _Entry, pattern: str) -> None:
        local = is_local(fs)
        path = local_name(entry.path) if local else entry.path
        url = full_url(fs, path)
        shown = redact_url(url)  # what names the file's documents (ids, the source column)
        if shown in self.found and not _same_file(self.found[shown].url, url):
            raise InputError(f"two inputs are both {shown} once their credentials are hidden, so their documents "
                             f"would get the same ids; make the URLs differ in something else (e.g. add a "
                             f"parameter such as &file=...)")
        self.spellings[shown].add((pattern, entry.path))
        if local:
            st = os.stat(path)
            listed = listed_local(st, self.now)
            self.same[(st.st_dev, st.st_ino)].add(shown)
        else:
            listed = Listed(version=entry.version)
        if entry.sha256 is not None:
            self.found[shown] = InputFile(url, entry.size, run_shard=True, sha256=entry.sha256, listed=listed)
        elif shown not in self.found or not self.found[shown].run_shard:  # a shard named twice stays one
            self.found[shown] = InputFile(url, entry.size, listed=listed)

    def files(self) -> list[InputFile]:
        for shown_names in self.same.values():
            if len(shown_names) > 1:
                # a finished run's shard keeps its name (it is checked by its sha256), else the first name
                keep = min(shown_names, key=lambda n: (not self.found[n].run_shard, n))
                for name in shown_names - {keep}:
                    self.spellings[keep] |= self.spellings.pop(name)
                    del self.found[name]
        named_again = {name: ways for name, ways in self.spellings.items() if len(ways) > 1}
        if named_again:
            name, ways = min(named_again.items())
            others = sorted({path if path != name else pattern for pattern, path in ways} - {name})[:2]
            log.warning(f"{len(named_again)} input file(s) are named in more than one way (e.g. {name}"
                        f"{' also as ' + ' and '.join(others) if others else ' twice'}): each is read once, "
                        f"under the first of its names")
        return [self.found[u] for u in sorted(self.found)]


def local_name(path: str) -> str:
    """A local path without `.`, `..` and doubled slashes. `..` after a symlink to a folder leads
    where the link points, not back up the path as written: where dropping it lexically would name
    another file (or none), the folder is resolved instead."""
    norm = os.path.normpath(path)
    if ".." not in path.split("/"):
        return norm
    try:
        if os.path.samefile(norm, path):
            return norm
    except OSError:
        pass
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _expand(fs: fsspec.AbstractFileSystem, path: str, pattern: str, storage_options: dict[str, Any],
            excluded: "_Excluded | None") -> list[_Entry]:
    """Every file `path` names (`_Entry`: with the sha256 of a finished run's shard). A finished
    run, named itself, matched by a wildcard (`runs/*`) or inside a named folder (a folder of runs),
    gives the shards its manifest lists and nothing else of it: never its rejected/, quarantine/,
    llm-cache/ nor its JSON files, which a plain listing would read as documents."""
    shards = _run_shards(fs, path, pattern, storage_options)
    if shards is not None:
        return [_Entry(p, size, sha) for p, (size, sha) in shards.items()]
    files, folders = _list(fs, path)
    # Runs in the listing: folders matched by a wildcard, and folders that hold a run (`_run_folders`);
    # the outermost only (a run's tier folders hold manifests of their own, listed by the run's), and
    # never the run's own output folder (`excluded`), which is no input even while it is unfinished.
    candidates = sorted(set(folders) | _run_folders(fs, [e.path for e in files]))
    runs: dict[str, dict[str, tuple[int, str]]] = {}
    for root in candidates:
        if any(root.startswith(r + "/") for r in runs) or (excluded and excluded.holds(fs, root)):
            continue
        found = _run_shards(fs, root, full_url(fs, root), storage_options)
        if found is not None:
            runs[root] = found
    out = [e for e in files if not any(e.path.startswith(r + "/") for r in runs)]
    out += [_Entry(p, size, sha) for found in runs.values() for p, (size, sha) in found.items()]
    return sorted(out)


def _nothing_in(fs: fsspec.AbstractFileSystem, path: str, pattern: str, excluded: "_Excluded | None",
                listed: bool) -> str:
    """Why `pattern` names no input file (`listed`: it named files, all of them the run's own output):
    what it holds is the run's own output, or nothing."""
    folder = not GLOB_CHARS & set(path) and fs.isdir(path)
    if excluded is not None and (listed or excluded.named_by(fs, path, folder)):
        return (f"{pattern!r} holds no input file besides the run's own output folder ({excluded.url}), which is "
                "never read as input; put the input files there, or choose an output.path outside it")
    if folder:
        return f"{pattern!r} is an empty folder (hidden and _ entries are not read unless named)"
    return f"nothing matches {pattern!r}" + (" (does the bucket exist?)" if "://" in pattern else "")


def _regular_files(files: list[_Entry]) -> tuple[list[_Entry], list[Skipped]]:
    """The local files that are regular files, and the entries skipped, each logged in one line
    (entries.classify; it refuses some)."""
    kept, skipped = [], []
    for listed in files:
        entry = classify(listed.path)
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


def _run_folders(fs: fsspec.AbstractFileSystem, files: list[str]) -> set[str]:
    """The folders among listed files that hold a ylink run: its run.json, or its manifest.json beside
    a data/ folder, or one that reads as a ylink manifest. A run copied without run.json is still a
    run: read as loose files, its rejected/ rows would come back as documents, its card and JSON
    files as bad records."""
    data = {p.rsplit("/", 2)[0] for p in files if p.rsplit("/", 2)[-2:-1] == ["data"]}
    found = set()
    for p in files:
        folder, _, name = p.rpartition("/")
        if (name == "run.json" and _is_ylink_run(fs, p)) or (name == "manifest.json" and
                                                             (folder in data or _is_ylink_manifest(fs, p))):
            found.add(folder)
    return found


def _is_ylink_manifest(fs: fsspec.AbstractFileSystem, manifest: str) -> bool:
    """Whether `manifest` reads as a ylink manifest (a version and a list of shards), not any file so named."""
    try:
        data = json.loads(fs.cat_file(manifest))
    except (FileNotFoundError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("version"), int) and isinstance(data.get("shards"), list)


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


def _list(fs: fsspec.AbstractFileSystem, path: str) -> tuple[list[_Entry], list[str]]:
    """(files, folders a wildcard matched) that `path` names; each file with the content hash its
    store keeps, when the listing gives one (S3's ETag...)."""
    if GLOB_CHARS & set(path) and not path.startswith(("http://", "https://")):
        entries = fs.glob(path, detail=True)
        parts = path.split("/")
        literal = next(k for k, part in enumerate(parts) if GLOB_CHARS & set(part))
        # A wildcard written with a leading "." or "_" asks for such entries: no skipping then.
        wants_hidden = any(part.startswith((".", "_")) for part in parts[literal:])
        shown = {p: i for p, i in entries.items() if wants_hidden or not _hidden(p.split("/")[literal:])}
        return (sorted(_entry(p, i) for p, i in shown.items() if i.get("type") != "directory"),
                sorted(p.rstrip("/") for p, i in shown.items() if i.get("type") == "directory"))
    info = fs.info(path)
    if info.get("type") == "directory":
        root = info.get("name", path).rstrip("/")
        entries = fs.find(path, detail=True)
        return sorted(_entry(p, i) for p, i in entries.items()
                      if not _hidden(p[len(root):].strip("/").split("/"))), []
    return [_entry(info.get("name", path) if not path.startswith(("http://", "https://")) else path, info)], []


def _entry(path: str, info: dict[str, Any]) -> _Entry:
    return _Entry(path, info.get("size"), version=store_version(info))


def _hidden(parts: list[str]) -> bool:
    return any(part.startswith((".", "_")) for part in parts)


class _Excluded:
    """Every file under one folder (local folders compared after resolving symlinks)."""

    def __init__(self, url: str, storage_options: dict[str, Any]):
        self.url = redact_url(url)
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

    def named_by(self, fs: fsspec.AbstractFileSystem, path: str, folder: bool) -> bool:
        """The output folder lies inside the input `folder` at `path`, or a wildcard `path` matches it."""
        if is_local(fs) != self.local:
            return False
        named = self._resolved(fs, path.rstrip("/"))
        if folder:
            return self.root.startswith(named.rstrip("/") + "/")
        return bool(GLOB_CHARS & set(path)) and fnmatch.fnmatchcase(self.root, named)

    def _resolved(self, fs: fsspec.AbstractFileSystem, path: str) -> str:
        if self.local:
            folder, _, name = path.rpartition("/")
            if folder not in self._real_dirs:
                self._real_dirs[folder] = os.path.realpath(folder or "/")
            return os.path.join(self._real_dirs[folder], name)
        return fs.unstrip_protocol(path)


