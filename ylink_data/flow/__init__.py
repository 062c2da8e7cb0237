"""Flows: a YAML file whose top level is `steps:` (pipelines and training commands), run in order by
`ylink run` and checked by `ylink validate`: `steps` (what a flow is), `check` (what its steps read
and write, against each other), `run` (loading and running one)."""
from __future__ import annotations

from ylink_data.flow.run import is_flow, load_flow, path_is_flow, run_flow

__all__ = ["is_flow", "load_flow", "path_is_flow", "run_flow"]
