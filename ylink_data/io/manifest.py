"""A run's manifest.json: one typed, versioned model (`Manifest`), written (`write_manifest`) and read
(`Manifest.from_dict`, `read_manifest`) here only.

    {"version": 1, "name": ..., "fingerprint": ..., "rows": N, "shards": [...], "created": ...,
     "ylink_version": ..., "rejected": {"rows": N, "files": [...]}, "quarantine": {...} (a run's,
     `TASK_FILES`), <one section per sink: "megatron", "sft", "preference", "prompts">,
     "export": {...} (`ylink export megatron`), "tier": ... (a tier folder's), "tiers": {...}}

The keys come in that order (their order is part of the file's bytes, which runs of every ylink
write alike); a key this ylink does not know is kept as read. What each sink's section holds is its
module's business (`ylink_data.io.sinks`): the manifest only places it.

A manifest is input like any other: `read_manifest` is the one way a run is turned into shards, by
`open_run` (and so `ylink inspect`, the report and the notebook helpers) as by `ylink cache warm`,
`ShardLoader`, `ylink cache mount`, `ylink mix` and `ylink export`: every file it lists is checked
(`run_files.py`: inside the run folder, sized, with a sha256) before a byte of any is read; anything
else is refused with one line naming the manifest, the entry and the field.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import fsspec

from ylink_data.core.storage import filesystem, full_url, is_local, join, write_json
from ylink_data.io.run_files import (ManifestError, RunFile, ShardRef, check_files,  # noqa: F401 -- readers of a manifest import these from here
                                     json_type, listed_entries)
from ylink_data.io.sinks import SINKS
from ylink_data.io.sinks.base import Listed
from ylink_data.io.sinks.megatron import ListedPairs, MegatronPair  # noqa: F401 -- as above
from ylink_data.io.sinks.parquet import ListedShards, RunShard

FORMAT_VERSION = 1        # what this ylink writes (runs, exports, mixtures)
VERSIONS = (FORMAT_VERSION,)  # the manifest versions this code reads
SHARDS = "shards"         # the Parquet sink's section: the kept documents
_HEAD = ("name", "fingerprint", "rows")         # after "version", before "shards"
_AFTER_SHARDS = ("created", "ylink_version")    # then the sinks' sections
# The files a run's tasks make beside its shards, published with them (engine/publish.py) and listed
# as a sink's files are, {"rows": N, "files": [{"path", "rows", "bytes", "sha256"}, ...]}: the
# documents its stages dropped (keep_rejected) and the records it could not read or process. A
# manifest of an older ylink has neither (`RunManifest.lists_task_files`).
TASK_FILES = ("rejected", "quarantine")
_TAIL = ("export", "tier", "tiers")             # after them


@dataclass
class Manifest:
    """manifest.json. None is an absent key (a mixture's manifest has no name; only a tier folder's
    has `tier`, only a tiered run's `tiers`). `sections`: "shards" and each sink's section by its
    name, as the sink wrote it."""

    name: str | None = None
    fingerprint: str | None = None
    rows: int | None = None
    sections: dict[str, Any] = field(default_factory=lambda: {SHARDS: []})
    created: str | None = None
    ylink_version: str | None = None
    export: dict[str, Any] | None = None  # `ylink export megatron`: what the pairs were made of
    tier: str | None = None
    tiers: dict[str, Any] | None = None   # a tiered run's: {tier: {"path", "rows"}}
    task_files: dict[str, Any] = field(default_factory=dict)  # TASK_FILES' sections, by name
    extra: dict[str, Any] = field(default_factory=dict)  # keys of another ylink, kept as read
    version: int = FORMAT_VERSION

    @property
    def shards(self) -> list[dict[str, Any]]:
        return self.sections[SHARDS]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version}
        out |= {key: getattr(self, key) for key in _HEAD if getattr(self, key) is not None}
        out[SHARDS] = self.shards
        out |= {key: getattr(self, key) for key in _AFTER_SHARDS if getattr(self, key) is not None}
        out |= {name: self.task_files[name] for name in TASK_FILES if name in self.task_files}
        out |= {name: self.sections[name] for name in SINKS if name != SHARDS and name in self.sections}
        out |= {key: getattr(self, key) for key in _TAIL if getattr(self, key) is not None}
        return out | self.extra

    @classmethod
    def from_dict(cls, data: Any, where: str = "manifest.json") -> "Manifest":
        """The model of a parsed manifest.json (`where`: its URL, for messages); a ManifestError when
        it is no manifest this ylink reads. The files it lists are checked by `check_manifest`."""
        if not isinstance(data, dict):
            raise ManifestError(f"{where} is not a ylink manifest: a JSON {json_type(data)}, not an object")
        version = data.get("version")
        if type(version) is not int or version not in VERSIONS:  # JSON true and 1.0 equal 1 in Python
            said = "has no 'version'" if "version" not in data else f"has version {version!r}"
            raise ManifestError(f"{where} {said}; this ylink reads version {', '.join(map(str, VERSIONS))} "
                                "(written by another ylink? use the ylink that wrote it)")
        entries = data.get(SHARDS)
        if not isinstance(entries, list):
            said = "has no 'shards'" if SHARDS not in data else f"'shards' is a JSON {json_type(entries)}"
            raise ManifestError(f"{where} {said}, not a list of shards")
        known = {"version", *_HEAD, *_AFTER_SHARDS, *_TAIL, *SINKS, *TASK_FILES}
        return cls(**{key: data.get(key) for key in (*_HEAD, *_AFTER_SHARDS, *_TAIL)},
                   sections={name: data[name] for name in SINKS if name in data},
                   task_files={name: data[name] for name in TASK_FILES if name in data},
                   extra={k: v for k, v in data.items() if k not in known}, version=version)

    def listed_files(self) -> list[dict[str, Any]]:
        """The {"path", "bytes", ...} entries of every file the manifest lists (shards first, then each
        sink's, then rejected/ and quarantine/), unchecked: for finding the missing ones. A
        ManifestError when a section is unreadable."""
        return ([entry for name, section in self.sections.items() if section is not None
                 for entry in SINKS[name].listed(section, f"the manifest's {name}")]
                + [entry for name, section in self.task_files.items()
                   for entry in listed_entries(section, f"the manifest's {name}")])


def write_manifest(fs: fsspec.AbstractFileSystem, path: str, manifest: Manifest) -> None:
    """manifest.json at `path`, atomically: its presence says the run (or tier, export) is complete."""
    write_json(fs, path, manifest.to_dict())


@dataclass
class RunManifest:
    """A run's manifest, read and checked: `url` is the manifest's own (for messages), `raw` its bytes,
    `data` as parsed, `model` as typed; `listed`: each section's files, checked, by sink name."""

    url: str
    fs: fsspec.AbstractFileSystem
    root: str
    data: dict[str, Any]
    model: Manifest
    listed: dict[str, Listed] = field(default_factory=dict)
    task_files: dict[str, list[RunFile]] = field(default_factory=dict)  # rejected/, quarantine/: checked
    raw: bytes = b""

    @property
    def lists_task_files(self) -> bool:
        """Whether the manifest lists the run's rejected/ and quarantine/ files (one of this ylink's)."""
        return all(name in self.task_files for name in TASK_FILES)

    @property
    def shards(self) -> list[RunShard]:
        listed = self.listed.get(SHARDS)
        return listed.shards if isinstance(listed, ListedShards) else []

    @property
    def megatron(self) -> list[MegatronPair]:
        """The run's Megatron .bin/.idx pairs (empty without `output.megatron`)."""
        listed = self.listed.get("megatron")
        return listed.pairs if isinstance(listed, ListedPairs) else []

    @property
    def megatron_dtype(self) -> str | None:
        listed = self.listed.get("megatron")
        return listed.dtype if isinstance(listed, ListedPairs) else None

    @property
    def sft(self) -> list[RunFile]:
        return self.section_files("sft")  # output.sft_format's JSONL files

    @property
    def preference(self) -> list[RunFile]:
        return self.section_files("preference")

    @property
    def prompts(self) -> list[RunFile]:
        return self.section_files("prompts")

    def section_files(self, name: str) -> list[RunFile]:
        """The files of one sink's section (none when the run has no such section)."""
        listed = self.listed.get(name)
        return listed.files if listed is not None else []

    def files(self) -> list[RunFile]:
        """Every file the manifest lists: shards, then each sink's (Megatron .bin/.idx pairs, JSONL)."""
        return [f for listed in self.listed.values() for f in listed.files]


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
    """Check an already parsed manifest (`where`: its URL, for messages) of the run at `root` on `fs`:
    each section by its sink, in manifest order, no file listed twice."""
    model = Manifest.from_dict(data, where)
    if is_local(fs):  # one spelling per file, so that every process finds the same cache entry
        root = os.path.realpath(root)
    seen: dict[str, Any] = {}
    listed = {name: SINKS[name].check(fs, root, where if name == SHARDS else f"{where} {name}", section, seen)
              for name, section in model.sections.items() if section is not None}
    task_files = {name: check_files(fs, root, f"{where} {name}", section, seen)
                  for name, section in model.task_files.items()}
    return RunManifest(url=where, fs=fs, root=root, data=data, model=model, listed=listed, task_files=task_files)


def run_shards(url: str, storage_options: dict | None = None) -> list[ShardRef]:
    """The shards of the finished run at `url` (a local folder or any fsspec URL), in manifest order."""
    return [shard.ref for shard in read_manifest(url, storage_options).shards]
