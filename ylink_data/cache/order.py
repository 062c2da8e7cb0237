"""The order in which a run's documents are read in an epoch, and how it is shared among ranks and
DataLoader workers: pure functions of (shard row counts, seed, epoch, world size, workers, batch
size), with no state kept anywhere (MosaicML Streaming's `shuffle/` idea, without its shared memory).

Sample space
    Every row of every shard, shards in manifest order: sample id `i` is row `i - offset[s]` of shard
    `s`, where `offset` is the running sum of the manifest's row counts. N = the sum of all rows.

Epoch order (`EpochOrder`)
    A sequence of the N sample ids, each exactly once:
    1. the shards are permuted (`shuffle=False` keeps manifest order and skips steps 2 and 3);
    2. each shard is cut into blocks of `block_rows` consecutive rows (the last block of a shard may
       be shorter; blocks never span shards). Listed in the permuted shard order, block i gets the
       sort key `i + u_i * w_i`, with u_i uniform in [0, 1) and `w_i = min(window_blocks, 1 + i/2)`,
       and the blocks are read in order of their keys: a sliding-window shuffle in which a block
       moves at most `window_blocks` places, whose window opens over the first 2 x `window_blocks`
       blocks;
    3. the rows of each block are permuted.
    This is MosaicML's "py1e" idea with Parquet in mind: a block is about one row group (the writer
    uses 4096-row groups), so reading a block decodes one or two row groups, and the blocks read at
    any moment come from about `window_blocks` consecutive blocks of the shard sequence, which is
    what the cache has to hold at once. Why a sliding window that opens gradually, not fixed
    windows permuted one by one: a fixed window's random order asks for most of its shards within
    its first third, so a cold start needs shards faster than the batches consume them (a
    simulation of bench_cache's run at 1.2x the consumption bandwidth stalled 12% of the epoch;
    this order: none); here shards are first needed at the pace they are read. Batches are
    contiguous slices of the sequence, so one batch mixes rows of one or two blocks, and
    consecutive batches mix up to `window_blocks` blocks (default 64 x 4096 = 262144 rows,
    Streaming's default shuffle block). Every random choice uses numpy's `Generator(PCG64)` seeded
    with a `SeedSequence` of integers: (seed, epoch, 0) for the shard permutation, (seed, epoch, 1)
    for the block keys, (seed, epoch, 2, shard, block) for a block's rows. Nothing uses Python's
    `hash()`, so every process on every machine computes the same order (float64 keys are exact
    IEEE arithmetic, the same everywhere).

Partition (`Partition`)
    The part of the epoch still to read, positions `start .. N-1` of the sequence, is cut into
    global steps of `world_size * batch_size` positions. In step j, rank r takes positions
    `start + j*W*B + r*B` .. `+B`: one batch. Steps before the last are full.
    Remainder policy: the last, partial step's T < W*B positions are split into W contiguous runs
    whose sizes differ by at most one (the first `T mod W` ranks get one more), so every rank
    yields the same number of batches, `steps = ceil((N - start) / (W*B))`, and no document is
    dropped or repeated. When T < W, the last batch of ranks `T..W-1` has 0 rows (an empty batch, so
    collective training steps stay in lockstep). Nothing is padded and nothing is dropped.
    Within a rank, DataLoader worker w of k takes the rank's batches w, w+k, w+2k, ...: the round
    robin in which a DataLoader collects batches from its workers gives the consumer the rank's
    batches in order.

Positions as state
    After a rank's consumer has received its first J batches (of a partition that began at
    `start`), every rank has (equal batch counts) and the read part of the epoch is exactly
    positions `start .. start + J*W*B - 1` (all N after the last step). That single number, the
    `consumed` position, does not depend on the world size, the workers or the batch size: a new
    `Partition(start=consumed, ...)` with any of them reads the rest of the epoch, each document
    once. With the same world size and batch size, the new partition's global steps are the old
    ones from step J on, so the sequence each rank receives is exactly the uninterrupted one.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

BLOCK_ROWS = 4096      # = ylink_data.io.parquet.ROW_GROUP_ROWS: a block is about one row group
WINDOW_BLOCKS = 64     # 64 x 4096 = 262144 rows per shuffle window (MosaicML's shuffle_block_size)
WINDOW_OPENING = 0.5   # the window grows by one block per two blocks read, up to window_blocks

_SHARDS, _WINDOWS, _ROWS = 0, 1, 2   # stream tags: one independent random stream per decision


def rng(*key: int) -> np.random.Generator:
    """A numpy Generator(PCG64) determined by non-negative integers only."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(k) for k in key])))


def shard_permutation(count: int, seed: int, epoch: int, shuffle: bool = True) -> np.ndarray:
    """The order in which an epoch reads `count` shards (step 1); `TokenLoader` cuts its stream of
    token files in this order, so its windows' shards are read in the order they were cut."""
    return rng(seed, epoch, _SHARDS).permutation(count) if shuffle else np.arange(count)


class EpochOrder:
    """The order of the N samples in one epoch, kept as blocks (not N ids) so that it stays small
    for billions of rows: three arrays of one entry per block, rows permuted lazily per block."""

    def __init__(self, shard_rows: Sequence[int], *, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                 block_rows: int = BLOCK_ROWS, window_blocks: int = WINDOW_BLOCKS):
        if seed < 0 or epoch < 0:
            raise ValueError(f"seed and epoch must be non-negative integers, got seed={seed}, epoch={epoch}")
        if block_rows < 1 or window_blocks < 1:
            raise ValueError("block_rows and window_blocks must be at least 1")
        self.shard_rows = np.asarray(shard_rows, dtype=np.int64)
        if (self.shard_rows < 0).any():
            raise ValueError("shard row counts must be non-negative")
        self.seed, self.epoch, self.shuffle = int(seed), int(epoch), bool(shuffle)
        self.block_rows, self.window_blocks = int(block_rows), int(window_blocks)
        self.shard_offset = np.concatenate([[0], np.cumsum(self.shard_rows)]).astype(np.int64)
        self.num_rows = int(self.shard_offset[-1])

        shards = shard_permutation(len(self.shard_rows), seed, epoch, shuffle)
        per_shard = [-(-int(self.shard_rows[s]) // block_rows) for s in shards]
        block_shard = np.repeat(shards, per_shard).astype(np.int64)
        block_index = np.concatenate([np.arange(n) for n in per_shard]).astype(np.int64) if per_shard else \
            np.zeros(0, np.int64)
        if shuffle and len(block_shard):
            i = np.arange(len(block_shard), dtype=np.float64)
            width = np.minimum(float(window_blocks), 1.0 + i * WINDOW_OPENING)
            keys = i + rng(seed, epoch, _WINDOWS).random(len(block_shard)) * width
            perm = np.argsort(keys, kind="stable")
            block_shard, block_index = block_shard[perm], block_index[perm]
        self.block_shard = block_shard
        self.block_index = block_index                       # index of the block within its shard
        self.block_start = block_index * block_rows          # first row of the block in its shard
        self.block_len = np.minimum(block_rows, self.shard_rows[block_shard] - self.block_start)
        self.block_pos = np.concatenate([[0], np.cumsum(self.block_len)]).astype(np.int64)
        self._pos_list = self.block_pos.tolist()  # pieces() runs per batch: bisect on a list beats numpy calls

    @property
    def num_blocks(self) -> int:
        return len(self.block_shard)

    def block_rows_order(self, block: int) -> np.ndarray:
        """The block's rows in epoch order, as row numbers within its shard."""
        start, n = int(self.block_start[block]), int(self.block_len[block])
        if not self.shuffle:
            return np.arange(start, start + n, dtype=np.int64)
        shard, index = int(self.block_shard[block]), int(self.block_index[block])
        return start + rng(self.seed, self.epoch, _ROWS, shard, index).permutation(n).astype(np.int64)

    def pieces(self, start: int, stop: int) -> Iterator[tuple[int, int, int]]:
        """(block, first, last) triples covering positions start..stop-1 of the sequence, in
        order: positions `block_pos[block] + first .. + last - 1`."""
        if not 0 <= start <= stop <= self.num_rows:
            raise ValueError(f"positions {start}..{stop} outside 0..{self.num_rows}")
        pos = self._pos_list
        block = bisect.bisect_right(pos, start) - 1
        while start < stop:
            base = pos[block]
            end = min(stop, pos[block + 1])
            if end > start:
                yield block, start - base, end - base
            start = max(start, end)
            block += 1

    def sample_ids(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Global sample ids at positions start..stop-1 (for checks and tools; readers use pieces)."""
        stop = self.num_rows if stop is None else stop
        parts = [self.shard_offset[self.block_shard[b]] + self.block_rows_order(b)[first:last]
                 for b, first, last in self.pieces(start, stop)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def shards_between(self, start: int, stop: int) -> list[int]:
        """The shards that positions start..stop-1 read, in order of first use."""
        seen: dict[int, None] = {}
        for block, _, _ in self.pieces(start, stop):
            seen.setdefault(int(self.block_shard[block]), None)
        return list(seen)


@dataclass(frozen=True)
class Partition:
    """Positions start..num_rows-1 of an epoch shared among `world_size` ranks and, within each,
    `num_workers` workers, in batches of `batch_size` (see the module docstring for the policy)."""

    num_rows: int
    start: int
    world_size: int = 1
    batch_size: int = 1024
    num_workers: int = 1

    def __post_init__(self):
        if not 0 <= self.start <= self.num_rows:
            raise ValueError(f"start {self.start} outside 0..{self.num_rows}")
        if self.world_size < 1 or self.batch_size < 1 or self.num_workers < 1:
            raise ValueError("world_size, batch_size and num_workers must be at least 1")

    @property
    def step_rows(self) -> int:
        return self.world_size * self.batch_size

    @property
    def full_steps(self) -> int:
        return (self.num_rows - self.start) // self.step_rows

    @property
    def steps(self) -> int:
        """Batches per rank (the same on every rank)."""
        return math.ceil((self.num_rows - self.start) / self.step_rows)

    def batch(self, rank: int, step: int) -> tuple[int, int]:
        """Positions [a, b) of rank's batch number `step`."""
        if not 0 <= rank < self.world_size or not 0 <= step < self.steps:
            raise IndexError(f"no batch {step} for rank {rank} (steps={self.steps}, world_size={self.world_size})")
        base = self.start + step * self.step_rows
        if step < self.full_steps:
            a = base + rank * self.batch_size
            return a, a + self.batch_size
        tail = self.num_rows - base
        each, extra = divmod(tail, self.world_size)
        a = base + rank * each + min(rank, extra)
        return a, a + each + (rank < extra)

    def batches(self, rank: int, steps: range) -> list[tuple[int, int]]:
        """`batch(rank, j)` for every j of `steps` (a range of this partition's steps), at once."""
        full = range(steps.start, min(steps.stop, self.full_steps), steps.step) if steps.step > 0 else range(0)
        a = self.start + np.arange(full.start, full.stop, full.step, dtype=np.int64) * self.step_rows \
            + rank * self.batch_size
        out = list(zip(a.tolist(), (a + self.batch_size).tolist()))
        return out + [self.batch(rank, j) for j in steps[len(full):]]

    def worker_steps(self, worker: int, first: int = 0) -> range:
        """The rank's batches that DataLoader worker `worker` reads, from batch `first` on."""
        if not 0 <= worker < self.num_workers:
            raise IndexError(f"worker {worker} outside 0..{self.num_workers - 1}")
        first += (worker - first) % self.num_workers
        return range(first, self.steps, self.num_workers)

    def consumed(self, steps: int) -> int:
        """The epoch position reached once every rank's consumer has received `steps` batches."""
        return min(self.num_rows, self.start + steps * self.step_rows)
