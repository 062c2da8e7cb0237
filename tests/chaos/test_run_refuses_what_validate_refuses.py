"""Issue 41, part 2: `ylink validate` refused a misspelt `input.text_field` ("did you mean"), but
`ylink run` exited 0 with every record quarantined; a misspelt `url_field` left every url null. Every
check validate makes is now one list (engine/preflight.py) that `ylink run` makes too, before it
writes anything.

Generated from that list: each check (the two made while planning, and every one of `CHECKS`) has
broken configs here, and the test fails for a check without one. For each, `ylink validate`, `ylink
run` and `ylink_data.run` give the same one line (exit 2 for both commands), and the run leaves no
output folder behind."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Callable

import pytest
import yaml

import ylink_data
from ylink_data.core.errors import YlinkError
from ylink_data.core.storage import WRITE_PROBE
from ylink_data.engine.preflight import CHECKS, PLANNING

from ..conftest import TEST_DATA
from .processes import ylink


def _base(tmp: Path) -> dict:
    """Real Common Crawl lines as JSONL, fields renamed as many corpora name them."""
    docs = tmp / "docs.jsonl.gz"
    shutil.copy(TEST_DATA / "cc_en_head-0174.jsonl.gz", docs)
    return {"name": "broken", "input": {"paths": [str(docs)]}, "output": {"path": str(tmp / "out")}, "stages": []}


def _with(**changes: Callable[[dict, Path], None]) -> Callable[[Path], dict]:
    def make(tmp: Path) -> dict:
        cfg = _base(tmp)
        for change in changes.values():
            change(cfg, tmp)
        return cfg
    return make


def _set(section: str, key: str, value) -> Callable[[dict, Path], None]:
    return lambda cfg, tmp: cfg[section].__setitem__(key, value(tmp) if callable(value) else value)


def _stages(*stages: dict) -> Callable[[dict, Path], None]:
    return lambda cfg, tmp: cfg.__setitem__("stages", list(stages))


def _a_file(tmp: Path) -> str:
    (tmp / "a-file").write_text("not a folder\n")
    return str(tmp / "a-file" / "out")


# check name -> {case: config maker}. A check of engine/preflight.py without an entry fails the test.
CASES: dict[str, dict[str, Callable[[Path], dict]]] = {
    "inputs": {"missing input": _with(p=_set("input", "paths", lambda tmp: [str(tmp / "nope" / "*.jsonl")]))},
    "files read": {"missing tokenizer": _with(s=_stages({"tokenize": {"tokenizer": "no-such-tokenizer.json"}}))},
    "fields": {"text_field typo": _with(t=_set("input", "text_field", "txet")),
               "url_field typo": _with(u=_set("input", "url_field", "metadata.ulr"))},
    "columns": {"column typo": _with(s=_stages({"exact_dedup": {"column": "txet"}})),
                "sft_format without pairs": _with(o=_set("output", "sft_format", "alpaca")),
                "score column of text": _with(s=_stages({"minhash_dedup": {"keep": "highest_score",
                                                                          "score_column": "url"}}))},
    "output": {"output under a file": _with(o=_set("output", "path", _a_file))},
}


def test_every_check_has_broken_configs():
    assert set(CASES) == {*PLANNING, *(check.name for check in CHECKS)}


@pytest.mark.parametrize("check, case", [(c, k) for c, cases in CASES.items() for k in cases])
def test_run_refuses_what_validate_refuses_in_the_same_line_and_writes_nothing(check, case, tmp_path):
    cfg = CASES[check][case](tmp_path)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump(cfg))
    before = sorted(p.name for p in tmp_path.iterdir())

    validated = ylink("validate", pipeline)
    ran = ylink("run", pipeline, "--no-progress")
    assert (validated.returncode, ran.returncode) == (2, 2), (validated.stdout, ran.stdout, ran.stderr)
    [line] = validated.stderr.strip().splitlines()
    assert ran.stderr.strip().splitlines() == [line]
    assert line.startswith("ylink: error: ") and "Traceback" not in ran.stderr

    with pytest.raises(YlinkError) as raised:
        ylink_data.run(str(pipeline), progress=False)
    assert f"ylink: error: {raised.value}" == line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output folder, no probe left
    assert not Path(cfg["output"]["path"]).exists()


def test_the_right_config_runs(tmp_path):
    """The base of every case runs: the lines above are each its one change's."""
    cfg = _base(tmp_path)
    with gzip.open(cfg["input"]["paths"][0], "rt") as f:
        lines = sum(1 for _ in f)
    result = ylink_data.run(cfg, progress=False)
    assert result.stats["output_records"] == lines


def test_a_write_probe_left_by_a_kill_is_no_foreign_file(tmp_path):
    """The output check writes an empty probe and removes it at once, now before every run: one left
    by a kill in between (its name is what io/writable.py writes) must not make the folder foreign."""
    cfg = _base(tmp_path)
    first = ylink_data.run(cfg, progress=False)
    out = Path(cfg["output"]["path"])
    (out / f".{WRITE_PROBE}k1ll3d").write_bytes(b"")
    again = ylink_data.run(cfg, progress=False)
    assert again.stats == first.stats
