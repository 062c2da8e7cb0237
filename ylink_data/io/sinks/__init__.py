"""The sinks: every output format of a run, one module each (`base.Sink` says what one is).

Adding an output format = one module here with a `@register`ed `Sink` (and its import below) and
its key in `output:` (engine/config.py's OutputConfig). The runner and publish go over `SINKS`;
the manifest reads and writes each sink's section through it. The imports below are in the order
of the manifest's sections, which is part of manifest.json's bytes: add new sinks last.
"""
from __future__ import annotations

from typing import Any

from ylink_data.io.sinks import parquet, megatron, sft, preference, prompts  # noqa: F401 -- each registers its sink
from ylink_data.io.sinks.base import SINKS, ShardOutput, Sink, register  # noqa: F401 -- the names sinks use


def plan_sinks(cfg: Any) -> list[Sink]:
    """The sinks a run's config (engine.config.PipelineConfig) asks for, Parquet shards first."""
    return [sink for sink in (cls.plan(cfg) for cls in SINKS.values()) if sink is not None]


def publish_label(sinks: list[Sink]) -> str:
    """The publish phase's progress line: "publish shards and Megatron files and sft, prompts JSONL"."""
    names: dict[str, list[str]] = {}
    for sink in sinks:
        names.setdefault(sink.label, []).append(sink.name)
    said = [f"{', '.join(names[label])} {label}" if SINKS[names[label][0]].named_in_label else label
            for label in names]
    return "publish " + " and ".join(said)
