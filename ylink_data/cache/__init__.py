"""Runs on local disk for training: a node-local shard cache shared by every process on the node,
a prefetcher that fills it ahead of the reader, and the loaders that read a run in a deterministic,
resumable order: `ShardLoader` (documents) and `TokenLoader` (fixed-length token sequences)."""
from __future__ import annotations

from .loader import ShardLoader, merge_states
from ..manifest import ShardRef, run_shards
from .prefetch import Prefetcher
from .store import ShardCache
from .tokens import TokenLoader

__all__ = ["ShardLoader", "TokenLoader", "merge_states", "ShardRef", "ShardCache", "Prefetcher", "run_shards"]
