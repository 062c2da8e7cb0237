"""The checks before a run writes anything: one list, run by `ylink validate` and again by every
`ylink run` (and `ylink_data.run`) before the output folder is made or locked, so that a run refuses
(one line, exit 2, nothing written) whatever validate refuses. Validate used to read the first records
for a typo in `input.text_field` while `ylink run` went on to quarantine every record (issue 41).

Two checks happen while the run is planned (`Runner.plan`), as the run's fingerprint holds what they
read: `inputs` (every input path lists files, io/listing.py) and `files read` (every file an op names
is there and readable, engine/files_read.py). The others are `CHECKS`, each a function of the config
and the planned input giving one line per problem:

- `fields`: the first records of the first JSONL/Parquet input have `input.text_field` and
  `input.url_field` (engine/field_check.py);
- `columns`: every column an op parameter names is there at that op's stage, read as numbers where the
  op needs numbers, and every `output:` format finds the columns it is made of (engine/column_check.py);
- `output`: `output.path` can be written (io/writable.py: a probe written and removed at once).

A check reads a few records at most: a run pays milliseconds for it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ylink_data.core.errors import ConfigError, YlinkError
from ylink_data.engine.column_check import column_problems
from ylink_data.engine.config import PipelineConfig
from ylink_data.engine.field_check import field_problems
from ylink_data.engine.stage_warnings import stage_warnings
from ylink_data.io.listing import InputFile
from ylink_data.io.readers import Split
from ylink_data.io.writable import check_writable

PLANNING = ("inputs", "files read")  # checked by Runner.plan, which both validate and run call first


@dataclass(frozen=True)
class Check:
    name: str
    problems: Callable[[PipelineConfig, list[InputFile], list[Split]], list[str]]


def _output(cfg: PipelineConfig, files: list[InputFile], splits: list[Split]) -> list[str]:
    try:
        check_writable(cfg.output.path, cfg.storage_options(cfg.output.path))
    except YlinkError as exc:
        return [str(exc)]
    return []


CHECKS: tuple[Check, ...] = (
    Check("fields", lambda cfg, files, splits: field_problems(cfg, splits)),
    Check("columns", lambda cfg, files, splits: column_problems(cfg)),
    Check("output", _output),
)


def preflight(cfg: PipelineConfig, files: list[InputFile], splits: list[Split]) -> list[str]:
    """Every check of `CHECKS` on a planned run: a ConfigError of all their problems, one line each;
    else the warnings to show (engine/stage_warnings.py: pipelines that most likely mean something else)."""
    problems = [line for check in CHECKS for line in check.problems(cfg, files, splits)]
    if problems:
        raise ConfigError(problems)
    return stage_warnings(cfg, files)


__all__ = ["CHECKS", "PLANNING", "Check", "preflight"]
