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
    It is ShardLoader's epoch order (`order.EpochOrder`) with the pairs as shards and the windows
    as rows:
    1. the pairs are permuted, EpochOrder's shard permutation (`order.shard_permutation`, the
       (seed, epoch, 0) stream; `shuffle=False`: manifest order, windows in stream order), and the
       stream is cut in that order, so each epoch concatenates the files differently and cuts its
       windows at other places within them;
    2. a pair's rows are the windows that start in it (a window may run on into the next pairs);
       they are cut into blocks of `block_windows` consecutive windows, the blocks read in a sliding
       window of `window_blocks` blocks that opens gradually, and the windows of each block in a
       permuted order. So a block lies in one file and a batch is one gather from it, and the files
       are first needed at the pace they are read (the prefetcher fetches them in that order).
       Documents keep their order within a file.
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
batch is one fancy-indexed gather of its windows from a sliding-window view of the mapping (a
window that runs into the next file is copied piece by piece). With `cache_dir` the
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
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ylink_data.core.errors import InputError, YlinkError
from ylink_data.core.storage import filesystem, join
from ylink_data.io.manifest import MegatronPair, RunFile, RunManifest, read_manifest
from ylink_data.core.redaction import redact_url
from ylink_data.io.megatron.indexed import parse_index
from ylink_data.cache.order import BLOCK_ROWS, WINDOW_BLOCKS, EpochOrder, shard_permutation
from ylink_data.cache.position import EpochPosition, check_shape
from ylink_data.cache.verified import VerifiedShards

__all__ = ["TokenLoader"]

_OPEN_FILES = 16    # token files kept open (mapped and pinned): a shuffle window spans a few
_ORDERS_KEPT = 4    # blocks whose windows are kept placed: a batch is usually inside the block of the last


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
        self._orders: dict[int, _Epoch] = {}
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
        epoch = self._epoch()
        return epoch.files, epoch.starts

    @property
    def order(self) -> EpochOrder:
        """The epoch's order: pairs are its shards, the windows starting in a pair its rows."""
        return self._epoch().order

    def _epoch(self) -> _Epoch:
        if self.epoch not in self._orders:
            self._orders = {self.epoch: _Epoch.make(self)}
        return self._orders[self.epoch]

    def window_ids(self, a: int, b: int) -> np.ndarray:
        """The window numbers k (stream tokens k*seq_len...) at epoch positions a..b-1 (for checks
        and tools; iteration works per block)."""
        epoch = self._epoch()
        parts = [epoch.first_window[epoch.order.block_shard[block]] + epoch.order.block_rows_order(block)[first:last]
                 for block, first, last in epoch.order.pieces(a, b)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    # -- reading --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        partition = self.partition
        with contextlib.ExitStack() as stack:
            reader = _Reader(self, stack)
            steps = self.steps()
            positions = partition.batches(self.rank, steps)
            reader.schedule(positions)
            for j, (a, b) in zip(steps, positions):
                batch = reader.batch(a, b)
                self._done = j + 1
                yield batch


@dataclass
class _Epoch:
    """One epoch's stream and order. `files`: pair indices in stream order (pairs with tokens),
    `starts`: their first stream token (and the stream's end); per pair in manifest order, `home`
    its index in `files` (-1: no tokens) and `first_window`, the first window that starts in it."""

    order: EpochOrder
    files: np.ndarray
    starts: np.ndarray
    home: np.ndarray
    first_window: np.ndarray

    @classmethod
    def make(cls, loader: TokenLoader) -> "_Epoch":
        S, N = loader.seq_len, loader.num_windows
        tokens = np.array([p.tokens for p in loader.pairs], dtype=np.int64)
        perm = shard_permutation(len(tokens), loader.seed, loader.epoch, loader.shuffle)  # EpochOrder's own
        begin = np.zeros(len(tokens), np.int64)
        begin[perm] = np.cumsum(tokens[perm]) - tokens[perm]
        first = -(-begin // S)                                   # the first window starting at or after it
        count = np.maximum(0, np.minimum(N, -(-(begin + tokens) // S)) - first)
        order = EpochOrder(count, seed=loader.seed, epoch=loader.epoch, shuffle=loader.shuffle,
                           block_rows=loader.block_windows, window_blocks=loader.window_blocks)
        files = perm[tokens[perm] > 0].astype(np.int64)
        home = np.full(len(tokens), -1, np.int64)
        home[files] = np.arange(len(files))
        starts = np.concatenate([begin[files], [int(tokens.sum())]]).astype(np.int64)
        return cls(order, files, starts, home, first)


@dataclass
class _Block:
    """A block's windows in epoch order, placed: they all start in file `file` (stream index);
    their stream offsets and offsets in the file, the ones that run into a later file (positions
    in the block, sorted), and the file's tokens as a sliding-window view (row k: the window
    starting at token k), so that a batch is one fancy-indexed gather."""

    index: int
    file: int
    starts: np.ndarray
    local: np.ndarray
    spans: list[int]
    view: np.ndarray | None

    def __len__(self) -> int:
        return len(self.starts)


class _Reader:
    """One iteration's reading: token files opened (memory-mapped, pinned in the cache) as the
    batches reach them, at most `_OPEN_FILES` at a time; the prefetcher told what comes next."""

    def __init__(self, loader: TokenLoader, stack: contextlib.ExitStack):
        self.loader = loader
        self.epoch = loader._epoch()
        self.order, self.files, self.starts = self.epoch.order, self.epoch.files, self.epoch.starts
        self._starts = self.starts.tolist()
        self._open: OrderedDict[int, tuple[np.ndarray, np.ndarray | None, contextlib.ExitStack]] = OrderedDict()
        self._blocks: OrderedDict[int, _Block] = OrderedDict()  # the last blocks' windows, placed
        self._last: tuple[int, int, int, _Block | None] = (-1, 0, 0, None)  # block, its positions, _Block
        self._cache = self._prefetcher = None
        self._uses: list[int] = []       # files (stream indices) in the order the batches first need them
        self._cursor = 0
        self._unscheduled: list | None = None
        if loader.cache_dir is not None:
            from ylink_data.cache.prefetch import Prefetcher
            from ylink_data.cache.store import ShardCache
            self._cache = ShardCache(loader.cache_dir, max_bytes=loader.max_cache_bytes,
                                     storage_options=loader.storage_options)
            self._prefetcher = Prefetcher(self._cache)
            stack.callback(self._prefetcher.close)
        stack.callback(self.close)

    # -- which files, when ----------------------------------------------------------------------
    def schedule(self, batches: list[tuple[int, int]]) -> None:
        """Give the prefetcher the files these batches read, in order (per block of windows: its
        file, and the next ones its last windows run into), one entry per change of file."""
        if self._prefetcher is None:
            return
        pos, seen_end, uses = self.order._pos_list, -1, []
        span = self.loader.window_len - self.loader.seq_len
        for a, b in batches:
            if a < seen_end and b <= seen_end:  # inside the block already noted: most batches
                continue
            block = bisect.bisect_right(pos, max(a, seen_end)) - 1
            while pos[block] < b:
                seen_end = pos[block + 1]
                pair = int(self.order.block_shard[block])
                first = int(self.epoch.first_window[pair] + self.order.block_start[block])
                last = (first + int(self.order.block_len[block])) * self.loader.seq_len + span  # its last token + 1
                f0 = int(self.epoch.home[pair])
                f1 = int(np.searchsorted(self.starts, last, side="left"))
                for f in range(f0, f1):
                    if not uses or uses[-1] != f:
                        uses.append(f)
                block += 1
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
    def _block(self, block: int) -> _Block:
        """Where each window of `block` lies (vectorised, once for its ~4096 windows)."""
        done = self._blocks.get(block)
        if done is not None:
            return done
        S, L = self.loader.seq_len, self.loader.window_len
        pair = int(self.order.block_shard[block])
        f = int(self.epoch.home[pair])
        starts = (self.epoch.first_window[pair] + self.order.block_rows_order(block)) * S
        local = starts - self.starts[f]
        tokens = self.file(f)[0]
        spans = np.flatnonzero(local + L > len(tokens))  # the windows that run into the next file
        view = sliding_window_view(tokens, L) if len(tokens) >= L else None
        done = self._blocks[block] = _Block(block, f, starts, local, spans.tolist(), view)
        while len(self._blocks) > _ORDERS_KEPT:
            self._blocks.popitem(last=False)
        return done

    def batch(self, a: int, b: int) -> dict[str, np.ndarray]:
        """The windows at epoch positions a..b-1 as one batch."""
        loader = self.loader
        index, base, end, blk = self._last
        if base <= a < b <= end:  # most batches: inside the block the previous one read
            pieces = [(blk, a - base, b - base)]
        else:
            pieces = [(self._block(index), first, last) for index, first, last in self.order.pieces(a, b)]
            if pieces:
                blk = pieces[-1][0]
                base = int(self.order.block_pos[blk.index])
                self._last = (blk.index, base, base + len(blk), blk)
        parts = [self._gather(*piece) for piece in pieces]
        out = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else \
            np.empty((0, loader.window_len), loader.dtype)
        batch = {"input_ids": out}
        if loader.boundaries:
            starts = np.concatenate([blk.starts[first:last] for blk, first, last in pieces] or [np.zeros(0, np.int64)])
            files = np.concatenate([np.full(last - first, blk.file) for blk, first, last in pieces] or
                                   [np.zeros(0, np.int64)])
            batch.update(self._boundaries(starts, files))
        return batch

    def _gather(self, blk: _Block, first: int, last: int) -> np.ndarray:
        """Windows first..last-1 of the block as rows of a new array of the loader's dtype."""
        local = blk.local[first:last]
        s0, s1 = (bisect.bisect_left(blk.spans, first), bisect.bisect_left(blk.spans, last)) if blk.spans else (0, 0)
        if s0 == s1:  # nearly every batch: one gather
            return blk.view[local].astype(self.loader.dtype, copy=False)
        out = np.empty((last - first, self.loader.window_len), self.loader.dtype)
        spans = [i - first for i in blk.spans[s0:s1]]
        inside = np.delete(np.arange(last - first), spans)
        if len(inside):
            out[inside] = blk.view[local[inside]]
        for i in spans:
            self._spanning(out[i], blk.file, int(local[i]))
        return out

    def _spanning(self, row: np.ndarray, f: int, local: int) -> None:
        """A window that runs past the end of file `f` into the next ones."""
        at = 0
        while at < len(row):
            tokens, _ = self.file(f)
            take = min(len(row) - at, len(tokens) - local)
            row[at:at + take] = tokens[local:local + take]
            at, f, local = at + take, f + 1, 0

    def _boundaries(self, s: np.ndarray, first: np.ndarray) -> dict[str, np.ndarray]:
        """cu_seqlens (the batch flattened) and position_ids of the windows starting at these stream
        offsets `s` (in files `first`). Window i's segments end at every document end strictly inside its first seq_len
        tokens (the files' .idx; a file's end is its last document's) and at its own end; the
        batch's are gathered per file with searchsorted, not per window in Python."""
        S, n, starts = self.loader.seq_len, len(s), s.tolist()
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
