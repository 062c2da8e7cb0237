"""`TextDataset`: a run's documents for PyTorch, as a `torch.utils.data.IterableDataset` over
`ShardLoader` (torch is an optional extra: `import ylink_data` never imports this module).

What it yields: one item per batch, a dict `{column: list}` of up to `batch_size` documents (by
default the columns `id` and `text_column`). Use it with `DataLoader(ds, batch_size=None,
num_workers=k)`: the dataset batches, the DataLoader only moves batches from the workers.

Ranks and workers: `rank`/`world_size` default to torch.distributed's when it is initialised.
DataLoader worker w of k reads the rank's batches w, w+k, ... (`ShardLoader(num_workers=k,
worker=w)`); the DataLoader collects batches from its workers in turn, so the consumer receives
exactly the rank's sequence, the same as with no workers, and each document once per epoch.

Epochs: each `iter()` starts at the dataset's start position (the beginning of `epoch`, or where
`load_state_dict` put it), so like DistributedSampler call `set_epoch(e)` before each epoch; with
`persistent_workers=True` the workers keep their copy of the dataset and miss `set_epoch`.

Resume:
  * torchdata's `StatefulDataLoader`: its `state_dict()` holds, per worker, that worker's
    `TextDataset.state_dict()` as of the last batch the consumer received from it;
    `load_state_dict()` hands each worker its own back and resumes the round robin where it was:
    the consumer's sequence continues exactly (same world size, batch size and workers).
  * Another world size, batch size or number of workers (elastic): `position(loader_state)` turns
    a StatefulDataLoader state (or one dataset state) into a position-only state; load it into the
    new dataset with `load_state_dict` before creating a new DataLoader (do not load the old
    DataLoader state into it).
  * A plain `DataLoader`: the main process's dataset copy does not see the workers' progress; after
    receiving J batches of an iteration, `ds.state_after(J)` is the position-only state to save.
  Resume is exact at the batches the consumer received; batches prefetched by workers but not yet
  received are read again.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch
from torch.utils.data import IterableDataset, get_worker_info

from .cache.loader import STATE_VERSION, ShardLoader, merge_states
from .manifest import read_manifest
from .cache.order import BLOCK_ROWS, WINDOW_BLOCKS


class TextDataset(IterableDataset):
    def __init__(self, url: str, *, text_column: str = "text", columns: Sequence[str] | None = None,
                 rank: int | None = None, world_size: int | None = None, seed: int = 0, epoch: int = 0,
                 batch_size: int = 1024, shuffle: bool = True, cache_dir: str | None = None,
                 max_cache_bytes: int | None = None, storage_options: dict[str, Any] | None = None,
                 block_rows: int = BLOCK_ROWS, window_blocks: int = WINDOW_BLOCKS, readahead: int = 4):
        super().__init__()
        if world_size is None:
            dist = torch.distributed.is_available() and torch.distributed.is_initialized()
            world_size = torch.distributed.get_world_size() if dist else 1
            rank = (torch.distributed.get_rank() if dist else 0) if rank is None else rank
        self.url, self.text_column = url, text_column
        self.columns = list(columns) if columns is not None else ["id", text_column]
        self.rank, self.world_size, self.epoch = rank or 0, world_size, epoch
        self._options = dict(cache_dir=cache_dir, max_cache_bytes=max_cache_bytes, seed=seed, batch_size=batch_size,
                             shuffle=shuffle, columns=self.columns, storage_options=storage_options,
                             block_rows=block_rows, window_blocks=window_blocks, readahead=readahead)
        self._manifest = read_manifest(url, storage_options)  # read and checked once, for every loader made here
        self._resume: dict[str, Any] | None = None
        self._loader: ShardLoader | None = None
        self._make_loader(0, 1)  # checks rank, world size and the options now, in the main process

    def _make_loader(self, worker: int, num_workers: int) -> ShardLoader:
        loader = ShardLoader(self.url, rank=self.rank, world_size=self.world_size, num_workers=num_workers,
                             worker=worker, epoch=self.epoch, manifest=self._manifest, **self._options)
        if self._resume is not None:
            loader.load_state_dict(self._resume)
        return loader

    def _worker_loader(self) -> ShardLoader:
        info = get_worker_info()
        return self._make_loader(info.id, info.num_workers) if info is not None else self._make_loader(0, 1)

    def __iter__(self) -> Iterator[dict[str, list]]:
        self._loader = self._worker_loader()
        return (batch.to_pydict() for batch in self._loader)

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its beginning at the next `iter()`."""
        self.epoch, self._resume, self._loader = int(epoch), None, None

    def state_dict(self) -> dict[str, Any]:
        """The position of this process's iteration (a worker's own, inside a DataLoader worker);
        before any iteration, the position the next one starts from."""
        return (self._loader or self._worker_loader()).state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Start the next iteration at `state` (a `state_dict()` or a position-only state)."""
        self._make_loader(0, 1).check_state(state)
        self.epoch, self._resume, self._loader = int(state["epoch"]), dict(state), None

    def state_after(self, batches: int) -> dict[str, Any]:
        """The position-only state once the consumer has received `batches` batches of an iteration
        that started from this dataset's start position (for a plain DataLoader)."""
        return self._make_loader(0, 1).state_after(batches)


def position(state: dict[str, Any]) -> dict[str, Any]:
    """The consumer's position from a StatefulDataLoader `state_dict()` (with or without workers) or
    from one TextDataset state: a position-only state that any world size or number of workers
    can load (`TextDataset.load_state_dict`)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("version") == STATE_VERSION and "consumed" in node and "run" in node:
                found.append(node)
                return
            for value in node.values():
                walk(value)

    walk(state)
    if not found:
        raise ValueError("no TextDataset state found in this state dict")
    # StatefulDataLoader replays the batches received after its last snapshot on resume; count them.
    extra = int(state.get("_steps_since_snapshot", 0)) if isinstance(state, dict) else 0
    return merge_states(found, extra)
