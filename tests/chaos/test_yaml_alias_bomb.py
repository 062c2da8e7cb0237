"""Issue 13, point 8: a YAML "billion laughs" is refused at once, wherever YAML is read.

Nine anchors of nine aliases each are a billion values once expanded. The YAML parser shares
aliased nodes, but `${VAR}` expansion of `storage:` copied each one, so `ylink validate` grew past
3.5 GB in a minute. Now the loader counts what aliases add and stops past a small bound, with a
one-line error naming the file and the line; ordinary anchors and merge keys still work.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from ylink_data.engine.config import load_config

from ..conftest import REPO, SAMPLES

# The child gets 2 GiB of address space: should the bomb go off again, it fails at once with a
# MemoryError instead of taking the machine's memory (validating needs far less).
CHILD = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
         "from ylink_data.cli import main; sys.exit(main(sys.argv[1:]))")


def _laughs(indent: str = "    ") -> str:
    """The classic document: lol1 holds nine strings, each next level nine aliases of the last."""
    lines = [f'{indent}lol1: &lol1 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(2, 10):
        aliases = ", ".join([f"*lol{level - 1}"] * 9)
        lines.append(f"{indent}lol{level}: &lol{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def _pipeline(tmp_path: Path, extra: str = "") -> str:
    return (f"name: laughs\ninput:\n  paths: [{SAMPLES / 'CC-MAIN-2024-22-whirlwind.warc.gz'}]\n"
            f"output:\n  path: {tmp_path / 'out'}\n{extra}")


def _validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, "validate", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def _assert_refused(proc: subprocess.CompletedProcess, file: Path, line: int) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"ylink: error: {file}: ") and f"(line {line}," in lines[0], lines[0]
    assert "aliases expand too far" in lines[0] and "write the values out" in lines[0]


def test_billion_laughs_under_storage_is_refused_with_one_line(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(_pipeline(tmp_path, "storage:\n  s3:\n" + _laughs()))
    # The aliases of lol2..lol4 add 90 + 819 + 7,380 values; the first of lol5 (line 12) passes 10,000.
    _assert_refused(_validate(str(path)), path, 12)


def test_billion_laughs_in_an_included_preset_is_refused(tmp_path):
    preset = tmp_path / "configs" / "laughs.yaml"
    preset.parent.mkdir()
    preset.write_text("storage:\n  gs:\n" + _laughs())
    path = tmp_path / "pipeline.yaml"
    path.write_text(_pipeline(tmp_path, "include: [configs/laughs.yaml]\n"))
    _assert_refused(_validate(str(path)), preset.resolve(), 7)


def test_billion_laughs_in_a_set_value_is_not_expanded(tmp_path):
    path = tmp_path / "pipeline.yaml"
    path.write_text(_pipeline(tmp_path))
    bomb = "{" + _laughs(indent="").strip().replace("\n", ", ") + "}"
    proc = _validate(str(path), "--set", f"storage.s3.x={bomb}")
    # A --set value the loader refuses is taken as a plain string: harmless, validation goes on.
    assert proc.returncode == 0, proc.stderr


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text(_pipeline(tmp_path, "storage:\n  s3:\n    loop: &loop [a, *loop]\n"))
    proc = _validate(str(path))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "alias *loop refers to the value it is in" in proc.stderr and "(line 8," in proc.stderr


def test_ordinary_anchors_aliases_and_merge_keys_still_work(tmp_path, monkeypatch):
    monkeypatch.setenv("YLINK_T_REGION", "eu-west-3")
    path = tmp_path / "pipeline.yaml"
    path.write_text(_pipeline(tmp_path, yaml.safe_dump({
        "stages": [{"langid": {"languages": ["en", "zh"], "min_score": 0.5}}],
    }) + """storage:
  s3: &s3
    endpoint_url: http://127.0.0.1:9000
    client_kwargs: {region_name: "${YLINK_T_REGION}"}
  s3a: *s3
  gs: {<<: *s3, project: ylink}
"""))
    cfg = load_config(path)
    assert cfg.storage["s3a"] == cfg.storage["s3"] == {"endpoint_url": "http://127.0.0.1:9000",
                                                       "client_kwargs": {"region_name": "eu-west-3"}}
    assert cfg.storage["gs"]["project"] == "ylink" and cfg.storage["gs"]["client_kwargs"]["region_name"] == "eu-west-3"
    assert cfg.storage_options("s3a://bucket/x")["endpoint_url"] == "http://127.0.0.1:9000"
    assert _validate(str(path)).returncode == 0
