"""input.paths_from: a path list (one path a line, plain or gzip, local, over http or S3, the way
Common Crawl publishes `wet.paths.gz`) plans the files it lists, joined to input.paths_base; a
missing local line is one error naming the list and the line; the list's content is in the run's
fingerprint."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError, InputError
from ylink_data.engine.runner import Runner

from .conftest import SAMPLES
from .httpserver import FileServer
from .s3server import s3_server

WET = "CC-MAIN-2024-22-whirlwind.warc.wet.gz"   # a relative line, under the base
WARC = "CC-MAIN-2014-35-excerpt.warc"            # an absolute line, under its own folder


def _write_list(path: Path, lines: list[str]) -> Path:
    text = "".join(line + "\n" for line in lines)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _lines(relative: str, absolute: str) -> list[str]:
    return ["# Common Crawl lists have no comments, hand-written ones may", "", f"segments/wet/{relative}",
            "   ", absolute]


def _plan(tmp_path: Path, **input_keys):
    cfg = {"name": "list", "input": input_keys, "output": {"path": str(tmp_path / "out")},
           "stages": [{"langid": {}}]}
    if "storage" in input_keys:
        cfg["storage"] = input_keys.pop("storage")
    return Runner(load_config(cfg)).plan()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The two samples at the layout of a Common Crawl dump: base/segments/wet/NAME, other/NAME."""
    root = tmp_path_factory.mktemp("served")
    (root / "base/segments/wet").mkdir(parents=True)
    (root / "other").mkdir()
    shutil.copy(SAMPLES / WET, root / "base/segments/wet" / WET)
    shutil.copy(SAMPLES / WARC, root / "other" / WARC)
    return root


@pytest.mark.parametrize("list_name", ["wet.paths", "wet.paths.gz"])
def test_a_local_list(served, tmp_path, list_name):
    listed = _write_list(tmp_path / list_name, _lines(WET, str(served / "other" / WARC)))
    plan = _plan(tmp_path, paths_from=str(listed), paths_base=str(served / "base"))
    assert [f.url for f in plan.files] == [str(served / "base/segments/wet" / WET), str(served / "other" / WARC)]
    assert {s.format for t in plan.tasks for s in t} == {"warc"}  # told by each line's name


@pytest.mark.parametrize("list_name", ["wet.paths", "wet.paths.gz"])
def test_a_list_over_http(served, tmp_path, list_name):
    with FileServer(served) as server:
        _write_list(served / list_name, _lines(WET, server.url(f"other/{WARC}")))
        plan = _plan(tmp_path, paths_from=server.url(list_name), paths_base=server.url("base/"))
        asked = {s.path for s in server.gets()}
        expected = sorted([server.url(f"base/segments/wet/{WET}"), server.url(f"other/{WARC}")])
    assert [f.url for f in plan.files] == expected
    assert asked == {list_name}  # planning reads the list only: no request per listed file (~90k in a dump)


@pytest.mark.parametrize("list_name", ["wet.paths", "wet.paths.gz"])
def test_a_list_on_s3(served, tmp_path, list_name):
    with s3_server(tmp_path / "s3") as server:
        server.upload_folder(served, "crawl")
        listed = _write_list(tmp_path / list_name, _lines(WET, f"s3://crawl/other/{WARC}"))
        server.filesystem().put_file(str(listed), f"crawl/{list_name}")
        plan = _plan(tmp_path, paths_from=f"s3://crawl/{list_name}", paths_base="s3://crawl/base",
                     storage={"s3": server.storage_options()})
    assert [f.url for f in plan.files] == [f"s3://crawl/base/segments/wet/{WET}", f"s3://crawl/other/{WARC}"]


def test_a_missing_line_is_named_by_list_and_line(served, tmp_path):
    listed = _write_list(tmp_path / "wet.paths", [f"segments/wet/{WET}", "# a comment", "segments/wet/gone.warc.wet.gz"])
    with pytest.raises(InputError) as caught:
        _plan(tmp_path, paths_from=str(listed), paths_base=str(served / "base"))
    message = str(caught.value)
    assert "\n" not in message and f"{listed} line 3" in message and "gone.warc.wet.gz" in message


def test_a_missing_list_is_one_line(tmp_path):
    with pytest.raises(InputError) as caught:
        _plan(tmp_path, paths_from=str(tmp_path / "nowhere.paths.gz"))
    assert "\n" not in str(caught.value) and "input.paths_from" in str(caught.value)


def test_a_changed_list_is_another_run(served, tmp_path):
    listed = tmp_path / "wet.paths"
    _write_list(listed, [f"segments/wet/{WET}"])
    one = _plan(tmp_path, paths_from=str(listed), paths_base=str(served / "base")).fingerprint
    _write_list(listed, [f"segments/wet/{WET}", str(served / "other" / WARC)])
    two = _plan(tmp_path, paths_from=str(listed), paths_base=str(served / "base")).fingerprint
    assert one != two


@pytest.mark.parametrize("keys", [{"paths": ["a"], "paths_from": "b"}, {}, {"paths": ["a"], "paths_base": "c"}])
def test_paths_or_a_list_exactly(tmp_path, keys):
    with pytest.raises(ConfigError) as caught:
        _plan(tmp_path, **keys)
    assert "input" in str(caught.value)
