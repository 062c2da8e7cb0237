"""Runs on local disk for training: a node-local shard cache shared by every process on the node,
a prefetcher that fills it ahead of the reader, and the loaders that read a run in a deterministic,
resumable order: `ShardLoader` (documents) and `TokenLoader` (fixed-length token sequences)."""
from __future__ import annotations

from ylink_data.cache.loader import ShardLoader, merge_states
from ylink_data.io.manifest import ShardRef, run_shards
from ylink_data.cache.prefetch import Prefetcher
from ylink_data.cache.store import ShardCache
from ylink_data.cache.tokens import TokenLoader

__all__ = ["ShardLoader", "TokenLoader", "merge_states", "ShardRef", "ShardCache", "Prefetcher", "run_shards"]
