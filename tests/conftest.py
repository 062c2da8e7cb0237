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


# The permissively licensed folders of ../shared/data, copied unchanged (tests/data/shared/README.md):
# a clone without ../shared/data runs the tests that read only them.
SHIPPED_SHARED = TEST_DATA / "shared"


class _ShippedShared(type(Path())):
    """tests/data/shared standing for ../shared/data: naming one of its folders that is not shipped
    (a research-only corpus: Reuters-21578, THUCNews, ChineseWebText, the trafilatura pages) skips the
    test, as the whole folder's absence did."""

    def __truediv__(self, key):
        child = super().__truediv__(key)
        if Path(self) == SHIPPED_SHARED and not Path(child).exists():
            pytest.skip(f"research-only data not found at {SHARED_DATA} ({str(key).split('/')[0]} is not shipped in "
                        f"tests/data/shared; CI always has ../shared/data)")
        return child


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or without it its shipped part (tests/data/shared): a test that reads a folder
    of it that is not shipped skips there."""
    if SHARED_DATA.is_dir():
        return SHARED_DATA
    return _ShippedShared(SHIPPED_SHARED)


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


def pytest_terminal_summary(terminalreporter):
    """The run's last word on data: how many tests skipped for research-only data that the repository
    does not ship (README.md says why)."""
    research = [r for r in terminalreporter.stats.get("skipped", [])
                if "research-only data not found" in str(getattr(r, "longrepr", ""))]
    if research:
        terminalreporter.write_line(f"{len(research)} tests skipped: they read research-only corpora of ../shared/data "
                                    "that the repository may not ship (README.md)")
