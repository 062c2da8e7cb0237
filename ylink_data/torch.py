"""`TextDataset` and `TokenDataset`: a run's documents, or its Megatron token files as fixed-length
sequences, for PyTorch, as `torch.utils.data.IterableDataset`s over `ShardLoader` and `TokenLoader`
(torch is an optional extra: `import ylink_data` never imports this module).

What they yield: one item per batch. TextDataset: a dict `{column: list}` of up to `batch_size`
documents (by default the columns `id` and `text_column`). TokenDataset: a dict of tensors,
`input_ids` [batch, seq_len (+1 with labels)] int64, and with `boundaries` `cu_seqlens` (int32) and
`position_ids` (see `ylink_data.cache.tokens`). Use them with `DataLoader(ds, batch_size=None,
num_workers=k)`: the dataset batches, the DataLoader only moves batches from the workers.

Ranks and workers: `rank`/`world_size` default to torch.distributed's when it is initialised.
DataLoader worker w of k reads the rank's batches w, w+k, ... (`ShardLoader(num_workers=k,
worker=w)`); the DataLoader collects batches from its workers in turn, so the consumer receives
exactly the rank's sequence, the same as with no workers, and each document (token window)
once per epoch.

Epochs: each `iter()` starts at the dataset's start position (the beginning of `epoch`, or where
`load_state_dict` put it), so like DistributedSampler call `set_epoch(e)` before each epoch; with
`persistent_workers=True` the workers keep their copy of the dataset and miss `set_epoch`.

Resume:
  * torchdata's `StatefulDataLoader`: its `state_dict()` holds, per worker, that worker's
    dataset's `state_dict()` as of the last batch the consumer received from it;
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

from ylink_data.cache.loader import ShardLoader
from ylink_data.cache.order import BLOCK_ROWS, WINDOW_BLOCKS
from ylink_data.cache.position import merge_states
from ylink_data.cache.tokens import TokenLoader
from ylink_data.io.manifest import read_manifest


class _LoaderDataset(IterableDataset):
    """What both datasets share: a loader per iteration (per DataLoader worker), made from the
    manifest read once here, positioned by `load_state_dict`."""

    _loader_class: type = ShardLoader

    def __init__(self, url: str, rank: int | None, world_size: int | None, epoch: int,
                 storage_options: dict[str, Any] | None, options: dict[str, Any]):
        super().__init__()
        if world_size is None:
            dist = torch.distributed.is_available() and torch.distributed.is_initialized()
            world_size = torch.distributed.get_world_size() if dist else 1
            rank = (torch.distributed.get_rank() if dist else 0) if rank is None else rank
        self.url, self.rank, self.world_size, self.epoch = url, rank or 0, world_size, epoch
        self._options = dict(options, storage_options=storage_options)
        self._manifest = read_manifest(url, storage_options)  # read and checked once, for every loader made here
        self._resume: dict[str, Any] | None = None
        self._loader = None
        self._make_loader(0, 1)  # checks rank, world size and the options now, in the main process

    def _make_loader(self, worker: int, num_workers: int):
        loader = self._loader_class(self.url, rank=self.rank, world_size=self.world_size, num_workers=num_workers,
                                    worker=worker, epoch=self.epoch, manifest=self._manifest, **self._options)
        if self._resume is not None:
            loader.load_state_dict(self._resume)
        return loader

    def _worker_loader(self):
        info = get_worker_info()
        return self._make_loader(info.id, info.num_workers) if info is not None else self._make_loader(0, 1)

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


class TextDataset(_LoaderDataset):
    """A run's documents (`ShardLoader`, whose parameters it takes) as a PyTorch `IterableDataset`:
    each item a dict `{column: list}` of up to `batch_size` documents, by default the columns `id`
    and `text_column`. Give it to `DataLoader(ds, batch_size=None, num_workers=k)`; see the module
    docstring for ranks, workers, epochs and resume."""

    def __init__(self, url: str, *, text_column: str = "text", columns: Sequence[str] | None = None,
                 rank: int | None = None, world_size: int | None = None, seed: int = 0, epoch: int = 0,
                 batch_size: int = 1024, shuffle: bool = True, cache_dir: str | None = None,
                 max_cache_bytes: int | None = None, storage_options: dict[str, Any] | None = None,
                 block_rows: int = BLOCK_ROWS, window_blocks: int = WINDOW_BLOCKS, readahead: int = 4):
        self.text_column = text_column
        self.columns = list(columns) if columns is not None else ["id", text_column]
        super().__init__(url, rank, world_size, epoch, storage_options, dict(
            cache_dir=cache_dir, max_cache_bytes=max_cache_bytes, seed=seed, batch_size=batch_size, shuffle=shuffle,
            columns=self.columns, block_rows=block_rows, window_blocks=window_blocks, readahead=readahead))

    def __iter__(self) -> Iterator[dict[str, list]]:
        self._loader = self._worker_loader()
        return (batch.to_pydict() for batch in self._loader)


class TokenDataset(_LoaderDataset):
    """Fixed-length token sequences of a run's Megatron files (`TokenLoader`, whose parameters it
    takes), as tensors; `dtype` of `input_ids` is int64 (torch's index type) unless given."""

    _loader_class = TokenLoader

    def __init__(self, url: str, *, seq_len: int, rank: int | None = None, world_size: int | None = None,
                 seed: int = 0, epoch: int = 0, batch_size: int = 8, shuffle: bool = True, labels: bool = False,
                 boundaries: bool = False, dtype: str = "int64", cache_dir: str | None = None,
                 max_cache_bytes: int | None = None, storage_options: dict[str, Any] | None = None,
                 block_windows: int = BLOCK_ROWS, window_blocks: int = WINDOW_BLOCKS):
        super().__init__(url, rank, world_size, epoch, storage_options, dict(
            seq_len=seq_len, cache_dir=cache_dir, max_cache_bytes=max_cache_bytes, seed=seed, batch_size=batch_size,
            shuffle=shuffle, labels=labels, boundaries=boundaries, dtype=dtype, block_windows=block_windows,
            window_blocks=window_blocks))

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        self._loader = self._worker_loader()
        return ({key: torch.from_numpy(value) for key, value in batch.items()} for batch in self._loader)


def position(state: dict[str, Any]) -> dict[str, Any]:
    """The consumer's position from a StatefulDataLoader `state_dict()` (with or without workers) or
    from one dataset state (TextDataset's or TokenDataset's): a position-only state that any world
    size or number of workers can load (`load_state_dict`)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("version"), int) and "consumed" in node and "run" in node:
                found.append(node)
                return
            for value in node.values():
                walk(value)

    walk(state)
    if not found:
        raise ValueError("no TextDataset or TokenDataset state found in this state dict")
    # StatefulDataLoader replays the batches received after its last snapshot on resume; count them.
    extra = int(state.get("_steps_since_snapshot", 0)) if isinstance(state, dict) else 0
    return merge_states(found, extra)


__all__ = ["TextDataset", "TokenDataset", "position"]
