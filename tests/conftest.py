"""Shared fixtures: one real embedded Ray for the whole session, paths to the bundled and shared data."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples" / "crawl"
TEST_DATA = Path(__file__).resolve().parent / "data"
SHARED_DATA = Path(os.environ.get("YLINK_SHARED_DATA", REPO.parent / "shared" / "data"))
QUICKSTART = REPO / "pipelines" / "quickstart.yaml"

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="session")
def ray_session():
    """A real local Ray with 2 CPUs and a small object store, shared by every test that runs pipelines."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, object_store_memory=200 * 1024 * 1024, include_dashboard=False,
                 logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"research-only data not found at {SHARED_DATA} (CI always has ../shared/data)")
    return SHARED_DATA


@pytest.fixture
def crawl_copy(tmp_path) -> Path:
    """A private copy of the sample crawl, for tests that add broken files to it."""
    dst = tmp_path / "crawl"
    shutil.copytree(SAMPLES, dst, ignore=shutil.ignore_patterns("licenses", "*.md"))
    return dst


def quickstart_config(output: Path, **changes) -> dict:
    """The quickstart pipeline as a dict with absolute input paths and `output` as its folder."""
    import yaml

    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg["input"]["paths"] = [str(REPO / p) for p in cfg["input"]["paths"]]
    cfg["output"]["path"] = str(output)
    for key, value in changes.items():
        section, _, name = key.partition("__")
        cfg.setdefault(section, {})[name] = value
    return cfg
