"""A flow and its steps, as `run.load_flow` reads them and `check.flow_problems` checks them."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from ylink_data.engine.config import PipelineConfig


class QualityTrainStep(BaseModel):
    """The keys of a `quality_train` step: `ylink quality train --from RUN`'s options."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    run: str = Field(alias="from", min_length=1)
    output: str = Field(min_length=1)
    label_column: str = "judge_score"
    threshold: float | None = None
    autotune_seconds: float = Field(300.0, ge=0)
    seed: int = 1
    lang: str = "auto"
    test_fraction: float = Field(0.2, gt=0, lt=1)


@dataclass
class Step:
    kind: str  # "run" or "quality_train"
    where: str  # "steps[2]": what errors name
    pipeline: PipelineConfig | None = None
    train: QualityTrainStep | None = None


@dataclass
class Flow:
    name: str
    steps: list[Step]
    source: str | None
