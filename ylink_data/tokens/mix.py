"""Token-weighted mixtures (`ylink mix MIX.yaml`): sources (runs, tiers of runs, materialised
mixtures: anything whose manifest lists Megatron pairs) each get a share of a token budget by
weight, in whole documents chosen by a seed.

A source's share S of its A tokens is taken as floor(S / A) whole epochs (every document), then a
part: the documents of a seeded permutation of the source, in that order, up to the prefix whose
tokens are nearest the rest (so each source lands within one document of its share). A share
needing more than `max_epochs` epochs is an error, never a silent upsample.

OUTPUT/mixture.json says what each source gives (tokens and documents available and taken,
epochs); OUTPUT/megatron/data-path.txt is Megatron-LM's `--data-path` (for `--data-args-path`):
without materialising, every pair of every source weighted by its source's share split by tokens;
with `output.materialize`, the chosen documents in a seeded shuffled order, written as Megatron
pairs with a manifest, so the mixture is itself a run (the token loader's, another mixture's
source), and data-path.txt names those pairs. The same YAML over the same sources writes the same
bytes.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ylink_data.core.errors import RunStateError
from ylink_data.core.storage import atomic_write, filesystem, full_url, is_local, join, write_json
from ylink_data.io.manifest import Manifest, ManifestError, RunManifest, read_manifest, write_manifest
from ylink_data.core.redaction import redact_url
from ylink_data.io.megatron.indexed import Index
from ylink_data.io.megatron.write import data_path_args, megatron_section, write_pair
from ylink_data.tokens.mix_config import MixConfig
from ylink_data.io.megatron.read import BinReader, read_index

MIXTURE_FILE = "mixture.json"
DATA_PATH_FILE = "megatron/data-path.txt"
PARALLEL_READS = 8  # .idx files fetched at once (object stores answer each in tens of ms)


@dataclass
class Source:
    """One source, read: its pairs' indexes, and every document's token count (pairs end to end)."""

    index: int
    shown: str  # its path as the YAML gives it, credentials masked
    manifest: RunManifest
    indexes: list[Index]
    lengths: np.ndarray     # int64, tokens per document
    first_doc: np.ndarray   # int64, each pair's first document, then the document count
    starts: np.ndarray      # int64, where each document starts in its pair's .bin, in tokens

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())

    @property
    def tokenizer(self) -> dict | None:
        return (self.manifest.data.get("megatron") or {}).get("tokenizer")


@dataclass
class Take:
    """What the mixture takes of one source: `full_epochs` times every document, then `partial`."""

    source: Source
    weight: Fraction   # normalised
    share: Fraction    # the tokens its weight asks for
    full_epochs: int
    partial: np.ndarray  # int64 documents of the last, partial epoch

    @property
    def documents(self) -> int:
        return self.full_epochs * len(self.source.lengths) + len(self.partial)

    @property
    def tokens(self) -> int:
        return self.full_epochs * self.source.tokens + int(self.source.lengths[self.partial].sum())

    def document_ids(self) -> np.ndarray:
        whole = np.tile(np.arange(len(self.source.lengths), dtype=np.int64), self.full_epochs)
        return np.concatenate([whole, self.partial])


@dataclass
class Plan:
    cfg: MixConfig
    takes: list[Take]
    dtype: str
    tokenizer: dict | None

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.takes)

    @property
    def documents(self) -> int:
        return sum(t.documents for t in self.takes)


# ----------------------------------------------------------------------------- planning


def plan_mixture(cfg: MixConfig) -> Plan:
    """Read every source and decide what the mixture takes of each; errors name the YAML key."""
    sources = [read_source(cfg, i) for i in range(len(cfg.sources))]
    _check_distinct(cfg, sources)
    dtype, tokenizer = _shared_tokenizer(cfg, sources)
    weights = [Fraction(s.weight) for s in cfg.sources]
    total = sum(weights)
    takes = [_take(cfg, source, weight / total) for source, weight in zip(sources, weights)]
    return Plan(cfg, takes, dtype, tokenizer)


def read_source(cfg: MixConfig, i: int) -> Source:
    path = cfg.sources[i].path
    shown = cfg.redact(redact_url(path))
    where = f"sources[{i}].path"
    try:
        manifest = read_manifest(path, cfg.storage_options(path))
    except ManifestError as exc:
        if _is_unmaterialised_mixture(cfg, path):
            raise cfg.error(f"{where}: {shown} is a mixture that was not materialised: set "
                            "`output.materialize: true` in its YAML and rerun `ylink mix` on it") from None
        raise cfg.error(f"{where}: {exc}") from None
    if not manifest.megatron:
        raise cfg.error(f"{where}: {shown} has no Megatron files: add `output.megatron: {{}}` to its pipeline "
                        "and rerun it, or run `ylink export megatron RUN --tokenizer T --output DIR` and mix DIR")
    with ThreadPoolExecutor(PARALLEL_READS) as pool:
        indexes = list(pool.map(lambda pair: read_index(manifest, pair), manifest.megatron))
    counts = np.array([len(ix.lengths) for ix in indexes], np.int64)
    first_doc = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    lengths = np.concatenate([ix.lengths for ix in indexes]).astype(np.int64)
    starts = np.concatenate([ix.pointers // ix.dtype.itemsize for ix in indexes]).astype(np.int64)
    source = Source(i, shown, manifest, indexes, lengths, first_doc, starts)
    if source.tokens == 0:
        raise cfg.error(f"{where}: {shown} has no tokens in its Megatron files; leave it out of the mixture")
    return source


def _is_unmaterialised_mixture(cfg: MixConfig, path: str) -> bool:
    try:
        fs, root = filesystem(path, cfg.storage_options(path))
        return fs.exists(join(root, MIXTURE_FILE))
    except Exception:  # noqa: BLE001 -- only a hint; the manifest's own error is reported otherwise
        return False


def _check_distinct(cfg: MixConfig, sources: list[Source]) -> None:
    """A source listed twice would be drawn twice independently (its epochs counted apart); and the
    output must not be a source's folder, which writing would overwrite while reading it."""
    seen: dict[str, int] = {}
    for s in sources:
        where = full_url(s.manifest.fs, s.manifest.root)
        if where in seen:
            raise cfg.error(f"sources[{s.index}].path: {s.shown} is also sources[{seen[where]}]; "
                            "list it once with the weights added")
        seen[where] = s.index
    fs, out = _output_fs(cfg)
    out = full_url(fs, out).rstrip("/") + "/"
    for where, i in seen.items():
        where = where.rstrip("/") + "/"
        if out.startswith(where) or where.startswith(out):
            raise cfg.error(f"output.path: {cfg.redact(redact_url(cfg.output.path))} is inside or holds "
                            f"sources[{i}] ({sources[i].shown}); choose another folder")


def _shared_tokenizer(cfg: MixConfig, sources: list[Source]) -> tuple[str, dict | None]:
    """Token ids mean the same in every source only if one tokenizer made them all."""
    first = sources[0]
    sha = (first.tokenizer or {}).get("sha256")
    for s in sources[1:]:
        other = (s.tokenizer or {}).get("sha256")
        if other != sha:
            raise cfg.error(f"sources[{s.index}].path: {s.shown} was tokenized by tokenizer sha256 "
                            f"{_short(other)}, sources[0] by {_short(sha)}: a mixture's sources must share one "
                            "tokenizer (re-tokenize one of them)")
        if s.manifest.megatron_dtype != first.manifest.megatron_dtype:
            raise cfg.error(f"sources[{s.index}].path: {s.shown} stores {s.manifest.megatron_dtype} token ids, "
                            f"sources[0] {first.manifest.megatron_dtype}: export both with the same dtype")
    return first.manifest.megatron_dtype or "uint32", first.tokenizer


def _short(sha: str | None) -> str:
    return f"{sha[:12]}..." if sha else "(unknown: its manifest names none)"


def _take(cfg: MixConfig, source: Source, weight: Fraction) -> Take:
    share = cfg.tokens * weight
    available = source.tokens
    if share > Fraction(cfg.max_epochs) * available:
        raise cfg.error(f"sources[{source.index}]: {source.shown}'s share, {float(share):,.0f} of {cfg.tokens:,} "
                        f"tokens, is {float(share / available):.2f} epochs of its {available:,} tokens, more than "
                        f"max_epochs {cfg.max_epochs:g}: raise max_epochs, lower its weight or the budget, or add data")
    full = int(share // available)
    rest = share - full * available
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([cfg.seed, 0, source.index])))
    order = rng.permutation(len(source.lengths))
    cum = np.cumsum(source.lengths[order])
    # The prefix nearest `rest`: the one that first reaches it, or the one before, whichever is closer.
    reach = int(np.searchsorted(cum, -(-rest.numerator // rest.denominator), side="left"))
    below = int(cum[reach - 1]) if reach else 0
    count = reach + 1 if reach < len(cum) and int(cum[reach]) - rest < rest - below else reach
    return Take(source, weight, share, full, order[:count].astype(np.int64))


# ----------------------------------------------------------------------------- writing


def write_mixture(plan: Plan, advance: Callable[[int], None] | None = None) -> str:
    """Write the mixture's files into output.path (see the module's docstring); `advance(tokens)`
    is called as materialised pairs are written. Returns the output's URL."""
    cfg = plan.cfg
    fs, root = _output_fs(cfg)
    _claim_output(cfg, fs, root)
    files: list[dict[str, Any]] = []
    if cfg.output.materialize:
        files = _materialise(plan, fs, root, advance or (lambda n: None))
    _remove_stale_pairs(fs, root, {f"{f['prefix']}.{kind}" for f in files for kind in ("bin", "idx")})
    base = _absolute(fs, root)
    blend = data_path_args(files, base) if cfg.output.materialize else _source_blend(plan)
    with atomic_write(fs, join(root, DATA_PATH_FILE)) as out:
        out.write(blend.encode())
    write_json(fs, join(root, MIXTURE_FILE), mixture_manifest(plan))
    if cfg.output.materialize:  # last: a manifest says the run is whole
        sections = {"shards": [], "megatron": megatron_section(files, plan.dtype, plan.tokenizer)}
        write_manifest(fs, join(root, "manifest.json"), Manifest(sections=sections))
    return cfg.redact(redact_url(full_url(fs, root)))


def mixture_manifest(plan: Plan) -> dict[str, Any]:
    cfg = plan.cfg
    return {
        "version": 1, "name": cfg.name, "tokens": cfg.tokens, "seed": cfg.seed, "max_epochs": cfg.max_epochs,
        "materialized": cfg.output.materialize, "dtype": plan.dtype, "tokenizer": plan.tokenizer,
        "taken": {"tokens": plan.tokens, "documents": plan.documents},
        "sources": [{
            "path": t.source.shown,
            "weight": round(float(t.weight), 12),
            "tokenizer_sha256": (t.source.tokenizer or {}).get("sha256"),
            "share_tokens": round(float(t.share), 3),
            "tokens_available": t.source.tokens,
            "documents_available": len(t.source.lengths),
            "tokens_taken": t.tokens,
            "documents_taken": t.documents,
            "epochs": round(t.tokens / t.source.tokens, 6),
            "full_epochs": t.full_epochs,
            "partial_documents": len(t.partial),
            "pairs": len(t.source.indexes),
        } for t in plan.takes],
    }


def _source_blend(plan: Plan) -> str:
    """Every pair of every source, weighted by its source's share of the mixture split by tokens."""
    parts = []
    for t in plan.takes:
        m = t.source.manifest
        for pair in m.megatron:
            if pair.tokens:
                weight = t.weight * pair.tokens / t.source.tokens
                prefix = redact_url(_absolute(m.fs, join(m.root, pair.prefix)))
                parts.append(f"{float(weight):.12g} {prefix}")
    return " ".join(parts) + "\n"


def _output_fs(cfg: MixConfig) -> tuple[Any, str]:
    fs, root = filesystem(cfg.output.path, cfg.storage_options(cfg.output.path))
    root = root.rstrip("/")
    return fs, (os.path.realpath(root) if is_local(fs) else root)


def _absolute(fs: Any, path: str) -> str:
    return os.path.realpath(path) if is_local(fs) else full_url(fs, path)


def _claim_output(cfg: MixConfig, fs: Any, root: str) -> None:
    """Write only into an empty folder or over a mixture; a rewrite first drops the old manifest,
    so that a mixture cut short is not read as whole."""
    if fs.exists(root) and fs.ls(root) and not fs.exists(join(root, MIXTURE_FILE)):
        raise RunStateError(f"output.path: {cfg.redact(redact_url(cfg.output.path))} holds files but no "
                            f"{MIXTURE_FILE}; `ylink mix` writes only into an empty folder or over a mixture: "
                            "choose another output.path")
    if fs.exists(join(root, "manifest.json")):
        fs.rm(join(root, "manifest.json"))


def _remove_stale_pairs(fs: Any, root: str, keep: set[str]) -> None:
    """Pairs an earlier, larger mixture left in OUTPUT/megatron/."""
    folder = join(root, "megatron")
    fs.invalidate_cache(folder)
    if not fs.exists(folder):
        return
    for path in fs.ls(folder, detail=False):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.startswith("part-") and name.endswith((".bin", ".idx")) and f"megatron/{name}" not in keep:
            fs.rm(path)


def _materialise(plan: Plan, fs: Any, root: str, advance: Callable[[int], None]) -> list[dict[str, Any]]:
    """The chosen documents in a seeded shuffled order, as Megatron pairs of about shard_tokens each."""
    cfg = plan.cfg
    which = np.concatenate([np.full(t.documents, i, np.int32) for i, t in enumerate(plan.takes)])
    docs = np.concatenate([t.document_ids() for t in plan.takes])
    order = np.random.Generator(np.random.PCG64(np.random.SeedSequence([cfg.seed, 1]))).permutation(len(docs))
    which, docs = which[order], docs[order]
    lengths = np.empty(len(docs), np.int64)
    for i, t in enumerate(plan.takes):
        mine = which == i
        lengths[mine] = t.source.lengths[docs[mine]]
    files = []
    with BinReader() as bins:
        for number, (start, end) in enumerate(_pair_bounds(lengths, cfg.output.shard_tokens)):
            ids = _gather(plan, bins, which[start:end], docs[start:end], lengths[start:end])
            offsets = np.concatenate([[0], np.cumsum(lengths[start:end])]).astype(np.int64)
            column = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(ids))
            files.append(write_pair(fs, root, f"megatron/part-{number:05d}", column, plan.dtype))
            advance(int(offsets[-1]))
    return files


def _pair_bounds(lengths: np.ndarray, shard_tokens: int) -> list[tuple[int, int]]:
    """(first, end) documents of each pair: a pair closes with the document that brings it to
    `shard_tokens`."""
    cum = np.cumsum(lengths)
    bounds, start = [], 0
    while start < len(lengths):
        base = int(cum[start - 1]) if start else 0
        end = min(int(np.searchsorted(cum, base + shard_tokens, side="left")) + 1, len(lengths))
        bounds.append((start, end))
        start = end
    return bounds


def _gather(plan: Plan, bins: BinReader, which: np.ndarray, docs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The token ids of these documents (source `which[k]`, document `docs[k]`), end to end."""
    pair, start = np.empty(len(docs), np.int64), np.empty(len(docs), np.int64)
    for i, t in enumerate(plan.takes):
        mine = which == i
        pair[mine] = np.searchsorted(t.source.first_doc, docs[mine], side="right") - 1
        start[mine] = t.source.starts[docs[mine]]
    out = np.empty(int(lengths.sum()), np.dtype(plan.dtype))
    at = 0
    for k in range(len(docs)):
        manifest = plan.takes[which[k]].source.manifest
        s, n = int(start[k]), int(lengths[k])
        out[at:at + n] = bins.tokens(manifest, manifest.megatron[pair[k]])[s:s + n]
        at += n
    return out


def describe_plan(plan: Plan) -> list[str]:
    """One line per source for the console."""
    return [f"{t.source.shown}: {t.tokens:,} tokens ({float(t.weight):.1%} asked, {t.tokens / max(plan.tokens, 1):.1%} "
            f"taken) in {t.documents:,} documents, {t.tokens / t.source.tokens:.2f} epochs of {t.source.tokens:,}"
            for t in plan.takes]
