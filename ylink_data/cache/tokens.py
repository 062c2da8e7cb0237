"""`TokenLoader`: a run's Megatron token files (`.bin`/`.idx` pairs, `RunManifest.megatron`) as
fixed-length token sequences for training, through the same node-local cache, prefetcher, epoch order
and resumable position as `ShardLoader`.

Sequences, the Megatron GPT dataset way
    The epoch's token stream is every pair's `.bin` (documents end to end, each ending with its
    end-of-document token, as the `tokenize` op writes them) concatenated, pairs in the epoch's file
    order. It is cut every `seq_len` tokens: window k holds stream tokens `k*seq_len .. k*seq_len +
    L - 1`, with L = seq_len, or seq_len + 1 with `labels=True` (the extra token is the label of the
    window's last input and is also the first token of window k+1, as Megatron's GPTDataset does).
    A window may span documents and pairs. The epoch has N = (T - labels) // seq_len windows for a
    stream of T tokens: every token is an input of exactly one window per epoch, except the last
    (T - labels) mod seq_len tokens (fewer than one sequence), which this epoch leaves out. Nothing
    is padded.

Shuffle (deterministic: a function of the manifest, seed and epoch only)
    1. the pairs are permuted with `rng(seed, epoch, 3)` (`shuffle=False`: manifest order, and
       windows in stream order), so each epoch concatenates the files in another order and cuts
       windows at other places within them;
    2. the N windows are ordered by `order.EpochOrder` over one "shard" of N samples: blocks of
       `block_windows` consecutive windows in a sliding window of `window_blocks` blocks, then the
       windows within each block permuted (see `order`). So the windows of any stretch of training
       come from about `window_blocks * block_windows * seq_len` consecutive stream tokens (a few
       files): the cache holds what is read, and the prefetcher fetches files at the pace they are
       read, as with Parquet shards. Documents keep their order within a file.
    Ranks and DataLoader workers share the epoch's positions as ShardLoader's do (`order.Partition`):
    rank r's batch j is a contiguous slice of the order, each window once per epoch over all ranks
    and workers; the last global step is split evenly (batches differ by at most one window).

State: `ylink_data.cache.position` (kind "tokens"): exact resume, and elastic resume with another
world size, batch size or workers from the `consumed` window position, each window once.

Boundaries (`boundaries=True`): per sequence, where documents end inside its `seq_len` input
tokens (with labels, the first seq_len tokens), from the pairs' `.idx` files: `position_ids`
[batch, seq_len] count tokens from 0 at each document start and at the sequence start (a document
cut by the window edge restarts at 0), and `cu_seqlens` is flash-attention's varlen form for the
batch flattened to batch*seq_len tokens: int32 offsets from 0 to batch*seq_len, one segment per
document piece, every sequence edge b*seq_len included (sequence b's own offsets are the entries
between b*seq_len and (b+1)*seq_len, minus b*seq_len).

Reading: `.bin` files are memory-mapped (numpy.memmap) from the cache and never read whole; a
window is one slice of the mapping (two at a file edge) copied into the batch. With `cache_dir` the
files come through the node-local cache (each downloaded and verified once per node, pinned while
open) and the prefetcher is given them in the order this loader reads them; without it a local run
is read in place (sha256 checked once per process, `verified`) and a remote one is downloaded into
an unnamed temporary file per opened file (give `cache_dir` for remote runs).
"""
from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
from collections import OrderedDict
from typing import Any, Iterator

import numpy as np

from ..errors import InputError, YlinkError
from ..io.fs import filesystem, join
from ..manifest import MegatronPair, RunFile, RunManifest, read_manifest
from ..redaction import redact_url
from ..tokens.indexed import parse_index
from .order import BLOCK_ROWS, WINDOW_BLOCKS, EpochOrder, rng
from .position import EpochPosition, check_shape
from .verified import VerifiedShards

__all__ = ["TokenLoader"]

_FILES = 3          # the pairs' permutation: a stream of its own beside EpochOrder's 0, 1, 2
_OPEN_FILES = 16    # token files kept open (mapped and pinned): a shuffle window spans a few
_ORDERS_KEPT = 4    # blocks whose window order is kept: a batch is usually inside the block of the last


class TokenLoader(EpochPosition):
    """Iterates batches `{"input_ids": [batch, seq_len (+1)]}` (plus `cu_seqlens` and `position_ids`
    with `boundaries`) as numpy arrays of the run at `url` (a run folder, local or any fsspec URL):
    the batches of `rank` of `world_size`, among those the ones of DataLoader worker `worker` of
    `num_workers`, for `epoch`. Iterating continues from the current position to the end of the
    epoch; `set_epoch()` starts another. `dtype`: of `input_ids` (None: the files' own, e.g.
    uint16). `manifest`: the run's `read_manifest(url, storage_options)` when the caller has it."""

    STATE_VERSION = 1
    STATE_KIND = "tokens"
    NAME = "TokenLoader"

    def __init__(self, url: str, *, seq_len: int, cache_dir: str | None = None, max_cache_bytes: int | None = None,
                 rank: int = 0, world_size: int = 1, num_workers: int = 1, worker: int = 0, seed: int = 0,
                 epoch: int = 0, batch_size: int = 8, shuffle: bool = True, labels: bool = False,
                 boundaries: bool = False, dtype: str | None = "int64", storage_options: dict[str, Any] | None = None,
                 block_windows: int = BLOCK_ROWS, window_blocks: int = WINDOW_BLOCKS,
                 manifest: RunManifest | None = None):
        check_shape(rank, world_size, worker, num_workers, batch_size)
        if type(seq_len) is not int or seq_len < 1:
            raise ValueError(f"seq_len must be a whole number of 1 or more, not {seq_len!r}")
        self.url, self.storage_options = url, storage_options
        self.cache_dir, self.max_cache_bytes = cache_dir, max_cache_bytes
        self.rank, self.world_size, self.num_workers, self.worker = rank, world_size, num_workers, worker
        self.seed, self.batch_size, self.shuffle = int(seed), int(batch_size), bool(shuffle)
        self.seq_len, self.labels, self.boundaries = seq_len, bool(labels), bool(boundaries)
        self.block_windows, self.window_blocks = int(block_windows), int(window_blocks)
        if manifest is None:
            run = read_manifest(url, storage_options)
            self._fs = run.fs
        else:  # read and checked by the caller (TokenDataset, once for all its workers and states)
            run = manifest
            self._fs = filesystem(url, storage_options)[0]  # this process's own (see ShardLoader)
        if not run.megatron:
            shown = redact_url(url)
            raise InputError(f"{shown} has no Megatron token files (its manifest lists none): add `output.megatron: "
                             f"{{}}` to the pipeline that writes it, or run `ylink export megatron {shown} "
                             f"--tokenizer TOKENIZER --output DIR`")
        self._root = run.root
        self.pairs: list[MegatronPair] = run.megatron
        self.file_dtype = np.dtype(run.megatron_dtype).newbyteorder("<")
        for pair in self.pairs:
            if pair.bin.ref.size != pair.tokens * self.file_dtype.itemsize:
                raise YlinkError(f"{pair.bin.ref.url} has {pair.bin.ref.size:,} bytes in the manifest, but "
                                 f"{pair.tokens:,} tokens of {run.megatron_dtype} take "
                                 f"{pair.tokens * self.file_dtype.itemsize:,}: the manifest is inconsistent")
        self.dtype = np.dtype(dtype) if dtype is not None else self.file_dtype.newbyteorder("=")
        self.num_tokens = sum(p.tokens for p in self.pairs)
        self.window_len = seq_len + self.labels
        self.num_windows = max(0, (self.num_tokens - self.labels) // seq_len)
        if self.num_windows == 0:
            raise InputError(f"{redact_url(url)} holds {self.num_tokens:,} tokens, fewer than one sequence of "
                             f"{self.window_len} (seq_len {seq_len}{' + 1 for labels' if labels else ''})")
        self.fingerprint = hashlib.sha256(json.dumps(
            [run.megatron_dtype] + [[p.prefix, p.tokens, p.bin.ref.sha256] for p in self.pairs]).encode()).hexdigest()[:16]
        self._orders: dict[int, tuple[EpochOrder, np.ndarray, np.ndarray]] = {}
        self.epoch = int(epoch)
        EpochOrder([], seed=self.seed, epoch=self.epoch)  # validates seed and epoch up front
        self._start_at(0, 0)
        self._direct = VerifiedShards(self._fs)

    @property
    def num_samples(self) -> int:
        return self.num_windows

    def config(self) -> dict[str, Any]:
        # seq_len and labels before windows: a state of another seq_len is refused naming seq_len
        return {"run": self.fingerprint, "tokens": self.num_tokens, "seq_len": self.seq_len, "labels": self.labels,
                "windows": self.num_windows, "seed": self.seed, "shuffle": self.shuffle,
                "block_windows": self.block_windows, "window_blocks": self.window_blocks}

    # -- the epoch's order ----------------------------------------------------------------------
    def epoch_files(self) -> tuple[np.ndarray, np.ndarray]:
        """(pair indices in the epoch's stream order, their first stream token and the stream's end):
        pairs without tokens are left out, they hold no window."""
        return self._epoch()[1:]

    @property
    def order(self) -> EpochOrder:
        """The order of the epoch's N windows (window ids are EpochOrder's row numbers of one shard)."""
        return self._epoch()[0]

    def _epoch(self) -> tuple[EpochOrder, np.ndarray, np.ndarray]:
        if self.epoch not in self._orders:
            n = len(self.pairs)
            perm = rng(self.seed, self.epoch, _FILES).permutation(n) if self.shuffle else np.arange(n)
            files = np.array([i for i in perm if self.pairs[i].tokens > 0], dtype=np.int64)
            starts = np.concatenate([[0], np.cumsum([self.pairs[i].tokens for i in files])]).astype(np.int64)
            order = EpochOrder([self.num_windows], seed=self.seed, epoch=self.epoch, shuffle=self.shuffle,
                               block_rows=self.block_windows, window_blocks=self.window_blocks)
            self._orders = {self.epoch: (order, files, starts)}
        return self._orders[self.epoch]

    def window_ids(self, a: int, b: int) -> np.ndarray:
        """The window ids at epoch positions a..b-1 (for checks and tools; iteration caches blocks)."""
        return self.order.sample_ids(a, b)

    # -- reading --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        partition = self.partition
        with contextlib.ExitStack() as stack:
            reader = _Reader(self, stack)
            reader.schedule([partition.batch(self.rank, j) for j in self.steps()])
            for j in self.steps():
                batch = reader.batch(*partition.batch(self.rank, j))
                self._done = j + 1
                yield batch


class _Reader:
    """One iteration's reading: token files opened (memory-mapped, pinned in the cache) as the
    batches reach them, at most `_OPEN_FILES` at a time; the prefetcher told what comes next."""

    def __init__(self, loader: TokenLoader, stack: contextlib.ExitStack):
        self.loader = loader
        self.order, self.files, self.starts = loader._epoch()
        self._starts = self.starts.tolist()
        self._open: OrderedDict[int, tuple[np.ndarray, np.ndarray | None, contextlib.ExitStack]] = OrderedDict()
        self._block_ids: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cache = self._prefetcher = None
        self._uses: list[int] = []       # files (stream indices) in the order the batches first need them
        self._cursor = 0
        self._unscheduled: list | None = None
        if loader.cache_dir is not None:
            from .prefetch import Prefetcher
            from .store import ShardCache
            self._cache = ShardCache(loader.cache_dir, max_bytes=loader.max_cache_bytes,
                                     storage_options=loader.storage_options)
            self._prefetcher = Prefetcher(self._cache)
            stack.callback(self._prefetcher.close)
        stack.callback(self.close)

    # -- which files, when ----------------------------------------------------------------------
    def schedule(self, batches: list[tuple[int, int]]) -> None:
        """Give the prefetcher the files these batches read, in order (per block of windows: the
        files its windows' tokens lie in), one entry per change of file."""
        if self._prefetcher is None:
            return
        seen_block, uses = -1, []
        span = self.loader.window_len - self.loader.seq_len
        for a, b in batches:
            for block, _, _ in self.order.pieces(a, b):
                if block == seen_block:
                    continue
                seen_block = block
                first = int(self.order.block_start[block])
                lo = first * self.loader.seq_len
                hi = (first + int(self.order.block_len[block])) * self.loader.seq_len + span
                f0 = int(np.searchsorted(self.starts, lo, side="right")) - 1
                f1 = int(np.searchsorted(self.starts, hi, side="left"))
                for f in range(f0, f1):
                    if not uses or uses[-1] != f:
                        uses.append(f)
        self._uses, self._cursor = uses, 0
        self._unscheduled = [ref for f in uses for ref in self._refs(f)]

    def _refs(self, f: int):
        pair = self.loader.pairs[int(self.files[f])]
        return [pair.idx.ref, pair.bin.ref] if self.loader.boundaries else [pair.bin.ref]

    def _advance(self, f: int) -> None:
        if self._prefetcher is None:
            return
        per = 2 if self.loader.boundaries else 1
        for i in range(self._cursor, min(len(self._uses), self._cursor + 2 * _OPEN_FILES)):
            if self._uses[i] == f:
                self._cursor = i
                self._prefetcher.advance(i * per)
                return

    # -- files --------------------------------------------------------------------------------
    def file(self, f: int) -> tuple[np.ndarray, np.ndarray | None]:
        """File `f` of the epoch's stream: its tokens (a read-only mapping) and, with boundaries,
        where its documents end, as stream offsets."""
        opened = self._open.get(f)
        if opened is not None:
            self._open.move_to_end(f)
            return opened[0], opened[1]
        self._advance(f)
        pair = self.loader.pairs[int(self.files[f])]
        stack = contextlib.ExitStack()
        try:
            ends = None
            if self.loader.boundaries:
                index = self._map(pair.idx, np.dtype(np.uint8), stack)
                try:
                    parsed = parse_index(index, pair.idx.ref.url)
                except ValueError as exc:
                    raise YlinkError(str(exc)) from None
                if len(parsed.lengths) != pair.documents or parsed.tokens != pair.tokens:
                    raise YlinkError(f"{pair.idx.ref.url} lists {len(parsed.lengths):,} documents of {parsed.tokens:,} "
                                     f"tokens, the manifest says {pair.documents:,} of {pair.tokens:,}")
                # where its documents end in this epoch's stream (the file's own end is the last)
                ends = np.cumsum(parsed.lengths, dtype=np.int64) + self._starts[f]
            tokens = self._map(pair.bin, self.loader.file_dtype, stack)
        except BaseException:
            stack.close()
            raise
        self._open[f] = (tokens, ends, stack)
        if self._unscheduled is not None:  # the first file is in: now the rest (see ShardLoader's _Reader)
            self._prefetcher.schedule(self._unscheduled)
            self._prefetcher.advance(self._cursor * (2 if self.loader.boundaries else 1))
            self._unscheduled = None
        while len(self._open) > _OPEN_FILES:
            self._open.popitem(last=False)[1][2].close()
        return tokens, ends

    def _map(self, file: RunFile, dtype: np.dtype, stack: contextlib.ExitStack) -> np.ndarray:
        """A verified file of the run as a read-only array over its mapping (never read whole)."""
        if file.ref.size == 0:
            return np.zeros(0, dtype)
        if self._cache is not None:
            path = stack.enter_context(self._cache.get(file.ref))
            # A plain ndarray view of the memmap (which it keeps alive): slicing a memmap subclass
            # costs several times more per window.
            return np.memmap(path, dtype=dtype, mode="r", shape=(file.ref.size // dtype.itemsize,)).view(np.ndarray)
        loader = self.loader
        buffer = stack.enter_context(loader._direct.open(join(loader._root, file.path), file.ref))
        return np.frombuffer(buffer, dtype=dtype)

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1][2].close()

    # -- batches ------------------------------------------------------------------------------
    def ids(self, a: int, b: int) -> np.ndarray:
        """Window ids at positions a..b-1, from the blocks' cached window orders."""
        parts = []
        for block, first, last in self.order.pieces(a, b):
            ids = self._block_ids.get(block)
            if ids is None:
                ids = self._block_ids[block] = self.order.block_rows_order(block)
                while len(self._block_ids) > _ORDERS_KEPT:
                    self._block_ids.popitem(last=False)
            parts.append(ids[first:last])
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def batch(self, a: int, b: int) -> dict[str, np.ndarray]:
        loader = self.loader
        S, L = loader.seq_len, loader.window_len
        starts = (self.ids(a, b) * S).tolist()
        out = np.empty((len(starts), L), dtype=loader.dtype)
        cut, tokens, lo, hi = self._starts, None, 0, -1
        for i, s in enumerate(starts):
            if not lo <= s < hi:  # another file than the last window's
                f = bisect.bisect_right(cut, s) - 1
                tokens, lo, hi = self.file(f)[0], cut[f], cut[f + 1]
            local = s - lo
            if s + L <= hi:  # nearly every window: one slice of one file
                out[i] = tokens[local:local + L]
            else:
                self._spanning(out[i], f, local)
        batch = {"input_ids": out}
        if loader.boundaries:
            batch.update(self._boundaries(starts))
        return batch

    def _spanning(self, row: np.ndarray, f: int, local: int) -> None:
        """A window that runs past the end of file `f` into the next ones."""
        at = 0
        while at < len(row):
            tokens, _ = self.file(f)
            take = min(len(row) - at, len(tokens) - local)
            row[at:at + take] = tokens[local:local + take]
            at, f, local = at + take, f + 1, 0

    def _boundaries(self, starts: list[int]) -> dict[str, np.ndarray]:
        """cu_seqlens (the batch flattened) and position_ids of the windows starting at these stream
        offsets. Window i's segments end at every document end strictly inside its first seq_len
        tokens (the files' .idx; a file's end is its last document's) and at its own end; the
        batch's are gathered per file with searchsorted, not per window in Python."""
        S, n = self.loader.seq_len, len(starts)
        s = np.asarray(starts, dtype=np.int64)
        first = np.searchsorted(self.starts, s, side="right") - 1
        edges = [np.arange(1, n + 1, dtype=np.int64) * S]   # every window's own end
        for f in np.unique(first).tolist():
            ends = self.file(f)[1]
            mine = np.flatnonzero(first == f)
            lo = np.searchsorted(ends, s[mine], side="right")
            hi = np.searchsorted(ends, s[mine] + S, side="left")
            counts = hi - lo
            which = np.repeat(mine, counts)
            at = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
            edges.append(ends[at] - s[which] + which * S)
            for i in mine[s[mine] + S > self.starts[f + 1]].tolist():  # windows running into later files
                g = f + 1
                while self._starts[g] < starts[i] + S:
                    later = self.file(g)[1]
                    inner = later[later < starts[i] + S]
                    edges.append(inner - starts[i] + i * S)
                    g += 1
        cu = np.concatenate([np.zeros(1, np.int64), np.sort(np.concatenate(edges))])
        positions = np.arange(n * S, dtype=np.int64) - np.repeat(cu[:-1], np.diff(cu))
        return {"cu_seqlens": cu.astype(np.int32), "position_ids": positions.reshape(n, S)}
