"""The input files a pipeline names: globs, folders and URLs (s3://, gs://, http(s)://, memory://)
expanded to a sorted list of regular files, folders of finished runs read as their shards only, path
lists (`input.paths_from`), and the entries that are not files skipped or refused in one line."""
from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import fsspec

from ylink_data.core.errors import InputError, YlinkError
from ylink_data.core.file_errors import file_problem
from ylink_data.core.redaction import redact_url
from ylink_data.core.storage import filesystem, full_url, is_local, join
from ylink_data.io.entries import Skipped, classify

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
        except Exception as exc:  # fsspec backends raise their own types (auth, DNS, HTTP...)
            problem = file_problem(exc, pattern, "check the path, or that the bucket exists", shown=repr(pattern))
            raise InputError(f"{where}: {problem}") from None
        if not files:
            raise InputError(f"{where}: {_nothing_in(fs, path, pattern, excluded, bool(listed))}")
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


