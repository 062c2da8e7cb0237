"""Packed SFT batches read from a run: a run's Parquet shards through `ShardLoader` (its cache,
shuffle, ranks and workers) `window` conversations at a time, each window packed into fixed-length
sequences (`ylink_data.text.tokens.pack`), yielded `batch_size` sequences at a time as NumPy arrays."""
from __future__ import annotations

from typing import Any, Iterator

from ylink_data.cache.loader import ShardLoader
from ylink_data.text.tokens.encode import TOKEN_IDS
from ylink_data.text.tokens.pack import LOSS_MASK, PackedSequence, Strategy, collate, pack, rows_of


class PackedBatches:
    """Packed SFT batches from a run (folder or URL) written by a pipeline ending in `sft_tokenize`:
    `ShardLoader(url, columns=[token_ids, loss_mask], batch_size=window, **loader_options)` reads
    the conversations (shuffled, per rank and DataLoader worker, through the cache with
    `cache_dir`...), each window of `window` conversations is packed (`pack`), and batches of
    `batch_size` sequences are yielded (`collate`, plus `ids`: the run's document ids packed in
    each sequence, in order; the last batch may be smaller). Each conversation
    of the run comes exactly once per epoch across ranks and workers. Ranks can end an epoch with
    different numbers of batches (packing depends on the lengths each rank reads): a synchronous
    job stops all ranks at the smallest count, or pads with a dummy batch."""

    def __init__(self, url: str, *, seq_len: int, batch_size: int = 8, window: int = 1024,
                 strategy: Strategy = "ffd", pad_id: int = 0, **loader_options: Any):
        if seq_len < 1 or batch_size < 1 or window < 1:
            raise ValueError("seq_len, batch_size and window must be at least 1")
        self.seq_len, self.batch_size, self.strategy, self.pad_id = seq_len, batch_size, strategy, pad_id
        self.loader = ShardLoader(url, columns=["id", TOKEN_IDS, LOSS_MASK], batch_size=window, **loader_options)

    def set_epoch(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        pending: list[tuple[PackedSequence, list[str]]] = []
        for record_batch in self.loader:
            ids = record_batch.column("id").to_pylist()
            packed = pack(*rows_of(record_batch), self.seq_len, strategy=self.strategy, pad_id=self.pad_id)
            pending += [(p, [ids[i] for i in p.members]) for p in packed]
            while len(pending) >= self.batch_size:
                yield self._batch(pending[:self.batch_size])
                pending = pending[self.batch_size:]
        if pending:
            yield self._batch(pending)

    @staticmethod
    def _batch(items: list[tuple[PackedSequence, list[str]]]) -> dict[str, Any]:
        return {**collate([p for p, _ in items]), "ids": [ids for _, ids in items]}
