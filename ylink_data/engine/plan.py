"""How a pipeline becomes work: phases of per-task map work, cut at each global op.

  stages:  extract, langid, exact_dedup, gopher_quality, minhash_dedup, quality_classifier
  phase 0: read -> extract -> langid -> keys for exact_dedup        | resolve exact_dedup (global)
  phase 1: apply exact_dedup -> gopher_quality -> keys for minhash   | resolve minhash_dedup (global)
  phase 2: apply minhash_dedup -> quality_classifier                 -> publish shards

Every phase has the same tasks (task t of phase p reads what task t of phase p-1 kept), so the
output is a function of the input splits alone, not of how many workers ran them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ylink_data.ops import op_class

StageRef = tuple[int, str, dict[str, Any]]  # (stage index: 1 + position in `stages`, op name, params)


@dataclass
class Phase:
    index: int
    ops: list[StageRef] = field(default_factory=list)  # map ops run in this phase
    incoming: StageRef | None = None  # global op resolved after the previous phase, applied first here
    outgoing: StageRef | None = None  # global op whose keys this phase computes

    @property
    def final(self) -> bool:
        return self.outgoing is None

    def label(self, keys_remade: bool = False) -> str:
        """What the phase does: `read → extract → minhash_dedup keys`."""
        names = (["read"] if self.index == 0 else [f"apply {self.incoming[1]}"]) + [n for _, n, _ in self.ops]
        if self.outgoing:
            names.append(f"{self.outgoing[1]} keys" + (" made again" if keys_remade else ""))
        return " → ".join(names)


def plan_phases(ops: list[tuple[str, dict[str, Any]]]) -> list[Phase]:
    phases = [Phase(0)]
    for i, (name, params) in enumerate(ops, start=1):
        ref = (i, name, params)
        if op_class(name).is_global(params):
            phases[-1].outgoing = ref
            phases.append(Phase(len(phases), incoming=ref))
        else:
            phases[-1].ops.append(ref)
    return phases


def stage_names(ops: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return ["read", *(name for name, _ in ops)]
