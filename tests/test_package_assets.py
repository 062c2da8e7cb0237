"""Files of the installed package are named `package://PATH` and found from any folder (issue 42
point 3: datagen.yaml's seeds, `ylink_data/assets/seeds/...`, resolved only from the repository
root). Every bundled pipeline validates in a folder that holds the clone's data (samples/, configs/,
tests/data/) but not the package's source tree: what it reads of the package comes from the package."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ylink_data.core.paths import ASSETS, PACKAGE, package_path
from ylink_data.core.storage import filesystem

from .conftest import REPO

PIPELINES = sorted((REPO / "pipelines").glob("*.yaml"))
CLONE_DATA = ("samples", "configs", "tests/data", "pipelines")


def _elsewhere(tmp_path: Path) -> Path:
    work = tmp_path / "elsewhere"
    for rel in CLONE_DATA:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).symlink_to(REPO / rel)
    return work


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_every_pipeline_validates_outside_the_source_tree(pipeline, tmp_path):
    work = _elsewhere(tmp_path)
    assert not (work / "ylink_data").exists()
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "validate", f"pipelines/{pipeline.name}"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    # A pipeline that reads what another run writes (quality-distill.yaml reads out/quickstart) is
    # refused for that input only: it names a folder a run makes, never a file of the package.
    problems = [line for line in proc.stderr.splitlines() if line.strip() and "'out/" not in line
                and not line.startswith("ylink: error: ")]
    assert proc.returncode == 0 or not problems, proc.stderr[-3000:]
    assert "ylink_data/" not in proc.stderr, proc.stderr[-3000:]


def test_package_urls_name_the_installed_package_files(tmp_path):
    seeds = "package://assets/seeds/self_instruct-en.jsonl"
    assert package_path(seeds) == str(ASSETS / "seeds" / "self_instruct-en.jsonl")
    assert package_path("samples/x.jsonl") == "samples/x.jsonl" and package_path("s3://b/k") == "s3://b/k"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        fs, path = filesystem(seeds)
        assert fs.isfile(path) and Path(path).is_relative_to(PACKAGE)
        assert sorted(fs.glob(package_path("package://assets/seeds/*.jsonl"))) == \
            sorted(str(p) for p in (ASSETS / "seeds").glob("*.jsonl"))
    finally:
        os.chdir(cwd)
