"""Filling the cache ahead of the reader: the shards the next batches need, in the order they will be
read, at most `window_bytes` ahead of the reader's position, `parallel` shards at a time. It also
tells the cache's eviction when each shard is next needed, so that what is about to be read is
evicted last.

Why two shards at a time, and one while the reader waits: shards that download together share the
link, so each arrives later than it would alone. While the shard at the reader's position is not
there yet (a cold start, or a reader that caught up), it is fetched alone, cut into ranged parts
over every connection (`DownloadPolicy`), so it arrives as soon as the link allows; otherwise two
shards at a time keep the link busy across each request's latency. Measured on a simulated cold
start at 1.2x the consumption bandwidth (bench/bench_cache.py): four at a time delayed the first
batch by about four shards' transfer time."""
from __future__ import annotations

import bisect
import logging
import math
import threading
from typing import Sequence

from ylink_data.io.manifest import ShardRef
from ylink_data.cache.store import ShardCache

__all__ = ["Prefetcher"]

log = logging.getLogger(__name__)


class Prefetcher:
    """A background thread pool filling `cache` ahead of the reader.

    `schedule(refs)` gives the reading order; `advance(i)` says the reader is at `refs[i]`. Workers
    fetch, in order, the shards from the reader's position on whose sizes add up to `window_bytes`
    (at most half the cache's budget; the shard at the position always counts). A failed fetch is
    logged and not retried here: the reader's own `cache.get` retries it and raises the error.
    """

    def __init__(self, cache: ShardCache, window_bytes: int = 2 << 30, parallel: int = 2):
        self.cache = cache
        # At most half the cache's budget: the other half holds the shards being read and those
        # behind the reader that are still pinned.
        self.window_bytes = window_bytes if cache.max_bytes is None else min(window_bytes, cache.max_bytes // 2)
        self._cond = threading.Condition()
        self._refs: list[ShardRef] = []
        self._uses: dict[ShardRef, list[int]] = {}
        self._position = 0
        self._started: set[int] = set()  # indices of the current schedule taken by a worker
        self._finished: set[int] = set()  # ... and done with (fetched, found cached, or failed)
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"ylink-prefetch-{i}", daemon=True)
                         for i in range(max(1, parallel))]
        for thread in self._threads:
            thread.start()
        cache.evict_hint(self.next_use)

    def schedule(self, refs: Sequence[ShardRef]) -> None:
        """The shards in the order they will be read, replacing the previous schedule; the reader
        is at `refs[0]`."""
        uses: dict[ShardRef, list[int]] = {}
        for i, ref in enumerate(refs):
            uses.setdefault(ref, []).append(i)
        with self._cond:
            self._refs, self._uses = list(refs), uses
            self._position = 0
            self._started, self._finished = set(), set()
            self._cond.notify_all()

    def advance(self, position: int) -> None:
        """The reader is now at `refs[position]`."""
        with self._cond:
            self._position = position
            self._cond.notify_all()

    def next_use(self, ref: ShardRef) -> float:
        """How many shards ahead of the reader `ref` is next read (`math.inf`: not again)."""
        with self._cond:
            uses, position = self._uses.get(ref), self._position
        if not uses:
            return math.inf
        i = bisect.bisect_left(uses, position)
        return float(uses[i] - position) if i < len(uses) else math.inf

    def close(self, timeout: float | None = None) -> None:
        """Stop fetching; shards being downloaded are finished (within `timeout` seconds if given)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        if self.cache._hint == self.next_use:
            self.cache.evict_hint(None)

    def __enter__(self) -> "Prefetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _next_job(self) -> tuple[int, ShardRef] | None:
        """The first shard in the window no worker has taken yet, unless the shard at the reader's
        position is still on its way: then nothing else starts (the caller holds the condition)."""
        used = 0
        for i in range(self._position, len(self._refs)):
            ref = self._refs[i]
            if i > self._position and used + ref.size > self.window_bytes:
                return None
            used += ref.size
            if i not in self._started:
                return i, ref
            if i == self._position and i not in self._finished:
                return None
        return None

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (job := self._next_job()) is None:
                    self._cond.wait()
                if self._closed:
                    return
                index, ref = job
                self._started.add(index)
            try:
                with self.cache.get(ref):
                    pass
            except Exception as exc:  # noqa: BLE001 -- the reader's own get() reports it
                if isinstance(exc, RuntimeError) and "interpreter shutdown" in str(exc):
                    return  # the process is exiting with a loader still open: nothing to fetch for
                log.warning("prefetch of %s failed (the reader will try again): %s", ref.url, exc)
            with self._cond:
                if self._refs and index < len(self._refs) and self._refs[index] == ref:
                    self._finished.add(index)
                self._cond.notify_all()
