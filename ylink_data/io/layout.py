"""Where a run keeps what: one place that names every file of a run folder.

OUTPUT/
  data/part-NNNNN.parquet    kept documents (published shards)
  megatron/part-NNNNN.bin/.idx  with output.megatron: each shard's token ids as a Megatron-LM
                             indexed dataset, and data-path.txt (Megatron's weighted --data-path)
  sft/part-NNNNN.jsonl       with output.sft_format: each shard's question-answer rows as fine-tuning JSONL
  preference/, prompts/      with output.preference_format / prompts_format: likewise, in TRL's layout
  manifest.json              written last: its presence means the run is complete
  stats.json                 the accounting
  README.md                  the dataset card (card.py): `datasets.load_dataset(OUTPUT)` reads the kept documents
  run.json                   the config (credentials removed), its fingerprint and the inputs
  quarantine/*.jsonl         records that could not be read or processed
  rejected/*.parquet         dropped documents with their reason (keep_rejected: true)
  tiers/<tier>/              with output tiers: each tier's data/, megatron/, sft/ and manifest.json (a run of its own
                             for readers; OUTPUT/manifest.json lists every tier's shards too)
  _work/                     intermediate parts and completion markers; removed on success
  _work/sample.json          with input.sample: the cut of the sample, found by a pass over the input
                             before phase 0, so that a resumed run keeps the same sample without a rescan
  llm-cache/                 answers of the LLM server by request (ops that call a model); kept by --fresh
  run.lock                   held by the run in progress (see lock.py); removed when it ends
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fsspec

from ylink_data.core.storage import WRITE_PROBE, filesystem, join
from ylink_data.io.manifest import Manifest, ManifestError
from ylink_data.io.sinks import SINKS

# What a run writes, in the order --fresh removes it (after `withdraw_manifests`): the proofs of
# completion first, run.json (which config the folder holds) last, so that a removal stopped
# half-way (kill -9) never leaves a manifest that lists deleted shards, and a rerun of either
# config finds out what the folder holds. Between them the sinks' folders (data/, megatron/, sft/...:
# `own_entries`, from the sink registry, so that a new output format is a run's own by itself).
_FIRST_ENTRIES = ("manifest.json", "tiers", "stats.json", "README.md", "report.html", "_work")
_LAST_ENTRIES = ("quarantine", "rejected", "run.json")
# Written by runs but kept by --fresh: the LLM response cache (io/llm/cache.py) is keyed by what was
# asked, so no entry is ever stale, and a rerun with other parameters must not pay for answers again.
KEPT_ENTRIES = ("llm-cache",)
LOCK = "run.lock"  # not an entry of the run: --fresh must never remove a lock that is held


@dataclass
class RunLayout:
    root: str  # the path within `fs` (no protocol)
    fs: fsspec.AbstractFileSystem
    url: str  # the root as the user wrote it

    @classmethod
    def for_url(cls, url: str, storage_options: dict[str, Any]) -> "RunLayout":
        fs, root = filesystem(url, storage_options)
        return cls(root.rstrip("/"), fs, url.rstrip("/"))

    def path(self, *parts: str) -> str:
        return join(self.root, *parts)

    @property
    def manifest(self) -> str:
        return self.path("manifest.json")

    @property
    def stats(self) -> str:
        return self.path("stats.json")

    @property
    def run_info(self) -> str:
        return self.path("run.json")

    @property
    def lock(self) -> str:
        return self.path(LOCK)

    def work(self, *parts: str) -> str:
        return self.path("_work", *parts)

    @property
    def sample_cut(self) -> str:
        """input.sample's cut (runner.Runner._sample_cut): written before phase 0's first task."""
        return self.work("sample.json")

    def part(self, phase: int, task: int, k: int, tier: str | None = None) -> str:
        name = f"task-{task:05d}-{k:03d}.parquet" if tier is None else f"task-{task:05d}-{tier}-{k:03d}.parquet"
        return self.work(f"phase{phase}", name)

    def task_marker(self, phase: int, task: int) -> str:
        return self.work(f"phase{phase}", "done", f"task-{task:05d}.json")

    def resolve_dir(self, phase: int) -> str:
        return self.work(f"phase{phase}", "resolve")

    def resolve_marker(self, phase: int) -> str:
        return self.work(f"phase{phase}", "resolved.json")

    def shard(self, i: int, tier: str | None = None) -> str:
        """Shard i of the run, or of one output tier (OUTPUT/tiers/<tier>/data/, numbered from 0)."""
        return self.path(*self.tier_dir(tier), "data", f"part-{i:05d}.parquet")

    @staticmethod
    def tier_dir(tier: str | None) -> tuple[str, ...]:
        return ("tiers", tier) if tier else ()

    def shard_marker(self, i: int) -> str:
        return self.work("publish", f"part-{i:05d}.json")

    def quarantine(self, phase: int, task: int) -> str:
        return self.path("quarantine", f"phase{phase}-task-{task:05d}.jsonl")

    def rejected(self, phase: int, task: int, stage: int) -> str:
        # One file per stage: ops add columns, so each stage's rejects have their own schema.
        return self.path("rejected", f"phase{phase}-task-{task:05d}-stage{stage:02d}.parquet")

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def has_files(self, path: str) -> bool:
        """True if a file lives at or under `path`. Some object stores keep listing an emptied
        prefix as a folder for a while, so an existing folder proves nothing."""
        if not self.fs.exists(path):
            return False
        return any(info.get("type") == "file" for info in self.fs.find(path, detail=True).values())

    def foreign_entries(self) -> list[str]:
        """Entries in the output folder that a run did not write (never deleted by --fresh)."""
        if not self.fs.exists(self.root):
            return []
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.root, detail=False)]
        own = own_entries()
        return sorted(n for n in names if n not in own and n not in KEPT_ENTRIES and n != LOCK
                      and not n.lstrip("._").startswith(WRITE_PROBE))

    def missing_shards(self, manifest: dict[str, Any]) -> list[str]:
        """The files `manifest` lists (shards, and every sink's: Megatron pairs, JSONL files) that are
        not in the folder with their size: one listing per folder (data/, megatron/, tiers/<tier>/data/...)."""
        try:
            files = Manifest.from_dict(manifest).listed_files()
        except ManifestError as exc:
            return [f"({exc})"]
        listed: dict[str, dict[str, int | None]] = {}
        missing = []
        for shard in files:
            rel = str(shard.get("path", ""))
            folder, _, name = rel.rpartition("/")
            if folder not in listed:
                listed[folder] = file_sizes(self.fs, self.path(folder) if folder else self.root)
            if name not in listed[folder] or listed[folder][name] != shard.get("bytes"):
                missing.append(rel)
        return missing

    def withdraw_manifests(self) -> None:
        """Delete every proof of completion: manifest.json, then each tier's (tiers/<t>/manifest.json,
        which open_run and ShardLoader read as a run of its own). First of all whenever shards may
        go or change, so that no manifest ever lists a missing shard."""
        tiers = self.path("tiers", "*", "manifest.json")
        self.fs.invalidate_cache(self.path("tiers"))  # object stores: list what is there now
        for path in [self.manifest, *sorted(self.fs.glob(tiers))]:
            if self.fs.exists(path):
                self.fs.rm(path)

    def remove_work(self) -> None:
        """Remove _work/, its completion markers first, so that no marker outlives the parts it lists."""
        if not self.fs.exists(self.work()):
            return
        for marker in self.fs.glob(self.work("phase*", "done")) + self.fs.glob(self.work("phase*", "resolved.json")):
            self.fs.rm(marker, recursive=True)
        if self.fs.exists(self.work("publish")):
            self.fs.rm(self.work("publish"), recursive=True)
        self.fs.rm(self.work(), recursive=True)

    def remove_run(self) -> None:
        """Remove what a run wrote (never foreign entries, never the lock): every manifest first, then
        `own_entries()` in order."""
        self.withdraw_manifests()
        for name in own_entries():
            if name == "_work":
                self.remove_work()
            elif self.fs.exists(self.path(name)):
                self.fs.rm(self.path(name), recursive=True)


def own_entries() -> tuple[str, ...]:
    """Every entry a run writes in its folder, in the order --fresh removes them."""
    return (*_FIRST_ENTRIES, *(sink.folder for sink in SINKS.values()), *_LAST_ENTRIES)


def file_sizes(fs: fsspec.AbstractFileSystem, folder: str) -> dict[str, int | None]:
    """{name: size} of the files in `folder` (none if it does not exist), listed afresh."""
    fs.invalidate_cache(folder)  # object stores: a listing cached by this process may be stale
    try:
        entries = fs.ls(folder, detail=True)
    except FileNotFoundError:
        return {}
    return {e["name"].rstrip("/").rsplit("/", 1)[-1]: e.get("size") for e in entries if e.get("type") == "file"}
