"""The driver of a run: plan, check the output folder, run the phases' tasks, publish the shards,
then write stats.json and, last, manifest.json.

Tasks run in this process, in worker processes on this machine, or on Ray, through the same task
functions (`submit.where_to_run`, `ray.execution`); what a batch needs starts on first use and serves
the run's later batches.

Resume is built in: every task leaves a completion marker, and a rerun of the same config skips the
tasks that have one. Because tasks are defined by the input splits and name their outputs
deterministically, a resumed run writes exactly what an uninterrupted one would.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple, Sequence

from ylink_data.core.version import __version__
from ylink_data.engine.config import PipelineConfig, load_config
from ylink_data.core.errors import RunStateError
from ylink_data.core.storage import read_json, remove, write_json, writing_into
from ylink_data.io.input_versions import changed_files, file_contents, recorded_files
from ylink_data.io.listing import InputFile, input_files
from ylink_data.io.readers import group_splits, plan_splits
from ylink_data.core.redaction import redact_url
from ylink_data.ops import build_op, op_class
from ylink_data.engine.card import write_dataset_card
from ylink_data.engine.files_read import Expected, checked_load, expected_files, files_read
from ylink_data.engine.global_phase import GlobalContext
from ylink_data.io.layout import RunLayout
from ylink_data.io.manifest import FORMAT_VERSION, SHARDS, TASK_FILES, Manifest, write_manifest
from ylink_data.io.sinks import Sink, plan_sinks, publish_label
from ylink_data.engine.lock import FolderLock, hold_run_folder
from ylink_data.engine.node_paths import node_local_warning
from ylink_data.engine.plan import Phase, plan_phases, stage_names
from ylink_data.engine.progress import RunProgress
from ylink_data.engine.preflight import preflight
from ylink_data.engine.publish import publish, publish_plan, recorded
from ylink_data.engine.reuse import RekeySpec, Reuse, phase_keys, rekey_task
from ylink_data.engine.swap import finish_swap, next_layout, remove_published, swap
from ylink_data.engine.stats import TaskStats, check_invariant, records_in, run_stats, timing_stats, token_stats
from ylink_data.engine.executors import Executor
from ylink_data.engine.submit import FAIL_AFTER_ENV, FAIL_EXIT_CODE, Scheduler  # noqa: F401 -- names tests use
from ylink_data.engine.executors.base import resume_hint
from ylink_data.engine.tasks import TaskSpec, current_marker, execute_task, load_marker, sample_scan, split_bytes


# run.json: [url, content id] of every input file, in the fingerprinted configuration once phase 0 has
# read them (io/input_versions.py), and [url, stamp] of the local ones whose stamp can vouch for them.
INPUT_CONTENT, INPUT_STAMPS = "input content", "input stamps"


class RunResult(NamedTuple):
    """What `run` returns: the run folder and its stats; unpacks as `path, stats = run(...)`."""

    path: str
    """The run folder (local path or URL), as `output.path` names it."""
    stats: dict[str, Any]
    """stats.json of the run (`ylink_data.open_run(path).stats`)."""


def run(pipeline: str | os.PathLike | dict, *, fresh: bool = False, progress: bool | None = None,
        reuse: bool = True, **overrides: Any) -> RunResult:
    """Run a pipeline (a YAML path or a dict). `overrides` set keys by dotted path, as `--set` does:
    `run("p.yaml", **{"output.path": "/tmp/x"})`, or merge nested values: `run(p, ray={"num_cpus": 2})`.
    A folder that holds a run of another configuration is rerun reusing its unchanged phases
    (engine/reuse.py); `reuse=False` refuses it instead (`ylink run --no-reuse`), `fresh=True` recomputes all."""
    cfg = load_config(pipeline, overrides)
    with cfg.redacting_errors():
        return Runner(cfg, fresh=fresh, progress=progress, reuse=reuse).run()


@dataclass
class _Plan:
    files: list[InputFile]
    tasks: list[list]
    phases: list[Phase]
    fingerprint: str  # of the configuration and the input files' names and sizes: run.json's "plan_fingerprint"
    fingerprinted: dict[str, Any]
    sinks: list[Sink]  # the output formats: Parquet shards, and what `output:` asks for
    # The fingerprint with the content of every input file (run.json's "fingerprint", the manifest's),
    # known once phase 0 has read them all (`Runner._record_input_content`).
    sealed: str | None = None
    stamps: list[list] | None = None  # [url, stamp] of the local input files whose stamp can vouch for them
    expected: Expected = field(default_factory=dict)  # what every worker checks the ops' files against

    @property
    def splits(self) -> list:
        return [split for task in self.tasks for split in task]


class Runner:
    def __init__(self, cfg: PipelineConfig, fresh: bool = False, progress: bool | None = None, reuse: bool = True):
        self.cfg = cfg
        self.fresh = fresh
        self.reusing = reuse  # False: a folder of another configuration is refused (--no-reuse)
        self.layout = RunLayout.for_url(cfg.output.path, cfg.storage_options(cfg.output.path))
        # Where the run's files are published: its folder, or, replacing a finished run of another
        # configuration, that folder's _work/next/ until the swap (engine/swap.py).
        self.out = self.layout
        self.progress = RunProgress(progress)
        self.started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        self.scheduler = Scheduler(cfg.ray, on_start=self._warn_about_node_local_paths,
                                   on_notice=self.progress.waiting,
                                   preload=_worker_modules(cfg.ops), resume_hint=resume_hint(fresh))
        # The last op that routes documents into output tiers decides the tier folders.
        routes = [build_op(name, params).output_tiers() for name, params in cfg.ops]
        self.tiers: tuple[str, list[str]] | None = next((r for r in reversed(routes) if r), None)

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        self._started = time.time()
        self._driver_cpu = time.process_time()
        with self.scheduler:
            self.scheduler.warm_up()
            plan = self.plan()
            # What `ylink validate` refuses is refused here too, before anything is written (preflight.py).
            for warning in preflight(self.cfg, plan.files, plan.splits):
                self.progress.note(warning)
            # Every file of the run takes shape in _work/staging/ (core/storage.py), here as in tasks.
            with hold_run_folder(self.layout, self.progress.note, resume_hint(self.fresh)) as lock, self.layout.writing():
                return self._run_holding(plan, lock)

    def _run_holding(self, plan: _Plan, lock: FolderLock) -> RunResult:
        now = json.loads(json.dumps(self.cfg.redact(plan.fingerprinted), default=str))
        self.reuse = Reuse(self.layout, plan.phases, phase_keys(now, plan.phases), self.progress.note)
        done = self._check_output_folder(plan, lock)
        if done is not None:
            return done
        write_json(self.out.fs, self.out.run_info, self._run_info(plan))
        with self.progress:
            cut = self._sample_cut(plan)
            markers: dict[int, dict[int, dict]] = {}
            decisions: list[str] = []
            for phase in plan.phases:
                self.reuse.prepare(phase, lambda specs: self._remake_keys(phase, specs), self.cfg, plan.expected)
                markers[phase.index] = self._run_phase(phase, plan, markers.get(phase.index - 1, {}), decisions, cut)
                if phase.index == 0:
                    self._record_input_content(plan, markers[0])
                if phase.outgoing:
                    decisions = self._resolve(phase, markers[phase.index], plan.expected)
            published = self._publish(markers, plan.sinks)
        shards = published[SHARDS]
        # A shard's marker holds each sink's entry (its Megatron pair, JSONL files): the manifest
        # lists them apart, in each sink's section.
        entries = {sink.name: [s.pop(sink.name) for s in shards if sink.name in s] for sink in plan.sinks}
        entries[SHARDS] = shards
        total = TaskStats()
        for phase_markers in markers.values():
            for marker in phase_markers.values():
                total.add(TaskStats.from_json(marker["stats"]))
        stats = run_stats(total, stage_names(self.cfg.ops), sum(s["rows"] for s in shards))
        token_columns = [op_class(name).writes_tokens for name, _ in self.cfg.ops if op_class(name).writes_tokens]
        out = self.out
        if token_columns:  # token counts of the published shards (stats.token_stats), the last op's that wrote tokens
            stats["tokens"] = token_stats(out.fs, out.root, shards, token_columns[-1])
        stats["timing"] = timing_stats(self.scheduler.timings, self._started, time.time(),
                                       time.process_time() - self._driver_cpu)
        gap = check_invariant(stats)
        if gap:
            raise RuntimeError(f"{gap}; this is a bug in ylink, please report it with {self.layout.run_info}")
        write_json(out.fs, out.stats, stats)
        # README.md: the run as a dataset (card.py)
        write_dataset_card(out, self.cfg, stats, shards, published["rejected"])
        manifest = Manifest(name=self.cfg.name, fingerprint=plan.sealed, rows=stats["output_records"],
                            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                            ylink_version=__version__,
                            task_files={kind: {"rows": sum(f["rows"] for f in published[kind]), "files": published[kind]}
                                        for kind in TASK_FILES})
        tiers = self.tiers[1] if self.tiers else []
        tier_sections: dict[str, dict[str, Any]] = {tier: {} for tier in tiers}
        for sink in plan.sinks:  # each lists its files, of the run and of each tier folder
            manifest.sections[sink.name] = sink.section(entries[sink.name])
            sink.finish(out.fs, out.root, manifest.sections[sink.name], at=self.layout.root)
            for tier in tiers:
                folder = "/".join(out.tier_dir(tier))
                tier_sections[tier][sink.name] = sink.section(entries[sink.name], folder)
                sink.finish(out.fs, out.path(folder), tier_sections[tier][sink.name], at=self.layout.path(folder))
        lock.check()  # the manifest says "complete": only the run that holds the folder may write it
        if self.tiers:
            manifest.tiers = self._write_tier_manifests(manifest, tier_sections, stats)
        self._remove_unlisted(manifest, out)
        write_manifest(out.fs, out.manifest, manifest)
        if out is not self.layout:  # complete in _work/next/: it replaces the finished run (engine/swap.py)
            self._check_published(manifest, out)
            lock.check()
            swap(self.layout)
        self.reuse.keep_for_reuse()  # only what later reuse can use stays in _work/ (engine/reuse.py)
        self._check_published(manifest)
        self.progress.note(f"done: {records_in(stats)}, {stats['output_records']:,} kept, "
                           f"{stats['quarantined']:,} quarantined -> {self.layout.url}")
        return RunResult(self.layout.url, stats)

    def _write_tier_manifests(self, manifest: Manifest, sections: dict[str, dict[str, Any]],
                              stats: dict) -> dict[str, dict]:
        """Each tier folder is a run of its own for readers (open_run, ShardLoader, `datasets`): a
        dataset card and a manifest of its shards (and each sink's files), paths relative to the tier
        folder. The run's manifest lists every shard and file."""
        out = {}
        layout = self.out
        for tier in self.tiers[1]:
            prefix = "/".join(layout.tier_dir(tier))
            rows = sum(s["rows"] for s in sections[tier][SHARDS])
            own = replace(manifest, name=f"{manifest.name}/{tier}", tier=tier, rows=rows, sections=sections[tier],
                          task_files={})
            tier_layout = RunLayout(layout.path(prefix), layout.fs, f"{layout.url}/{prefix}")
            write_dataset_card(tier_layout, self.cfg, {**stats, "output_records": rows}, own.shards, [])
            write_manifest(layout.fs, layout.path(prefix, "manifest.json"), own)
            out[tier] = {"path": prefix, "rows": rows}
        return out

    def plan(self) -> _Plan:
        # The output folder is never an input, also when it lies inside an input folder.
        files = input_files(self.cfg.input, self.cfg.storage_options, exclude=self.layout.url)
        splits = plan_splits(files, self.cfg.input, self.cfg.storage_options)
        tasks = group_splits(splits, self.cfg.input.split_bytes)
        # URLs without their credentials: run.json shows this, and rotating a password is no new run.
        # input.sample and sample_seed are left out when there is no sample (the seed then changes
        # nothing): runs from before they existed keep their fingerprint. With a sample both count,
        # so that another sample never resumes, or passes for, a run of this one. A previous run's
        # shard counts with its sha256 too: that run rerun differently is other input.
        # A path list counts by its lines (the input files below), its name and base without credentials;
        # unset paths_from/paths_base are left out, so that runs from before they existed keep theirs.
        inp = self.cfg.input
        unsampled = {"sample", "sample_seed"} if inp.sample is None else set()
        listed = ({"paths_from": redact_url(inp.paths_from)}
                  | ({"paths_base": redact_url(inp.paths_base)} if inp.paths_base else {})
                  if inp.paths_from else {"paths": [redact_url(p) for p in inp.paths]})
        fingerprinted = {
            "format_version": FORMAT_VERSION,
            "input": inp.model_dump(exclude=unsampled | {"paths", "paths_from", "paths_base"}) | listed,
            "input files": [[redact_url(f.url), f.size, *([f.sha256] if f.run_shard else [])] for f in files],
            # Unset output options (megatron: null) are left out: runs from before they existed keep
            # their fingerprint, and so resume or stay complete.
            "output": self.cfg.output.model_dump(exclude={"path"}, exclude_none=True),
            # Ops may leave out parameters that change no output (an LLM op: its server and key).
            "stages": [[name, _fingerprint_params(name, params)] for name, params in self.cfg.ops],
        }
        # The content of every file the ops read (models, tokenizers, benchmarks, prompts, lists):
        # a file changed in place is another run. Left out when there is none, as above.
        read = files_read(self.cfg)
        if read:
            fingerprinted["files read"] = read
        return _Plan(files, tasks, plan_phases(self.cfg.ops), _digest(fingerprinted), fingerprinted,
                     plan_sinks(self.cfg), expected=expected_files(self.cfg, read))

    # ------------------------------------------------------------------ output folder state

    def _check_output_folder(self, plan: _Plan, lock: FolderLock) -> RunResult | None:
        """Refuse to mix runs: a different config in the same folder, or input files whose content
        changed since the run read them, needs --fresh. Returns the finished run when this exact run
        is already complete."""
        layout = self.layout
        foreign = layout.foreign_entries()
        if foreign:
            raise RunStateError(f"output.path {layout.url} holds files that are not a ylink run "
                                f"({', '.join(foreign[:3])}); choose an empty or new folder")
        layout.sweep()  # what writers killed before their rename left: never resumed from, never published
        if finish_swap(layout):
            self.progress.note(f"{layout.url}: completed the replacement of its run that an interrupted command began")
        previous = load_marker(layout, layout.run_info)
        if previous is None:
            if layout.exists(layout.manifest) or layout.has_files(layout.work()):
                if not self.fresh:
                    raise RunStateError(f"output.path {layout.url} holds a run without run.json; "
                                        "rerun with --fresh to replace it")
                self._remove_run(lock)
            return None
        # run.json's "fingerprint" holds the inputs' content once phase 0 has read them; the
        # configuration alone is "plan_fingerprint" (runs from before it existed: "fingerprint").
        same = previous.get("plan_fingerprint", previous.get("fingerprint")) == plan.fingerprint
        if not same and not self.fresh:
            # run.json holds it redacted and through JSON: compare like with like, or a parameter
            # that holds a credential would always count as changed.
            now = json.loads(json.dumps(self.cfg.redact(plan.fingerprinted), default=str))
            if self.reusing:
                self._reuse(previous, now, plan, lock)
                return None
            changed = [k for k, v in now.items() if previous.get("fingerprinted", {}).get(k) != v]
            what = ", ".join(changed) or "the configuration"
            raise RunStateError(f"output.path {layout.url} holds a run of a different configuration "
                                f"(changed: {what}) and --no-reuse refuses to replace it; rerun without --no-reuse "
                                "to reuse its unchanged phases, with --fresh to recompute all, or choose another output.path")
        if self.fresh:
            self._fresh(previous, lock)
            return None
        manifest = load_marker(layout, layout.manifest)
        self._check_inputs_unchanged(previous, manifest is not None, plan.files)
        if manifest is not None:
            if manifest.get("fingerprint") != previous.get("fingerprint"):
                raise RunStateError(f"output.path {layout.url} holds a finished run whose manifest.json is of another "
                                    "configuration than its run.json; rerun with --fresh to replace it")
            missing = layout.missing_shards(manifest)
            if not missing:
                self._remove_unlisted(Manifest.from_dict(manifest))
                self.reuse.keep_for_reuse()
                self.progress.note(f"{layout.url} is already complete (same configuration); --fresh reruns it")
                return RunResult(layout.url, read_json(layout.fs, layout.stats))
            # A manifest must never list missing shards: withdraw them all (the tiers' too). A finished
            # run keeps no _work/ to publish from, so the whole pipeline runs again; a _work/ left by an
            # interrupted clean-up goes too, as its publish markers would vouch for the missing shards.
            lock.check()
            with writing_into(layout.url):
                layout.withdraw_manifests()
                layout.remove_work()
            self.progress.note(f"{layout.url}: {len(missing)} shard(s) listed in manifest.json are missing or "
                               f"changed ({', '.join(missing[:3])}); running the pipeline again")
            return None
        self.progress.note(f"resuming the unfinished run in {layout.url}")
        return None

    def _fresh(self, previous: dict[str, Any], lock: FolderLock) -> None:
        """--fresh: everything recomputed. A finished run stays published until the new one is
        complete (its _work/ goes, the new run publishes in _work/next/ and is swapped in, as a
        reuse rerun is); anything else in the folder goes now."""
        layout = self.layout
        manifest = load_marker(layout, layout.manifest)
        if manifest is None or manifest.get("fingerprint") != previous.get("fingerprint") \
                or layout.missing_shards(manifest):
            self._remove_run(lock)
            return
        lock.check()
        with writing_into(layout.url):
            layout.remove_work()
        self.out = next_layout(layout)

    def _reuse(self, previous: dict[str, Any], now: dict[str, Any], plan: _Plan, lock: FolderLock) -> None:
        """A rerun of another configuration: the phases it can reuse are kept, the rest removed, and one
        line says which (engine/reuse.py). A finished run stays published until the new one is complete
        (published in _work/next/, then swapped: engine/swap.py); an unfinished one's files go now."""
        layout = self.layout
        manifest = load_marker(layout, layout.manifest)
        self._check_inputs_unchanged(previous, manifest is not None, plan.files)
        lock.check()
        with writing_into(layout.url):
            line = self.reuse.select(previous.get("fingerprinted", {}), now)
            if manifest is not None and manifest.get("fingerprint") == previous.get("fingerprint") \
                    and not layout.missing_shards(manifest):
                self.out = next_layout(layout)
            else:
                remove_published(layout, keep_run_info=True)  # this run's run.json replaces it next
        self.progress.note(line)

    def _remake_keys(self, phase: Phase, specs: list[RekeySpec]) -> None:
        """The phase's parts written again with its global op's new keys (engine/reuse.py)."""
        if not specs:
            return
        handle = self.progress.phase(f"phase {phase.index}: {phase.outgoing[1]} keys made again", len(specs))
        self.scheduler.run(rekey_task, [(s,) for s in specs], on_done=lambda i, m: self.progress.advance(handle),
                           describe=lambda i: f"phase {phase.index} task {specs[i].task} (keys)",
                           step=f"phase {phase.index} keys", ids=[s.task for s in specs])
        self.progress.finish(handle)

    def _check_inputs_unchanged(self, previous: dict[str, Any], finished: bool, files: list[InputFile]) -> None:
        """The input files hold what the run in the folder read (io/input_versions.py): a finished
        run's content ids (run.json), an unfinished one's tasks' records of what they read (their
        markers, and input.sample's pass). A file that changed since is one line: the run is of other
        input now, and resuming it would publish documents of both versions of the file."""
        layout = self.layout
        if finished:
            contents = previous.get("fingerprinted", {}).get(INPUT_CONTENT)
            records = None if contents is None else recorded_files(contents, previous.get(INPUT_STAMPS, []))
        else:
            read = list(self._existing_markers(layout.work("phase0", "done")).values())
            sample = load_marker(layout, layout.sample_cut)
            read += [sample] if sample is not None else []
            records = None if any("inputs" not in m for m in read) else [r for m in read for r in m["inputs"]]
        if records is None:
            raise RunStateError(f"output.path {layout.url} holds a run from before ylink recorded what its input "
                                f"files hold (ylink {previous.get('ylink_version', '?')}), so whether they changed "
                                "since cannot be told; rerun with --fresh to replace it")
        changed = changed_files(records, files, self.cfg.storage_options)
        if changed:
            more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            raise RunStateError(f"output.path {layout.url} holds a run whose input files changed since it read "
                                f"them (same name and size): {', '.join(changed[:3])}{more}; rerun with --fresh to "
                                "replace it, or choose another output.path")

    def _record_input_content(self, plan: _Plan, markers: dict[int, dict]) -> None:
        """Once phase 0 has read every input file: each file's content id goes into the fingerprinted
        configuration, and run.json's fingerprint (the manifest's) becomes that of the configuration
        with the content of its inputs; the stamps that can vouch for a file spare a rerun hashing it."""
        records = [r for m in markers.values() for r in m["inputs"]]
        contents, plan.stamps = file_contents(plan.files, records)
        plan.fingerprinted[INPUT_CONTENT] = contents
        plan.sealed = _digest(plan.fingerprinted)
        write_json(self.out.fs, self.out.run_info, self._run_info(plan))

    def _remove_run(self, lock: FolderLock) -> None:
        lock.check()
        with writing_into(self.layout.url):
            self.layout.remove_run()

    def _remove_unlisted(self, manifest: Manifest, layout: RunLayout | None = None) -> None:
        """Nothing is published that the manifest does not list: the run's own files it does not
        list (an attempt's leftovers) are removed; a file that is not the run's stops it here."""
        layout = layout or self.layout
        own, foreign = layout.unlisted(manifest)
        if foreign:
            raise RunStateError(f"output.path {self.layout.url} holds files that are not the run's, where readers would "
                                f"take them for its data ({', '.join(foreign[:3])}); move them out of the run folder, "
                                "then rerun to finish it")
        for rel in own:
            remove(layout.fs, layout.path(rel))

    def _check_published(self, manifest: Manifest, layout: RunLayout | None = None) -> None:
        """The end of every run: the folder's listing is its manifest's (RunLayout.listing_problems),
        or the manifest is withdrawn and the run fails in one line."""
        layout = layout or self.layout
        problems = layout.listing_problems(manifest)
        if problems:
            layout.withdraw_manifests()
            raise RunStateError(f"output.path {self.layout.url}: once published, its files are not those its manifest "
                                f"lists ({', '.join(problems[:3])}); the manifest was withdrawn: rerun to finish the run")

    def _run_info(self, plan: _Plan) -> dict[str, Any]:
        return self.cfg.redact({
            "version": FORMAT_VERSION, "name": self.cfg.name, "fingerprint": plan.sealed or plan.fingerprint,
            "plan_fingerprint": plan.fingerprint, "fingerprinted": plan.fingerprinted,
            **({INPUT_STAMPS: plan.stamps} if plan.sealed else {}),
            "config": self.cfg.model_dump(exclude={"ops"}),
            "tasks": len(plan.tasks), "started": self.started,
            "ylink_version": __version__})

    def _warn_about_node_local_paths(self, executor: Executor) -> None:
        warning = node_local_warning(self.cfg, executor.other_nodes())
        if warning:
            self.progress.note(warning)

    # ------------------------------------------------------------------ phases

    def _run_phase(self, phase: Phase, plan: _Plan, previous: dict[int, dict], decisions: list[str],
                   sample_cut: tuple[int, str] | None = None) -> dict[int, dict]:
        markers = {t: m for t, m in self._existing_markers(self.layout.work(f"phase{phase.index}", "done")).items()
                   if current_marker(m)}
        where = self.scheduler.where(len(plan.tasks) - len(markers))  # started before memory:// inputs are put
        specs = []
        for t, splits in enumerate(plan.tasks):
            if t in markers:
                continue
            spec = TaskSpec(self.cfg, phase, t, tiers=self.tiers, files_read=plan.expected)
            if phase.index == 0:
                spec.splits = splits
                spec.inline = self._inline_inputs(splits, where)
                spec.sample_cut = sample_cut
            else:
                spec.parts = [p["path"] for p in previous[t]["parts"]]
                spec.decisions = decisions
            specs.append(spec)
        label = self._phase_label(phase)
        handle = self.progress.phase(label, len(plan.tasks), len(plan.tasks) - len(specs))

        def on_done(i: int, marker: dict) -> None:
            markers[specs[i].task] = marker
            read = marker["stats"]["stages"].get("0")
            docs = read["out"] if read else sum(p["rows"] for p in marker["parts"])
            # Files whose last split this task read: a file split into ranges counts once.
            files = sum(1 for split in specs[i].splits if split.end is None)
            self.progress.advance(handle, docs, marker["stats"].get("input_bytes", 0), files)

        self.scheduler.run(execute_task, [(s,) for s in specs], on_done=on_done,
                           describe=lambda i: _describe_task(specs[i]), where=where,
                           step=f"phase {phase.index}", ids=[s.task for s in specs],
                           costs=[_task_cost(s, previous) for s in specs])
        self.progress.finish(handle)
        return markers

    def _sample_cut(self, plan: _Plan) -> tuple[int, str] | None:
        """input.sample = N: the (priority, id) of the N-th lowest document of the whole input
        (`tasks.sample_priority`), which phase 0 keeps with every document at or below it; None when
        there is no sample or the input has at most N documents. Found by a pass over the input in
        tasks run as phase 0's are (one per task of the plan, each returning its own N lowest), merged
        here; saved in _work/ before any phase 0 task runs, so that a resumed run reads it back instead
        of scanning again (the fingerprint holds sample and sample_seed: a saved cut is of this sample)."""
        n, seed = self.cfg.input.sample, self.cfg.input.sample_seed
        if n is None:
            return None
        saved = load_marker(self.layout, self.layout.sample_cut)
        if saved is not None and saved.get("sample") == n and saved.get("sample_seed") == seed:
            return tuple(saved["cut"]) if saved["cut"] is not None else None
        where = self.scheduler.where(len(plan.tasks))
        specs = [TaskSpec(self.cfg, plan.phases[0], t, splits=splits, inline=self._inline_inputs(splits, where),
                          files_read=plan.expected)
                 for t, splits in enumerate(plan.tasks)]
        handle = self.progress.phase(f"sample: rank every document, keep {n:,}", len(specs))
        lowest: list[tuple[int, str]] = []
        documents = 0
        reads: list[dict] = []  # what the pass read: a resumed run checks the files still hold it

        def on_done(i: int, result: dict) -> None:
            nonlocal lowest, documents
            lowest = heapq.nsmallest(n, [*lowest, *(tuple(key) for key in result["lowest"])])
            documents += result["documents"]
            reads.extend(result["inputs"])
            files = sum(1 for split in specs[i].splits if split.end is None)
            self.progress.advance(handle, result["documents"], result["bytes"], files)

        self.scheduler.run(sample_scan, [(s,) for s in specs], on_done=on_done,
                           describe=lambda i: _describe_task(specs[i], "sample pass"), where=where,
                           step="sample pass", costs=[_task_cost(s, {}) for s in specs])
        self.progress.finish(handle)
        cut = list(lowest[-1]) if documents > n else None
        write_json(self.layout.fs, self.layout.sample_cut,
                   {"sample": n, "sample_seed": seed, "documents": documents, "cut": cut, "inputs": reads})
        return tuple(cut) if cut is not None else None

    def _inline_inputs(self, splits, where: str) -> dict[str, Any]:
        """memory:// lives in this process only: ship such inputs to tasks elsewhere, as their
        executor puts objects (bytes to worker processes, Ray's object store)."""
        inline = {}
        executor = self.scheduler.executor(where)
        for split in splits:
            if not executor.in_this_process and split.url.startswith("memory://"):
                import fsspec

                inline[split.url] = executor.put(fsspec.filesystem("memory").cat_file(split.url))
        return inline

    def _phase_label(self, phase: Phase) -> str:
        return f"phase {phase.index}: {phase.label()}"

    def _resolve(self, phase: Phase, markers: dict[int, dict], expected: Expected) -> list[str]:
        marker_path = self.layout.resolve_marker(phase.index)
        done = load_marker(self.layout, marker_path)
        if done is not None:
            return done["decisions"]
        idx, name, params = phase.outgoing
        op = op_class(name)(**params)
        ctx = GlobalContext(
            layout=self.layout, phase=phase.index, ref=phase.outgoing, storage=self.cfg.storage_options,
            parts={t: [p["path"] for p in m["parts"]] for t, m in markers.items()},
            rows={t: sum(p["rows"] for p in m["parts"]) for t, m in markers.items()},
            runner=self._run_helper_tasks, cpus=self.scheduler.cpus())
        # What an interrupted attempt spilled is not reused: a rerun may cut other partitions
        # (other CPUs), and a file it does not overwrite would be read as its own.
        if self.layout.fs.exists(self.layout.resolve_dir(phase.index)):
            self.layout.fs.rm(self.layout.resolve_dir(phase.index), recursive=True)
        # the files it reads (a saved index) are what run.json names; checked before only, as the op may
        # write them itself (minhash_dedup's save_index into the folder of its index)
        checked_load(self.cfg, idx - 1, name, params, expected, lambda: None)
        op.resolve(ctx)
        write_json(self.layout.fs, marker_path, {"op": name, "decisions": ctx.decisions})
        self.scheduler.counter.completed_one()
        return ctx.decisions

    def _run_helper_tasks(self, fn: Callable, args_list: Sequence[tuple], label: str) -> list[Any]:
        """Run `fn(*args)` for each args as tasks (used by global ops); results in input order."""
        results: dict[int, Any] = {}
        handle = self.progress.phase(f"  {label}", len(args_list))

        def on_done(i: int, result: Any) -> None:
            results[i] = result
            self.progress.advance(handle)

        self.scheduler.run(fn, list(args_list), on_done=on_done, describe=lambda i: f"{label} #{i}",
                           lone_to_workers=True, step=label)
        self.progress.finish(handle)
        return [results[i] for i in range(len(args_list))]

    def _publish(self, markers: dict[int, dict[int, dict]], sinks: list[Sink]) -> dict[str, list[dict]]:
        """Every job of the publish phase (publish.py) that has no marker yet, after a sweep of what
        killed writers left; the entries of all jobs by kind (shards, rejected, quarantine), in order."""
        self.layout.sweep()
        jobs = publish_plan(self.out, markers, sinks, self.tiers[1] if self.tiers else [None],
                            self.cfg.output.shard_bytes, self.cfg.output.compression)
        entries = recorded(self.layout, jobs)
        todo = [job for job in jobs if job.marker not in entries]
        shards = sum(1 for job in jobs if job.kind == SHARDS)
        handle = self.progress.phase(publish_label(sinks), shards, shards - sum(1 for j in todo if j.kind == SHARDS))

        def on_done(i: int, entry: dict) -> None:
            entries[todo[i].marker] = entry
            if todo[i].kind == SHARDS:
                self.progress.advance(handle, entry["rows"])

        self.scheduler.run(publish, [(job,) for job in todo], on_done=on_done,
                           describe=lambda i: f"publish {todo[i].kind} {todo[i].index}", step="publish",
                           ids=[jobs.index(job) for job in todo],
                           costs=[sum(p.get("bytes", 0) for p in job.parts) for job in todo])
        self.progress.finish(handle)
        return {kind: [entries[job.marker] for job in jobs if job.kind == kind] for kind in (SHARDS, *TASK_FILES)}

    def _existing_markers(self, folder: str, key: str = r"task-(\d+)\.json") -> dict[int, dict]:
        fs = self.layout.fs
        if not fs.exists(folder):
            return {}
        found = {}
        for path in fs.ls(folder, detail=False):
            m = re.search(key + "$", path)
            if m:
                marker = load_marker(self.layout, path)
                if marker is not None:
                    found[int(m.group(1))] = marker
        return found


def _digest(fingerprinted: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fingerprinted, sort_keys=True, default=str).encode()).hexdigest()


def _fingerprint_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return op_class(name).fingerprint_params(params)


def _task_cost(spec: TaskSpec, previous: dict[int, dict]) -> float:
    """A task's estimated cost, to hand out the longest first: the input bytes of its splits (phase
    0), else the bytes of the parts it reads (what the previous phase kept of its documents)."""
    if spec.splits:
        return float(sum(split_bytes(s) for s in spec.splits))
    return float(sum(p.get("bytes", 0) for p in previous.get(spec.task, {}).get("parts", [])))


def _describe_task(spec: TaskSpec, phase: str | None = None) -> str:
    what = ", ".join(s.describe() for s in spec.splits[:2]) + (" ..." if len(spec.splits) > 2 else "")
    return f"{phase or f'phase {spec.phase.index}'} task {spec.task}" + (f" ({what})" if what else "")


def _worker_modules(ops: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What a worker process loads before its first task: the modules of the run's ops (registering
    them; importing every op module costs a worker 1.2 CPU s, most of a dedup run's start on 2 CPUs)
    and what they preload (`Op.preload`)."""
    classes = [op_class(name) for name, _ in ops]
    return sorted({c.__module__ for c in classes} | {m for c in classes for m in c.preload})
