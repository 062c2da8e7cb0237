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
  rejected/*.parquet         dropped documents with their reason (keep_rejected: true), all of one schema
  tiers/<tier>/              with output tiers: each tier's data/, megatron/, sft/ and manifest.json (a run of its own
                             for readers; OUTPUT/manifest.json lists every tier's shards too)
  _work/                     intermediate parts, the files tasks made for rejected/ and quarantine/
                             (phaseN/out/), and completion markers; on success only the reuse files
                             stay: each phase that ends in a global op, with phaseN/reuse.json
                             (engine/reuse.py; `ylink clean OUTPUT` removes them)
  _work/next/, _work/swap.json  a rerun of another config over a finished run: the new run's files until
                             they replace the old ones (engine/swap.py)
  _work/staging/             where local files take shape before they are renamed into place, so that
                             no temporary file ever lies in a folder that readers list (core/storage.py)
  _work/sample.json          with input.sample: the cut of the sample, found by a pass over the input
                             before phase 0, so that a resumed run keeps the same sample without a rescan
  llm-cache/                 answers of the LLM server by request (ops that call a model); kept by --fresh
  run.lock                   held by the run in progress (see lock.py); removed when it ends
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ContextManager

import fsspec

from ylink_data.core.storage import WRITE_PROBE, filesystem, is_temporary, join, remove, staging
from ylink_data.io.manifest import TASK_FILES, Manifest, ManifestError
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
CARD = "README.md"  # the dataset card (engine/card.py), of the run and of each tier folder
# The files at the top of every finished run, and of each tier folder (but run.json), beside the
# files its manifest lists; report.html only once `ylink report` wrote it there.
_RUN_FILES = ("manifest.json", "stats.json", CARD, "run.json")
_TIER_FILES = ("manifest.json", CARD)
_OPTIONAL_FILES = ("report.html",)
# The names a run gives the files in its folders (shards and each sink's `part-NNNNN.*`, a sink's
# whole-run files, rejected/ and quarantine/ files by phase, task and stage): such a file that the
# manifest does not list is the run's own leftover (an attempt killed half-way, a record that was
# quarantined once and not on the retry) and is removed; any other is not the run's.
_OWN_NAME = re.compile(r"part-\d{5}\.[a-z]+|phase\d+-task-\d{5}(-stage\d{2})?\.(parquet|jsonl)")


def _own_name(name: str) -> bool:
    return bool(_OWN_NAME.fullmatch(name)) or any(name in sink.whole_run_files for sink in SINKS.values())


def _leftover(rel: str) -> bool:
    """Whether `rel`, a file its manifest does not list, is the run's own to remove: a file of its
    naming in one of its folders, or the empty probe the output check writes (io/writable.py) and a
    kill left, wherever it is."""
    name = rel.rsplit("/", 1)[-1]
    return name.lstrip("._").startswith(WRITE_PROBE) or ("/" in rel and _own_name(name))


@dataclass
class RunLayout:
    root: str  # the path within `fs` (no protocol)
    fs: fsspec.AbstractFileSystem
    url: str  # the root as the user wrote it
    # Where the run's work lies when not in its own _work/: a run that replaces a finished one publishes
    # its files in that run's _work/next/ until the swap (engine/swap.py), its work in that run's _work/.
    work_root: str = ""

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
        if self.work_root:
            return join(self.work_root, *parts) if parts else self.work_root
        return self.path("_work", *parts)

    @property
    def staging(self) -> str:
        """Where the run's local files take shape before they are renamed into place."""
        return self.work("staging")

    def writing(self) -> ContextManager[None]:
        """A block whose atomic writes into the run folder stage in `staging` (core/storage.py):
        every writer of the run's files runs in one (tasks, publish tasks, the driver)."""
        return staging(self.root, self.staging)

    def staged(self, phase: int, rel: str) -> str:
        """Where a task of `phase` leaves a file of the run folder's `rel` (a rejected/ or quarantine/
        file): in _work/ until the publish phase puts it in place, so that a task killed half-way
        leaves nothing in a folder readers list."""
        return self.work(f"phase{phase}", "out", rel)

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

    def publish_marker(self, kind: str, i: int) -> str:
        """The marker of the publish phase's i-th file of `kind` (rejected, quarantine)."""
        return self.work("publish", f"{kind}-{i:05d}.json")

    @staticmethod
    def quarantine(phase: int, task: int) -> str:
        """The task's quarantine file, relative to the run folder."""
        return f"quarantine/phase{phase}-task-{task:05d}.jsonl"

    @staticmethod
    def rejected(phase: int, task: int, stage: int) -> str:
        """The task's rejected documents of one stage, relative to the run folder. One file per stage:
        ops add columns, so each stage's rejects have their own columns (published with all of them)."""
        return f"rejected/phase{phase}-task-{task:05d}-stage{stage:02d}.parquet"

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
                remove(self.fs, path)

    def remove_work(self) -> None:
        """Remove _work/, its completion markers first, so that no marker outlives the parts it lists."""
        if not self.fs.exists(self.work()):
            return
        for marker in self.fs.glob(self.work("phase*", "done")) + self.fs.glob(self.work("phase*", "resolved.json")):
            remove(self.fs, marker, recursive=True)
        if self.fs.exists(self.work("publish")):
            remove(self.fs, self.work("publish"), recursive=True)
        remove(self.fs, self.work(), recursive=True)

    def remove_run(self) -> None:
        """Remove what a run wrote (never foreign entries, never the lock): every manifest first, then
        `own_entries()` in order."""
        self.withdraw_manifests()
        for name in own_entries():
            if name == "_work":
                self.remove_work()
            elif self.fs.exists(self.path(name)):
                remove(self.fs, self.path(name), recursive=True)

    # ------------------------------------------------------------- the folder against its manifest

    def files(self, work: bool = False) -> dict[str, int | None]:
        """{path relative to the run folder: size} of every file the run folder holds (with `work`,
        _work/'s too), listed afresh; never llm-cache/'s (kept apart, and large) nor the lock."""
        self.fs.invalidate_cache()  # object stores: a listing cached by this process, of any folder, may be stale
        try:
            top = self.fs.ls(self.root, detail=True)
        except FileNotFoundError:
            return {}
        out: dict[str, int | None] = {}
        for entry in top:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if name in (*KEPT_ENTRIES, LOCK) or (name == "_work" and not work):
                continue
            if entry.get("type") == "directory":
                found = self.fs.find(entry["name"], detail=True)
                out |= {self.relative(p): i.get("size") for p, i in found.items() if i.get("type") != "directory"}
            else:
                out[name] = entry.get("size")
        return out

    def relative(self, path: str) -> str:
        """A path of the run's filesystem relative to the run folder."""
        return path.rstrip("/")[len(self.root):].lstrip("/")

    def sweep(self) -> list[str]:
        """Remove what writers killed before their rename left: the staging folder, and every file
        with a temporary name (`core.storage.is_temporary`, this ylink's or an older one's beside
        the file). Only while nothing of the run writes: when a run starts or resumes, and before
        it publishes. Returns what it removed, relative to the run folder."""
        gone = [rel for rel in self.files(work=True) if is_temporary(rel.rsplit("/", 1)[-1])]
        for rel in gone:
            remove(self.fs, self.path(rel))
        if self.fs.exists(self.staging):
            remove(self.fs, self.staging, recursive=True)
        return gone

    def published_files(self, manifest: Manifest) -> dict[str, int | None]:
        """{path: size, None where the manifest gives none} of every file the finished run that
        `manifest` describes holds (but report.html, llm-cache/ and the lock): the files its manifest
        lists (shards, every sink's, rejected/ and quarantine/), the run's own files at the top of its
        folder and of each tier folder, and each sink's whole-run files (Megatron's data-path.txt)."""
        files: dict[str, int | None] = {name: None for name in _RUN_FILES}
        for folder in ["", *(str(t.get("path", "")) for t in (manifest.tiers or {}).values() if isinstance(t, dict))]:
            prefix = f"{folder}/" if folder else ""
            if folder:
                files |= {prefix + name: None for name in _TIER_FILES}
            for name in manifest.sections:
                files |= {f"{prefix}{SINKS[name].folder}/{n}": None for n in SINKS[name].whole_run_files}
        files |= {str(e.get("path")): e.get("bytes") for e in manifest.listed_files()}
        return files

    def unlisted(self, manifest: Manifest) -> tuple[list[str], list[str]]:
        """The files of the run folder (outside _work/) that `manifest` does not account for: (the run's
        own leftovers, by their names, files that are not the run's)."""
        extra = self._extra(manifest, self.files())
        own = [rel for rel in extra if _leftover(rel)]
        return own, [rel for rel in extra if rel not in own]

    def listing_problems(self, manifest: Manifest) -> list[str]:
        """What keeps the run folder's listing from being its manifest's: each file the manifest
        accounts for that is missing or of another size, and each file it does not account for.
        Empty for a published run (checked at the end of every run)."""
        expected, found = self.published_files(manifest), self.files()
        missing = [f"{rel} (missing)" if rel not in found else f"{rel} ({found[rel]} bytes, not {size})"
                   for rel, size in expected.items() if rel not in found or (size is not None and found[rel] != size)]
        return missing + [f"{rel} (not listed)" for rel in self._extra(manifest, found)]

    def _extra(self, manifest: Manifest, found: dict[str, int | None]) -> list[str]:
        """The files of `found` that `manifest` does not account for. A manifest of an older ylink lists
        no rejected/ or quarantine/ files: the files of those folders are its run's as they are."""
        expected = self.published_files(manifest)
        unlisted = [f"{kind}/" for kind in TASK_FILES if kind not in manifest.task_files]
        return [rel for rel in found if rel not in expected and rel not in _OPTIONAL_FILES
                and not rel.startswith(tuple(unlisted))]


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
