"""Runs on local disk for training: a node-local shard cache shared by every process on the node,
a prefetcher that fills it ahead of the reader, and the loader that reads a run in a deterministic,
resumable order (`ShardLoader`)."""
from __future__ import annotations

from .loader import ShardLoader, merge_states
from ..manifest import ShardRef, run_shards
from .prefetch import Prefetcher
from .store import ShardCache

__all__ = ["ShardLoader", "merge_states", "ShardRef", "ShardCache", "Prefetcher", "run_shards"]
