"""Stage-level reuse (issue 41 part 1): a rerun into the same output.path after a config change keeps
every phase whose inputs and ops are unchanged and recomputes from the first changed op on.

Each phase folder `_work/phaseN/` holds `reuse.json`, written before the phase's first task: the
phase's key, a digest of what its outputs are made of (the input section and files, the output
options, the stages up to and including the global op it computes keys for, and the content of the
files those stages read; the inputs' content is checked apart, `Runner._check_inputs_unchanged`), and
its prefix, the same without that global op. A rerun of another configuration (`Reuse.select`):

- keeps each phase, from phase 0 on, whose key is the new run's: its tasks' markers, parts and the
  resolved decisions of its global op are the new run's as they are (the run's resume does the rest);
- remakes the keys of the first phase whose prefix only is the same (the global op's parameters
  changed, `minhash_dedup.threshold`): its parts are written again, table by table as the phase wrote
  them (`TaskOutput.batches`), with the new op's keys (`rekey_task`), so that they are byte for byte
  what the phase would write, and the op resolves again;
- removes every later phase folder: those phases run again.

At the end of a run (`keep_for_reuse`) only what later reuse can use stays in `_work/`: the folder of
each phase that ends in a global op (the last phase boundary before each global op: its parts, task
markers, staged rejected/quarantine files and the op's decisions), each file's sha256 in reuse.json,
checked before the phase is reused (a phase that fails the check runs again). The final phase, the
publish markers and the staging folder go. `ylink clean OUTPUT` removes it all (`clean`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.digest import sha256_of
from ylink_data.core.storage import remove, write_json
from ylink_data.engine.config import PipelineConfig
from ylink_data.engine.files_read import Expected
from ylink_data.engine.plan import Phase
from ylink_data.engine.tasks import add_keys, cached_op, internal_column, load_marker
from ylink_data.io.layout import RunLayout

KEY_FILE = "reuse.json"
# What run.json's fingerprinted configuration holds besides the stages: all of it is in every key but
# the inputs' content, which is known once phase 0 has read them and is checked apart.
_PER_STAGE = ("stages", "files read")
_INPUT_CONTENT = "input content"


@dataclass(frozen=True)
class PhaseKey:
    key: str  # what the phase's outputs are made of
    prefix: str  # the same without the global op it computes keys for (= key for the final phase)


def phase_keys(fingerprinted: dict[str, Any], phases: list[Phase]) -> list[PhaseKey]:
    """Each phase's key, from the run's fingerprinted configuration (as run.json holds it: redacted,
    through JSON)."""
    common = {k: v for k, v in fingerprinted.items() if k not in (*_PER_STAGE, _INPUT_CONTENT)}
    stages = fingerprinted.get("stages", [])
    read = fingerprinted.get("files read", [])

    def digest(end: int) -> str:
        files = [f for f in read if _stage_of(f[0]) < end]
        return _digest({**common, "stages": stages[:end], "files read": files})

    out = []
    for phase in phases:
        end = phase.outgoing[0] if phase.outgoing else len(stages)  # stage indices start at 1
        out.append(PhaseKey(digest(end), digest(end - 1) if phase.outgoing else digest(end)))
    return out


def describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The first change between two fingerprinted configurations, as the reuse line names it:
    `stages[5] minhash_dedup (threshold 0.8 → 0.7)`, or `everything (changed: output)`."""
    other = sorted(k for k in {*old, *new} if k not in (*_PER_STAGE, _INPUT_CONTENT) and old.get(k) != new.get(k))
    if other:
        return f"everything (changed: {', '.join(other)})"
    before, after = old.get("stages", []), new.get("stages", [])
    files_before, files_after = _files_by_stage(old), _files_by_stage(new)
    for i in range(max(len(before), len(after))):
        if i >= len(after):
            return f"stages[{i}] ({before[i][0]} removed)"
        name, params = after[i]
        if i >= len(before):
            return f"stages[{i}] {name} (added)"
        if before[i][0] != name:
            return f"stages[{i}] {name} (was {before[i][0]})"
        if before[i][1] != params:
            return f"stages[{i}] {name} ({_params_change(before[i][1], params)})"
        if files_before.get(i) != files_after.get(i):
            changed = [f"{k.split('.', 2)[-1]} {url}" for k, url, d in files_after.get(i, [])
                       if [k, url, d] not in files_before.get(i, [])]
            return f"stages[{i}] {name} ({', '.join(changed) or 'files read'} changed)"
    return "everything"


def _params_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    keys = [k for k in [*after, *(k for k in before if k not in after)] if before.get(k) != after.get(k)]
    return ", ".join(f"{k} {_shown(before.get(k))} → {_shown(after.get(k))}" for k in keys)


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def _files_by_stage(fingerprinted: dict[str, Any]) -> dict[int, list[list[str]]]:
    out: dict[int, list[list[str]]] = {}
    for entry in fingerprinted.get("files read", []):
        out.setdefault(_stage_of(entry[0]), []).append(list(entry))
    return out


def _stage_of(key: str) -> int:
    """The stage position (from 0) of a files-read key `stages[3].op.param`."""
    return int(key.split("]", 1)[0].split("[", 1)[1])


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class RekeySpec:
    """A task of `rekey_task`: task `task` of `phase`, its marker as the phase wrote it."""
    cfg: PipelineConfig
    phase: Phase
    task: int
    marker: dict[str, Any]
    key: str
    files_read: Expected


def rekey_task(spec: RekeySpec) -> dict[str, Any]:
    """The task's parts written again with the phase's global op's keys as they are now: the old keys
    dropped, the rows cut into the tables the phase wrote (`batches`), new keys added, written as the
    phase writes them; then its marker, which names the new parts and the key they are of."""
    from ylink_data.io.parquet import RollingParquetWriter

    cfg, phase, t = spec.cfg, spec.phase, spec.task
    layout = RunLayout.for_url(cfg.output.path, cfg.storage_options(cfg.output.path))
    idx, name, params = phase.outgoing
    keyer = cached_op(name, params, cfg, idx, spec.files_read)
    old_keys = internal_column(phase.outgoing, "")
    folder = layout.work(f"phase{phase.index}", f"keys-{spec.key[:12]}")
    with layout.writing():
        writer = RollingParquetWriter(layout.fs, lambda k: f"{folder}/task-{t:05d}-{k:03d}.parquet",
                                      cfg.output.shard_bytes, "lz4")
        try:
            for table in _tables(layout, [p["path"] for p in spec.marker["parts"]], spec.marker["batches"], old_keys):
                writer.write(add_keys(keyer, phase.outgoing, table))
            parts = [p.to_json() for p in writer.close()]
        except BaseException:
            writer.abort()
            raise
        marker = {**spec.marker, "parts": parts, "keys": spec.key}
        write_json(layout.fs, layout.task_marker(phase.index, t), marker)
    return marker


def _tables(layout: RunLayout, paths: list[str], sizes: list[int], dropped: str):
    """The rows of the parts without the columns starting with `dropped`, in tables of `sizes` rows."""
    pending: list[pa.Table] = []
    held = 0
    wanted = iter(sizes)
    need = next(wanted, None)
    for path in paths:
        with layout.fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            columns = [c for c in pf.schema_arrow.names if not c.startswith(dropped)]
            for batch in pf.iter_batches(columns=columns):
                pending.append(pa.Table.from_batches([batch]))
                held += batch.num_rows
                while need is not None and held >= need:
                    table = pa.concat_tables(pending)
                    yield table.slice(0, need).combine_chunks()
                    pending, held = [table.slice(need)], held - need
                    need = next(wanted, None)
    if need is not None or held:
        raise RuntimeError("a phase's parts do not hold the rows its marker counts: a bug in ylink")


class Reuse:
    """The reuse files of one run folder, for the run of `keys` (one per phase)."""

    def __init__(self, layout: RunLayout, phases: list[Phase], keys: list[PhaseKey],
                 note: Callable[[str], None]):
        self.layout, self.phases, self.keys, self.note = layout, phases, keys, note

    def _key_file(self, phase: int) -> str:
        return self.layout.work(f"phase{phase}", KEY_FILE)

    def _info(self, phase: int) -> dict[str, Any] | None:
        return load_marker(self.layout, self._key_file(phase))

    def mark(self, phase: Phase) -> None:
        """Before a phase's first task: its folder says which key its files are of."""
        key = self.keys[phase.index]
        info = self._info(phase.index)
        if info is None or info.get("key") != key.key or info.get("prefix") != key.prefix:
            write_json(self.layout.fs, self._key_file(phase.index), {"key": key.key, "prefix": key.prefix})

    def select(self, old: dict[str, Any], new: dict[str, Any]) -> str:
        """Keep the phases the run can reuse, remove the rest (and the publish markers); returns the
        line that says what is reused and what is recomputed. A phase whose global op changed keeps
        its parts, marked for their keys to be remade (`prepare`)."""
        kept: list[str] = []
        for phase, key in zip(self.phases, self.keys):
            info = self._info(phase.index)
            if info is None:
                break
            if info.get("key") == key.key and self._verified(phase, info):
                kept.append(f"{phase.index} ({phase.label(keys_remade=bool(info.get('rekey')))})")
                continue
            if (phase.outgoing is not None and info.get("prefix") == key.prefix and info.get("files") is not None
                    and self._complete(phase) and self._verified(phase, info)):
                self._drop_decisions(phase.index)
                write_json(self.layout.fs, self._key_file(phase.index),
                           {"key": key.key, "prefix": key.prefix, "rekey": True})
                kept.append(f"{phase.index} ({phase.label(keys_remade=True)})")
            break
        first = len(kept)
        for path in self.layout.fs.glob(self.layout.work("phase*")):
            index = path.rstrip("/").rsplit("phase", 1)[-1]
            if index.isdigit() and int(index) >= first:
                remove(self.layout.fs, path, recursive=True)
        for name in ("publish", "next"):
            if self.layout.fs.exists(self.layout.work(name)):
                remove(self.layout.fs, self.layout.work(name), recursive=True)
        reused = f"reusing phase{'s' if len(kept) > 1 else ''} {', '.join(kept)}; " if kept else ""
        return f"{reused}recomputing from {describe_change(old, new)}"

    def _verified(self, phase: Phase, info: dict[str, Any]) -> bool:
        """A sealed phase's files are what reuse.json says (their sha256); an unsealed one (a run
        interrupted in it) is resumed as any run is, from its tasks' markers."""
        files = info.get("files")
        if files is None:
            return True
        for rel, digest in files.items():
            path = self.layout.work(f"phase{phase.index}", rel)
            if not self.layout.fs.exists(path) or sha256_of(self.layout.fs, path) != digest:
                self.note(f"reuse files of phase {phase.index}: {rel} is not what was kept; the phase runs again")
                return False
        return True

    def _complete(self, phase: Phase) -> bool:
        """Every task's marker records the tables it wrote (markers of an older ylink do not)."""
        markers = self._markers(phase.index)
        return bool(markers) and all("batches" in m for m in markers.values())

    def _markers(self, phase: int) -> dict[int, dict[str, Any]]:
        folder = self.layout.work(f"phase{phase}", "done")
        if not self.layout.fs.exists(folder):
            return {}
        out = {}
        for path in self.layout.fs.ls(folder, detail=False):
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("task-") and name.endswith(".json"):
                marker = load_marker(self.layout, path)
                if marker is not None:
                    out[int(name[5:10])] = marker
        return out

    def _drop_decisions(self, phase: int) -> None:
        for path in (self.layout.resolve_marker(phase), self.layout.resolve_dir(phase)):
            if self.layout.fs.exists(path):
                remove(self.layout.fs, path, recursive=True)

    def prepare(self, phase: Phase, run: Callable[[list[RekeySpec]], None], cfg: PipelineConfig,
                expected: Expected) -> None:
        """Before a phase runs: its folder says which key its files are of (`mark`), and what `select`
        began for it is finished (also after a kill): every task whose marker is not of the phase's key
        gets its parts written again (`rekey_task`), then the old parts go."""
        self.mark(phase)
        info = self._info(phase.index)
        if not info or not info.get("rekey"):
            return
        key = self.keys[phase.index].key
        markers = self._markers(phase.index)
        run([RekeySpec(cfg, phase, t, m, key, expected) for t, m in sorted(markers.items()) if m.get("keys") != key])
        used = {p["path"] for m in self._markers(phase.index).values() for p in m["parts"]}
        folder = self.layout.work(f"phase{phase.index}")
        for path in self.layout.fs.find(folder):
            if path.endswith(".parquet") and "/out/" not in path and path not in used:
                remove(self.layout.fs, path)
        write_json(self.layout.fs, self._key_file(phase.index), {"key": key, "prefix": self.keys[phase.index].prefix})

    def keep_for_reuse(self) -> None:
        """The end of a run: keep the folder of each phase that ends in a global op, with only the files
        later reuse reads, and their sha256 in its reuse.json; remove everything else in _work/."""
        fs, work = self.layout.fs, self.layout.work()
        if not fs.exists(work):
            return
        keep = set()
        for phase, key in zip(self.phases, self.keys):
            info = self._info(phase.index)
            if phase.final or info is None or info.get("key") != key.key or info.get("rekey"):
                continue
            folder = self.layout.work(f"phase{phase.index}")
            resolved = load_marker(self.layout, self.layout.resolve_marker(phase.index))
            if resolved is None:
                continue
            wanted = {self.layout.resolve_marker(phase.index), *resolved["decisions"]}
            known = {}  # the sha256 the tasks took while they wrote their files
            for t, marker in self._markers(phase.index).items():
                wanted.add(self.layout.task_marker(phase.index, t))
                known |= {p["path"]: p.get("sha256") for p in marker["parts"]}
                known |= {self.layout.staged(phase.index, e["path"]): e.get("sha256")
                          for kind in ("rejected", "quarantine") for e in marker[kind]}
            wanted |= set(known)
            for path in fs.find(folder):
                if path not in wanted and not path.endswith(f"/{KEY_FILE}"):
                    remove(fs, path)
            if info.get("files") is None:
                files = {self.layout.relative(p)[len(f"_work/phase{phase.index}/"):]: known.get(p) or sha256_of(fs, p)
                         for p in sorted(wanted)}
                write_json(fs, self._key_file(phase.index), {**info, "files": files})
            keep.add(folder.rstrip("/"))
        sample = self.layout.sample_cut
        for path in fs.ls(work, detail=False):
            if path.rstrip("/") not in keep and path.rstrip("/") != sample:
                remove(fs, path, recursive=True)
        if not keep:
            remove(fs, work, recursive=True)


def clean(url: str, storage_options: dict[str, Any] | None = None,
          note: Callable[[str], None] = lambda line: None) -> int:
    """`ylink clean OUTPUT`: remove the reuse files of the finished run in `url` (its _work/), after
    completing a replacement an interrupted command began (engine/swap.py); returns the bytes they held.
    An unfinished run's _work/ is its progress: refused, in one line."""
    from ylink_data.core.errors import RunStateError
    from ylink_data.engine.lock import hold_run_folder
    from ylink_data.engine.swap import finish_swap

    layout = RunLayout.for_url(url, storage_options or {})
    with hold_run_folder(layout, note), layout.writing():
        layout.sweep()
        finish_swap(layout)
        if not layout.fs.exists(layout.work()):
            return 0
        if not layout.exists(layout.manifest):
            raise RunStateError(f"{url} holds no finished run (no manifest.json): its _work/ is the progress of an "
                                "unfinished run; rerun it to finish it, or rerun with --fresh to start over")
        held = reuse_bytes(layout)
        layout.remove_work()
        return held


def reuse_bytes(layout: RunLayout) -> int:
    """The bytes of the files in _work/."""
    if not layout.fs.exists(layout.work()):
        return 0
    return sum(int(i.get("size") or 0) for i in layout.fs.find(layout.work(), detail=True).values())


__all__ = ["KEY_FILE", "PhaseKey", "phase_keys", "describe_change", "RekeySpec", "rekey_task", "Reuse",
           "clean", "reuse_bytes"]
