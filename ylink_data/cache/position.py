"""Where a loader stands in its epoch, as a small JSON-able state: shared by `ShardLoader` (documents)
and `TokenLoader` (token windows), which differ only in what a sample is.

A loader reads samples 0..N-1 of an epoch in an order (`order.EpochOrder`) shared among ranks and
DataLoader workers (`order.Partition`). Its state:
    {"version", [kind], <the loader's config keys: run fingerprint, sizes, seed, order shape>, "epoch",
     "consumed": epoch position reached,
     "partition": {"start", "world_size", "batch_size", "num_workers", "worker", "steps"} or None}
`partition.steps` is J = (the rank batch number of the last batch this loader yielded) + 1, i.e. how
many of its rank's batches the consumer has received at the moment it receives that batch, and
`consumed = start + J * world_size * batch_size` (N once the epoch is over): where the epoch stands
for every rank. It does not mention the rank: every rank of a synchronous job has the same state,
so one rank's checkpoint serves all.

Resume (`load_state_dict(state)`):
  * the state's partition has this loader's world size, batch size, worker count and worker index:
    the loader continues its own batches after J (the same sequence as without the interruption;
    this is what torchdata's StatefulDataLoader does, giving each worker its own state back);
  * otherwise (another world size, batch size or worker count: elastic) a new partition starts at
    `consumed`: the rest of the epoch, shared among the new ranks, each sample once. With the
    same world size and batch size this is again exactly the uninterrupted sequence.
  * A state from one of several DataLoader workers (num_workers > 1) is only that worker's view:
    its `consumed` lags behind the consumer's when another worker delivered the last batch, so it
    cannot seed another shape and loading it there raises. `merge_states(all workers' states)`
    gives the consumer's position (the largest J: the consumer receives a rank's batches in order).
  Resume is exact at batch boundaries the consumer received; batches read ahead but not received
  are read again after a resume, as they must be.
"""
from __future__ import annotations

from typing import Any, Sequence

from ylink_data.cache.order import EpochOrder, Partition


def check_shape(rank: int, world_size: int, worker: int, num_workers: int, batch_size: int) -> None:
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside 0..{world_size - 1}")
    if not 0 <= worker < num_workers:
        raise ValueError(f"worker {worker} outside 0..{num_workers - 1}")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")


class EpochPosition:
    """The position bookkeeping of a loader. A subclass sets `rank`, `world_size`, `num_workers`,
    `worker`, `batch_size`, `epoch`, `seed`, `num_samples` and calls `_start_at(0, 0)`; it says what
    a state must agree on in `config()` and names its states with `STATE_VERSION` (and `STATE_KIND`,
    a "kind" key, for loaders other than ShardLoader, whose states predate it)."""

    STATE_VERSION: int = 0
    STATE_KIND: str | None = None
    NAME = "loader"
    _start: int
    _done: int

    def config(self) -> dict[str, Any]:
        """The keys a state must match to be a position in this loader's sequence (run, sizes, order)."""
        raise NotImplementedError

    def _start_at(self, start: int, done: int) -> None:
        self._start, self._done = int(start), int(done)

    @property
    def partition(self) -> Partition:
        return Partition(self.num_samples, self._start, self.world_size, self.batch_size, self.num_workers)

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its beginning."""
        EpochOrder([], seed=self.seed, epoch=epoch)  # validates it
        self.epoch = int(epoch)
        self._start_at(0, 0)

    def steps(self) -> range:
        """The rank batch numbers this loader yields from its position, in order."""
        return self.partition.worker_steps(self.worker, self._done)

    def __len__(self) -> int:
        return len(self.steps())

    def batch_positions(self, step: int) -> tuple[int, int]:
        """Epoch positions [a, b) of this rank's batch `step` of the current partition."""
        return self.partition.batch(self.rank, step)

    # -- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        p = self.partition
        head: dict[str, Any] = {"kind": self.STATE_KIND} if self.STATE_KIND else {}
        return {**head, "version": self.STATE_VERSION, **self.config(), "epoch": self.epoch,
                "consumed": p.consumed(self._done),
                "partition": {"start": self._start, "world_size": self.world_size, "batch_size": self.batch_size,
                              "num_workers": self.num_workers, "worker": self.worker, "steps": self._done}}

    def check_state(self, state: dict[str, Any]) -> None:
        """Raise ValueError, naming the key, when `state` is not a position in this loader's run and
        order (another run, seed, shuffle or order shape would make the position meaningless)."""
        if isinstance(state, dict) and state.get("kind") != self.STATE_KIND and "consumed" in state:
            raise ValueError(f"this state is a {state.get('kind') or 'documents'} loader's, not a {self.NAME}'s")
        self._check_version(state)
        mine = self.state_dict()
        for key in self.config():
            if state.get(key) != mine[key]:
                raise ValueError(f"state[{key!r}] is {state.get(key)!r} but this {self.NAME} has {mine[key]!r}"
                                 + (" (the state belongs to another run)" if key in ("run", "rows", "tokens") else ""))
        consumed = state.get("consumed")
        if type(consumed) is not int or not 0 <= consumed <= self.num_samples:
            raise ValueError(f"state['consumed'] {consumed!r} outside 0..{self.num_samples}")

    def _check_version(self, state: Any) -> None:
        if not isinstance(state, dict) or state.get("version") != self.STATE_VERSION:
            raise ValueError(f"not a {self.NAME} state of version {self.STATE_VERSION}: {state!r:.200}")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state(state)
        self.epoch = int(state["epoch"])
        p = state.get("partition")
        if p and (p["world_size"], p["batch_size"], p["num_workers"], p["worker"]) == \
                (self.world_size, self.batch_size, self.num_workers, self.worker):
            self._start_at(p["start"], p["steps"])
            return
        if p and p["num_workers"] > 1 and p["steps"] > 0:
            raise ValueError(
                f"this state is DataLoader worker {p['worker']}'s of {p['num_workers']}: it resumes only that "
                f"worker (same world size, batch size and workers); merge all workers' states with "
                f"merge_states() to resume with another shape")
        self._start_at(state["consumed"], 0)

    def state_after(self, batches: int) -> dict[str, Any]:
        """The state once a consumer that iterates this rank's batches from this loader's position
        (through any number of DataLoader workers, which deliver them in order) has received
        `batches` of them: a position-only state, loadable with any world size or workers."""
        if self.num_workers > 1 and self._done > 0:
            raise ValueError("a DataLoader worker's loader that has yielded batches does not know the consumer's "
                             "position; use merge_states() on all workers' states")
        state = self.state_dict()
        state["consumed"], state["partition"] = self.partition.consumed(self._done + batches), None
        return state


def merge_states(states: Sequence[dict[str, Any]], extra_steps: int = 0) -> dict[str, Any]:
    """The consumer's position from the states of all DataLoader workers of one rank (for example
    the worker snapshots in a StatefulDataLoader state), plus `extra_steps` batches received after
    them: a position-only state, loadable with any world size or number of workers."""
    if not states:
        raise ValueError("no states to merge")
    first = states[0]
    for s in states[1:]:
        for key in sorted((set(first) | set(s)) - {"consumed", "partition"}):
            if s.get(key) != first.get(key):
                raise ValueError(f"states disagree on {key!r}: {first.get(key)!r} vs {s.get(key)!r}")
    parts = [s.get("partition") for s in states]
    if any(parts):
        if not all(parts):
            raise ValueError("cannot merge worker states with position-only states")
        shape = {(p["start"], p["world_size"], p["batch_size"], p["num_workers"]) for p in parts}
        if len(shape) != 1:
            raise ValueError(f"states come from different partitions: {sorted(shape)}")
        start, world_size, batch_size, num_workers = shape.pop()
        if sorted(p["worker"] for p in parts) != list(range(num_workers)):
            raise ValueError(f"need the states of all {num_workers} workers, got workers "
                             f"{sorted(p['worker'] for p in parts)}")
        steps = max(p["steps"] for p in parts) + extra_steps
        total = next(int(first[k]) for k in _COUNT_KEYS if k in first)
        consumed = Partition(total, start, world_size, batch_size, num_workers).consumed(steps)
    else:
        if extra_steps:
            raise ValueError("extra_steps needs worker states (they carry the batch shape)")
        consumed = max(int(s["consumed"]) for s in states)
    return {**first, "consumed": consumed, "partition": None}


_COUNT_KEYS = ("rows", "windows")  # where a state keeps its epoch's sample count: ShardLoader's, TokenLoader's
