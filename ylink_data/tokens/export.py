"""`ylink export megatron`: Megatron-LM files for a run that is already finished (or any folder whose
manifest the checked reader accepts), without running its pipeline again.

Each shard of the run becomes DIR/megatron/part-NNNNN.bin/.idx (NNNNN: its place in the run's
manifest), made by one Ray task from the shard's `text` tokenized as the `tokenize` op does it
(`encode_texts`), or from its `token_ids` column when no tokenizer is given. Shards are read
verified against the manifest's sha256. DIR/manifest.json (version 1, no shards, the `megatron`
section) makes DIR readable by `read_manifest` and the token loader; DIR/megatron/data-path.txt is
Megatron's weighted --data-path. Resumable: each finished pair leaves a marker in DIR/_work/
naming what it was made from, and a rerun of the same export redoes only the pairs without one;
the manifest is written last and _work/ removed after it. Files take shape in DIR/_work/staging/ and
are renamed into place (core/storage.py), and a rerun first removes what killed writers left there
and under an older ylink's temporary names: DIR/megatron/ never holds a file its manifest does not list.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ylink_data.core.errors import InputError, RunStateError
from ylink_data.core.storage import (filesystem, full_url, is_temporary, join, read_json, remove, staging,
                                     write_json)
from ylink_data.io.manifest import Manifest, ManifestError, ShardRef, read_manifest, write_manifest
from ylink_data.io.sinks.megatron import MegatronSink
from ylink_data.io.layout import file_sizes
from ylink_data.core.redaction import redact_url
from ylink_data.text.tokens.encode import TOKEN_IDS, encode_texts
from ylink_data.text.tokens.load import load_tokenizer
from ylink_data.io.megatron.write import megatron_dtype, write_pair


@dataclass(frozen=True)
class TokenizerSpec:
    """The tokenizer a task loads (once per worker, `load_tokenizer`'s cache)."""

    url: str
    storage_options: dict | None
    eod_token: str | None
    append_eod: bool


@dataclass(frozen=True)
class ShardJob:
    """One shard to turn into one pair: where it is, where its pair goes, and what makes it."""

    run_url: str
    run_options: dict | None
    path: str           # inside the run folder
    ref: ShardRef
    out_url: str
    out_options: dict | None
    prefix: str         # megatron/part-NNNNN
    tokenizer: TokenizerSpec | None  # None: the shard's token_ids
    dtype: str
    source: dict        # what the pair is made from: a marker with another source is redone


def export_megatron(run_url: str, output: str, *, tokenizer: str | None = None, dtype: str = "auto",
                    eod_token: str | None = None, append_eod: bool = True, storage_options: dict | None = None,
                    ray_address: str | None = None, progress: bool | None = None,
                    note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write the Megatron files of the finished run at `run_url` into `output` (see the module
    docstring); returns the manifest written. `storage_options` apply to every non-local URL."""
    from ylink_data.engine.progress import RunProgress

    shown = redact_url(run_url)
    manifest = read_manifest(run_url, _options(run_url, storage_options))
    out_fs, out_root = filesystem(output, _options(output, storage_options))
    out_root = out_root.rstrip("/")
    shown_out = redact_url(output)
    spec = None
    if tokenizer is not None:
        tok = load_tokenizer(tokenizer, _options(tokenizer, storage_options), eod_token)
        if append_eod and tok.eod_id is None:
            raise InputError(f"tokenizer {redact_url(tokenizer)} has no end-of-document token (<|endoftext|>, "
                             "</s>...): name one with --eod-token, or give --no-eod")
        spec = TokenizerSpec(tokenizer, _options(tokenizer, storage_options), eod_token, append_eod)
        token_dtype, described, max_id = tok.dtype, tok.describe(), tok.max_id
        made_of = {"tokenizer_sha256": tok.sha256, "eod_id": tok.eod_id if append_eod else None}
    else:
        token_dtype, max_id = _token_ids_dtype(manifest, shown), None
        described = (manifest.data.get("megatron") or {}).get("tokenizer")
        made_of = {"token_ids": True}
    try:
        dtype = megatron_dtype(dtype, token_dtype, max_id)
    except ValueError as exc:
        raise InputError(f"--dtype: {exc}") from None
    source = {"run": shown, "run_manifest_sha256": hashlib.sha256(manifest.raw).hexdigest(), "dtype": dtype,
              **made_of}

    say = note or RunProgress(progress).note
    finished = _finished_export(out_fs, out_root, shown_out, source)
    if finished is not None:
        say(f"{shown_out} already holds this export ({len(finished['megatron']['files'])} pairs); nothing to do")
        return finished

    _sweep(out_fs, out_root)
    jobs = [ShardJob(run_url, _options(run_url, storage_options), shard.path, shard.ref, output,
                     _options(output, storage_options), f"megatron/part-{i:05d}", spec, dtype, source)
            for i, shard in enumerate(manifest.shards)]
    entries: dict[int, dict] = {}
    present = file_sizes(out_fs, join(out_root, "megatron"))
    for i, job in enumerate(jobs):
        marker = _load(out_fs, join(out_root, "_work", f"part-{i:05d}.json"))
        if marker is not None and marker.get("source") == source and _is_there(marker["entry"], present):
            entries[i] = marker["entry"]
    todo = [i for i in range(len(jobs)) if i not in entries]
    _run_jobs(jobs, todo, entries, ray_address, progress, shown)

    files = [entries[i] for i in range(len(jobs))]
    sink = MegatronSink(dtype, described)  # the section and data-path.txt a run's output.megatron writes
    section = sink.section(files)
    written = Manifest(name=f"megatron export of {shown}", sections={"shards": [], "megatron": section}, export=source)
    with staging(out_root, _staging(out_root)):
        sink.finish(out_fs, out_root, section)
        write_manifest(out_fs, join(out_root, "manifest.json"), written)
    if out_fs.exists(join(out_root, "_work")):
        out_fs.rm(join(out_root, "_work"), recursive=True)
    say(f"done: {section['documents']:,} documents, {section['tokens']:,} tokens in {len(files)} pairs "
        f"-> {shown_out}/megatron")
    return written.to_dict()


def _options(url: str, options: dict | None) -> dict | None:
    """Storage options are for remote URLs; a local path takes none."""
    return options if "://" in url and not url.startswith("file://") else None


def _token_ids_dtype(manifest, shown: str) -> str:
    """uint16 or uint32: the value type of the run's token_ids column (from the first shard's footer)."""
    if not manifest.shards:
        return "uint16"
    shard = manifest.shards[0]
    with manifest.fs.open(join(manifest.root, shard.path), "rb") as f:
        schema = pq.ParquetFile(f).schema_arrow
    if TOKEN_IDS not in schema.names:
        raise InputError(f"{shown} has no {TOKEN_IDS} column ({shard.path}): give --tokenizer to tokenize its text")
    value = schema.field(TOKEN_IDS).type.value_type
    return "uint16" if value.bit_width <= 16 else "uint32"


def _finished_export(fs, root: str, shown: str, source: dict) -> dict | None:
    """The manifest already in `root` if it is this very export with every file there; None if there
    is none or it is an unfinished/damaged one of this export; an error if the folder holds something else."""
    existing = _load(fs, join(root, "manifest.json"))
    if existing is None:
        if fs.exists(join(root, "manifest.json")):
            raise RunStateError(f"{shown}/manifest.json is not JSON: choose another --output")
        return None
    try:
        export = Manifest.from_dict(existing).export
    except ManifestError:
        export = None
    if export is None:
        raise RunStateError(f"{shown} holds a ylink run (manifest.json); export into another folder with --output")
    if export != source:
        raise RunStateError(f"{shown} holds another export (of {export.get('run')}, or with another "
                            "tokenizer or dtype); choose another --output or remove that folder")
    present = file_sizes(fs, join(root, "megatron"))
    if all(_is_there(e, present) for e in existing.get("megatron", {}).get("files", [])):
        return existing
    fs.rm(join(root, "manifest.json"))  # a file is gone: no manifest may list it while it is redone
    return None


def _staging(root: str) -> str:
    return join(root, "_work", "staging")


def _sweep(fs, root: str) -> None:
    """Remove what writers killed before their rename left: the staging folder, temporary names."""
    for path in (fs.find(join(root, "megatron")) if fs.exists(join(root, "megatron")) else []):
        if is_temporary(path.rsplit("/", 1)[-1]):
            remove(fs, path)
    if fs.exists(_staging(root)):
        remove(fs, _staging(root), recursive=True)


def _is_there(entry: dict, present: dict[str, int | None]) -> bool:
    return all(present.get(entry[k]["path"].rsplit("/", 1)[-1]) == entry[k]["bytes"] for k in ("bin", "idx"))


def _load(fs, path: str) -> dict | None:
    try:
        data = read_json(fs, path)
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _run_jobs(jobs: list[ShardJob], todo: list[int], entries: dict[int, dict], ray_address: str | None,
              progress: bool | None, shown: str) -> None:
    from ylink_data.engine.config import RayConfig
    from ylink_data.engine.progress import RunProgress
    from ylink_data.engine.submit import Scheduler

    bar = RunProgress(progress)
    with bar, Scheduler(RayConfig(address=ray_address)) as scheduler:
        handle = bar.phase(f"export megatron: {shown}", len(jobs), len(jobs) - len(todo))
        if todo:
            def done(k: int, entry: dict) -> None:
                entries[todo[k]] = entry
                bar.advance(handle, entry["documents"])

            scheduler.run(export_shard, [(jobs[i],) for i in todo], done,
                          describe=lambda k: f"shard {jobs[todo[k]].path}", resume_hint="rerun the same export to resume")
        bar.finish(handle)


def export_shard(job: ShardJob) -> dict[str, Any]:
    """One shard's pair (a task): written, then recorded in its marker; returns the pair's entry."""
    from ylink_data.cache.verified import VerifiedShards

    fs, root = filesystem(job.run_url, job.run_options)
    where = full_url(fs, join(root.rstrip("/"), job.path))
    with VerifiedShards(fs).open(join(root.rstrip("/"), job.path), job.ref) as buffer:
        shard = pq.ParquetFile(pa.BufferReader(buffer))
        ids = _shard_ids(shard, job, redact_url(where))
    out_fs, out_root = filesystem(job.out_url, job.out_options)
    out_root = out_root.rstrip("/")
    with staging(out_root, _staging(out_root)):
        entry = write_pair(out_fs, out_root, job.prefix, ids, job.dtype)
        write_json(out_fs, join(out_root, "_work", f"{job.prefix.rsplit('/', 1)[-1]}.json"),
                   {"source": job.source, "entry": entry})
    return entry


def _shard_ids(shard: pq.ParquetFile, job: ShardJob, where: str) -> pa.ChunkedArray:
    """The shard's documents' token ids, in row order: its text tokenized, or its token_ids column."""
    column = "text" if job.tokenizer is not None else TOKEN_IDS
    if column not in shard.schema_arrow.names:
        hint = "" if job.tokenizer is not None else ": give --tokenizer to tokenize its text"
        raise InputError(f"{where} has no {column!r} column{hint}")
    chunks = []
    tok = None
    if job.tokenizer is not None:
        spec = job.tokenizer
        tok = load_tokenizer(spec.url, spec.storage_options, spec.eod_token)
    for i in range(shard.num_row_groups):  # a row group at a time: one shard's text is never all in memory
        values = shard.read_row_group(i, columns=[column]).column(0)
        if tok is None:
            chunks += values.chunks
        else:
            token_ids, _ = encode_texts(tok, [t or "" for t in values.to_pylist()], job.tokenizer.append_eod)
            chunks.append(token_ids)
    types = {c.type for c in chunks}
    if len(types) > 1:  # list and large_list row groups: one type for the pair's column
        chunks = [c.cast(pa.large_list(c.type.value_type)) for c in chunks]
    if not chunks:
        return pa.chunked_array([], pa.list_(pa.uint32()))
    return pa.chunked_array(chunks)
