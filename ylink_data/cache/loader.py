"""`ShardLoader`: a run's documents as Arrow record batches, in a deterministic shuffled order, shared
among ranks and DataLoader workers so that each document comes once per epoch, with an exact
mid-epoch resume, also with another world size.

Order, partition and remainder policy: see `ylink_data.cache.order` (a pure function of the
manifest's row counts, seed, epoch, world size, workers and batch size). In short: rank r's batch j
is a contiguous slice of the epoch order, every rank yields the same number of batches, the last
step's rows are split evenly (sizes differ by at most one row; with fewer rows than ranks some last
batches are empty), and DataLoader worker w of k reads the rank's batches w, w+k, ...

State and resume: see `ylink_data.cache.position` (shared with `TokenLoader`). A ShardLoader's state:
    {"version": 2, "run": fingerprint of the manifest, "rows": N, "seed", "epoch", "shuffle",
     "block_rows", "window_blocks", "consumed": epoch position reached, "partition": {...} or None}
exact resume with the same shape, elastic resume (any world size, batch size, workers) from
`consumed`, each document once.

Reading: only the needed row groups of a shard are read (`ParquetFile.read_row_groups`, `columns`
applied); the next `readahead` blocks are decoded and shuffled in threads while the consumer works,
decoded blocks are kept while the next batches use them, and a batch is a zero-copy slice of one
(or, at a block boundary, two blocks joined). With `cache_dir` the shards
come through the node-local shard cache (`ylink_data.cache.store`) and its prefetcher is given the
shards in the order this loader will read them; without it, straight from the run, verified all the
same (`ylink_data.cache.verified`). Either way the manifest is checked first
(`ylink_data.io.manifest`): no shard outside the run folder, none without a sha256.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import filesystem, join
from ylink_data.io.manifest import RunManifest, RunShard, read_manifest
from ylink_data.cache.order import BLOCK_ROWS, WINDOW_BLOCKS, EpochOrder
from ylink_data.cache.position import EpochPosition, check_shape, merge_states
from ylink_data.cache.verified import VerifiedShards

__all__ = ["ShardLoader", "merge_states", "run_fingerprint", "STATE_VERSION"]

STATE_VERSION = 2      # 2: the sliding-window block order (order.py); a version 1 position means another order
_OPEN_SHARDS = 16     # shard files kept open (a shuffle window spans a few shards)
_DECODED_BLOCKS = 4   # decoded blocks kept: a worker's next batch is often in the same block


def run_fingerprint(shards: Sequence[RunShard]) -> str:
    """Identifies a run's content for states: the shards' paths, row counts and checksums."""
    key = json.dumps([[s.path, s.rows, s.ref.sha256] for s in shards])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class ShardLoader(EpochPosition):
    """Iterates `pyarrow.RecordBatch`es of up to `batch_size` rows of a run (a run folder, local or
    any fsspec URL): the batches of `rank` of `world_size`, and among those the ones of DataLoader
    worker `worker` of `num_workers`, for `epoch`. Iterating continues from the current position
    to the end of the epoch (nothing more after it); `set_epoch()` starts another epoch.
    `block_rows` and `window_blocks` shape the shuffle (see `order`); `readahead` blocks are
    decoded ahead of the consumer in as many threads (0: each block is decoded in the consumer's
    thread when it is reached). Memory: about `readahead` + 4 decoded blocks of `block_rows` rows.
    `manifest`: the run's `ylink_data.io.manifest.read_manifest(url, storage_options)`, when the caller
    has it already: it is used as it is, neither read nor checked again."""

    STATE_VERSION = STATE_VERSION
    NAME = "ShardLoader"

    def __init__(self, url: str, *, cache_dir: str | None = None, max_cache_bytes: int | None = None,
                 rank: int = 0, world_size: int = 1, num_workers: int = 1, worker: int = 0, seed: int = 0,
                 epoch: int = 0, batch_size: int = 1024, shuffle: bool = True, columns: Sequence[str] | None = None,
                 storage_options: dict[str, Any] | None = None, block_rows: int = BLOCK_ROWS,
                 window_blocks: int = WINDOW_BLOCKS, readahead: int = 4, manifest: RunManifest | None = None):
        check_shape(rank, world_size, worker, num_workers, batch_size)
        self.url, self.storage_options = url, storage_options
        self.cache_dir, self.max_cache_bytes = cache_dir, max_cache_bytes
        self.rank, self.world_size, self.num_workers, self.worker = rank, world_size, num_workers, worker
        self.seed, self.batch_size, self.shuffle = int(seed), int(batch_size), bool(shuffle)
        self.columns = list(columns) if columns is not None else None
        self.block_rows, self.window_blocks, self.readahead = int(block_rows), int(window_blocks), int(readahead)
        if manifest is None:
            run = read_manifest(url, storage_options)
            self._fs = run.fs
        else:  # read and checked by the caller (TextDataset, once for all its workers, epochs and states)
            run = manifest
            # This process's own filesystem: one inherited through fork cannot be used (fsspec's
            # async ones, HTTP among them, refuse), and fsspec hands out one per process and options.
            self._fs = filesystem(url, storage_options)[0]
        self._root = run.root
        self.manifest = run.data
        self.shards: list[RunShard] = run.shards
        self.fingerprint = run_fingerprint(self.shards)
        self.num_rows = sum(s.rows for s in self.shards)
        self._order: EpochOrder | None = None
        self.epoch = int(epoch)
        EpochOrder([], seed=self.seed, epoch=self.epoch)  # validates seed and epoch up front
        self._start_at(0, 0)
        self._direct = VerifiedShards(self._fs)  # reads shards without the cache (cache_dir None)

    # -- order and position (the rest: EpochPosition) ----------------------------------------
    @property
    def num_samples(self) -> int:
        return self.num_rows

    @property
    def order(self) -> EpochOrder:
        if self._order is None or self._order.epoch != self.epoch:
            self._order = EpochOrder([s.rows for s in self.shards], seed=self.seed, epoch=self.epoch,
                                     shuffle=self.shuffle, block_rows=self.block_rows, window_blocks=self.window_blocks)
        return self._order

    def config(self) -> dict[str, Any]:
        return {"run": self.fingerprint, "rows": self.num_rows, "seed": self.seed, "shuffle": self.shuffle,
                "block_rows": self.block_rows, "window_blocks": self.window_blocks}

    def _check_version(self, state: Any) -> None:
        if isinstance(state, dict) and isinstance(state.get("version"), int) and state["version"] < STATE_VERSION:
            raise ValueError(f"state['version'] is {state['version']}: it was saved by an older ylink-data whose epoch "
                             f"order differs, so its position cannot be resumed exactly; start the epoch again "
                             f"(set_epoch) or resume with the ylink-data that saved it")
        super()._check_version(state)

    # -- reading ------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[pa.RecordBatch]:
        partition = self.partition
        with contextlib.ExitStack() as stack:
            reader = _Reader(self, self.order, stack)
            reader.schedule([partition.batch(self.rank, j) for j in self.steps()])
            for j in self.steps():
                batch = reader.batch(*partition.batch(self.rank, j))
                self._done = j + 1
                yield batch

    def shard_url(self, index: int) -> str:
        return self.shards[index].ref.url


class _Reader:
    """Reads a loader's batches: the blocks they need are decoded `readahead` at a time in
    threads (Parquet decoding and Arrow's take release the GIL, so this uses the node's cores
    while the consumer works), each block shuffled once as a whole, so that a batch is a zero-copy
    slice of a decoded block (or two blocks concatenated). `batch()` is called from one thread at
    a time; the decode threads only read shards."""

    def __init__(self, loader: ShardLoader, order: EpochOrder, stack: contextlib.ExitStack):
        self.loader, self.order, self.columns = loader, order, loader.columns
        # shard -> Future of (ExitStack, ParquetFile, row group starts, read lock), least recent first
        self._open: OrderedDict[int, Future] = OrderedDict()
        self._open_lock = threading.Lock()
        self._blocks: OrderedDict[int, Future] = OrderedDict()  # reached by the consumer, least recent first
        self._ahead_blocks: dict[int, Future] = {}                 # decoding or decoded, not reached yet
        self._last: tuple[int, int, int, Any] = (-1, 0, 0, None)    # (block, first, end position, rows) last read
        self._sequence: list[int] = []           # blocks in the order the batches first need them
        self._next_decode = 0                    # index into _sequence of the next block to submit
        self._cache = self._prefetcher = None
        self._refs = [shard.ref for shard in loader.shards]
        self._uses: list[int] = []
        self._cursor = 0
        self._unscheduled: list[Any] | None = None   # the prefetcher's schedule, until the first block is in
        if loader.cache_dir is not None:
            self._cache, self._prefetcher = _open_cache(loader)
            if self._prefetcher is not None:
                stack.callback(self._prefetcher.close)
        self._ahead = max(0, loader.readahead)
        self._pool = ThreadPoolExecutor(self._ahead, thread_name_prefix="ylink-decode") if self._ahead else None
        stack.callback(self.close)

    def schedule(self, batches: list[tuple[int, int]]) -> None:
        """Note the blocks the batches read, in order, and give the prefetcher their shards (one
        entry per change of shard, so a shard that the shuffle window returns to appears again)."""
        sequence: list[int] = []
        for a, b in batches:
            for block, _, _ in self.order.pieces(a, b):
                if not sequence or sequence[-1] != block:
                    sequence.append(block)
        self._sequence, self._next_decode = sequence, 0
        if self._prefetcher is None:
            return
        uses: list[int] = []
        for block in sequence:
            shard = int(self.order.block_shard[block])
            if not uses or uses[-1] != shard:
                uses.append(shard)
        self._uses, self._cursor = uses, 0
        # Handed over once the first block is in (block()): until then the first shard is the only
        # one worth fetching (the prefetcher would fetch it alone anyway), and on a warm start the
        # prefetcher's checks of every cached shard would compete with the first batch for the CPU.
        self._unscheduled = [self._refs[s] for s in uses]

    def _advance(self, shard: int) -> None:
        """Tell the prefetcher that the reader is at its next use of `shard`."""
        if self._prefetcher is None:
            return
        for i in range(self._cursor, min(len(self._uses), self._cursor + 2 * _DECODED_BLOCKS + 2)):
            if self._uses[i] == shard:
                self._cursor = i
                self._prefetcher.advance(i)
                return

    def shard(self, index: int) -> tuple[pq.ParquetFile, np.ndarray, threading.Lock]:
        """The open shard, its row groups' first rows, and the lock its reads take (one Parquet
        reader is not read by two threads at once). Opening (which may wait for a download) runs
        outside `_open_lock`, so a thread waiting for a shard never holds up one that reads another."""
        with self._open_lock:
            opening = self._open.get(index)
            mine = opening is None
            if mine:
                opening = self._open[index] = Future()
            self._open.move_to_end(index)
        if not mine:
            return opening.result()[1:]
        stack = contextlib.ExitStack()
        shard = self.loader.shards[index]
        try:
            # Memory-mapped either way: a cached shard is immutable (renamed into place, pinned while
            # open), and mapping saves copying it out of the page cache.
            if self._cache is not None:
                source = stack.enter_context(self._cache.get(shard.ref))
            else:
                source = pa.BufferReader(stack.enter_context(
                    self.loader._direct.open(join(self.loader._root, shard.path), shard.ref)))
            file, starts = _open_parquet(source, shard)
        except BaseException as exc:
            stack.close()
            with self._open_lock:
                self._open.pop(index, None)
            opening.set_exception(exc)
            raise
        opening.set_result((stack, file, starts, threading.Lock()))
        with self._open_lock:
            closing = []
            for old in list(self._open):
                if len(self._open) <= _OPEN_SHARDS:
                    break
                if old != index and self._open[old].done():
                    closing.append(self._open.pop(old))
        for old in closing:
            if old.exception() is None:
                old_stack, _, _, old_lock = old.result()
                with old_lock:  # a decode thread may still be reading it: close once that read is done
                    old_stack.close()
        return file, starts, opening.result()[3]

    def _decode(self, block: int) -> pa.RecordBatch:
        """The block's rows in epoch order, as one record batch (runs in a decode thread)."""
        shard = int(self.order.block_shard[block])
        first, n = int(self.order.block_start[block]), int(self.order.block_len[block])
        file, starts, lock = self.shard(shard)
        g0 = int(np.searchsorted(starts, first, side="right")) - 1
        g1 = int(np.searchsorted(starts, first + n, side="left"))
        with lock:
            # In this thread alone: the decode pool reads blocks side by side already, and an Arrow pool
            # thread still decoding for a file object when the interpreter exits (a loop left with
            # `break`) aborts the process (core/parquet.py, apache/arrow#34314).
            table = file.read_row_groups(list(range(g0, g1)), columns=self.columns, use_threads=False)
        table = table.slice(first - int(starts[g0]), n)
        if self.order.shuffle:
            # In range by construction (a permutation of the block's rows): no bounds check. The
            # indices wrap the numpy buffer: pa.array(ndarray) would import pandas (0.2 s) to check
            # whether it was given a pandas object, on the first batch of every process.
            rows = np.ascontiguousarray(self.order.block_rows_order(block) - first, dtype=np.int64)
            indices = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(rows)])
            table = pc.take(table, indices, boundscheck=False)
        return table.combine_chunks().to_batches()[0]   # n >= 1: one batch

    def block(self, block: int) -> pa.RecordBatch:
        """The block's rows in epoch order; starts decoding the blocks that come after it."""
        if block == self._last[0]:
            return self._last[3]
        if block in self._blocks:
            self._blocks.move_to_end(block)
        else:
            self._advance(int(self.order.block_shard[block]))
            self._blocks[block] = self._ahead_blocks.pop(block, None) or self._submit(block)
        if self._next_decode < len(self._sequence) and self._sequence[self._next_decode] == block:
            self._next_decode += 1
        while len(self._blocks) > _DECODED_BLOCKS:
            self._blocks.popitem(last=False)
        rows = self._blocks[block].result()
        if self._unscheduled is not None:
            self._prefetcher.schedule(self._unscheduled)
            self._prefetcher.advance(self._cursor)
            self._unscheduled = None
        # Only now the blocks after it: the one the consumer waits for never shares the cores
        # with blocks it does not need yet (on a fresh start, 4 at once made the first 4x slower).
        while len(self._ahead_blocks) < self._ahead and self._next_decode < len(self._sequence):
            nxt = self._sequence[self._next_decode]
            self._next_decode += 1
            if nxt not in self._blocks and nxt not in self._ahead_blocks:
                self._ahead_blocks[nxt] = self._submit(nxt)
        first = int(self.order.block_pos[block])
        self._last = (block, first, first + rows.num_rows, rows)
        return rows

    def _submit(self, block: int) -> Future:
        if self._pool is not None:
            return self._pool.submit(self._decode, block)
        done: Future = Future()
        try:
            done.set_result(self._decode(block))
        except BaseException as exc:  # noqa: BLE001 -- raised again by result(), as from a thread
            done.set_exception(exc)
        return done

    def batch(self, a: int, b: int) -> pa.RecordBatch:
        """The rows at epoch positions a..b-1, in that order, as one record batch."""
        _, first, end, rows = self._last
        if first <= a < b <= end:  # most batches: inside the block the previous one read
            return rows.slice(a - first, b - a)
        parts = [self.block(block).slice(first, last - first) for block, first, last in self.order.pieces(a, b)]
        if not parts:
            file, _, _ = self.shard(int(self.order.block_shard[0]))
            schema = file.schema_arrow if self.columns is None else \
                pa.schema([file.schema_arrow.field(c) for c in self.columns])
            return pa.RecordBatch.from_pylist([], schema=schema)
        if len(parts) == 1:
            return parts[0]   # a slice of one decoded block: no copy
        if all(p.schema.equals(parts[0].schema) for p in parts[1:]):
            return pa.concat_batches(parts)
        tables = [pa.Table.from_batches([p]) for p in parts]  # shards whose schemas differ a little
        return pa.concat_tables(tables, promote_options="default").combine_chunks().to_batches()[0]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._ahead_blocks.clear()
        with self._open_lock:
            while self._open:
                opened = self._open.popitem()[1]
                if opened.done() and opened.exception() is None:
                    opened.result()[0].close()
        self._blocks.clear()
        self._last = (-1, 0, 0, None)


def _open_parquet(source, shard: RunShard) -> tuple[pq.ParquetFile, np.ndarray]:
    """A verified shard as a Parquet file, and its row groups' first rows; a one-line error naming
    the shard when it is no Parquet file or holds another number of rows than its manifest entry."""
    try:
        file = pq.ParquetFile(source, memory_map=isinstance(source, str))
    except (pa.ArrowException, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise YlinkError(f"cannot read {shard.ref.url} as Parquet: {first}") from None
    meta = file.metadata
    if meta.num_rows != shard.rows:
        raise YlinkError(f"{shard.ref.url} holds {meta.num_rows:,} rows, its manifest entry says {shard.rows:,}: "
                         "the run changed after its manifest was written")
    starts = np.concatenate([[0], np.cumsum([meta.row_group(i).num_rows for i in range(meta.num_row_groups)])])
    return file, starts


def _open_cache(loader: ShardLoader):
    """The node-local shard cache and its prefetcher for `loader` (ylink_data.cache.store and
    .prefetch): the one place the loader meets the cache."""
    try:
        from ylink_data.cache.prefetch import Prefetcher
        from ylink_data.cache.store import ShardCache
    except ImportError as exc:
        raise YlinkError(f"cache_dir needs the shard cache (ylink_data.cache.store), which cannot be imported: {exc}") \
            from None
    cache = ShardCache(loader.cache_dir, max_bytes=loader.max_cache_bytes, storage_options=loader.storage_options)
    return cache, Prefetcher(cache)
