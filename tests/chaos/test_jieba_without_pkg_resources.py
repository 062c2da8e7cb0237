"""Issue 39, point 21: jieba 0.42 imports `pkg_resources` (jieba/_compat.py) when it can. setuptools 81
and later warn on that import, once in every worker process, and setuptools drops the module.
Chinese segmentation must give the same words with `pkg_resources` absent, and no worker may print
the warning where it exists.

Each case runs in fresh processes, the real `ylink run` with worker processes (several tasks) and
a segmentation of real Chinese text (THUCNews): `absent` makes `pkg_resources` unimportable for the
whole process (a sitecustomize that refuses it, as an environment without it is); `deprecated`
puts a `pkg_resources` on the path that warns on import as setuptools 81+'s does and serves jieba's
files as its `resource_stream` does (this venv's setuptools no longer has one). Before: the
`deprecated` run printed the warning from jieba/_compat.py in its workers.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from tests.chaos.processes import python, ylink
from tests.conftest import REPO
from ylink_data.text.transform import units

ABSENT = '''import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "pkg_resources" or name.startswith("pkg_resources."):
            raise ModuleNotFoundError("No module named 'pkg_resources'", name=name)
sys.meta_path.insert(0, _Absent())
'''
DEPRECATED = '''import importlib, os, warnings
warnings.warn("pkg_resources is deprecated as an API. See https://setuptools.pypa.io/en/latest/pkg_resources.html. "
              "The pkg_resources package is slated for removal as early as 2025-11-30. Refrain from using this "
              "package or pin to Setuptools<81.", UserWarning, stacklevel=2)


def resource_stream(package, name):
    return open(os.path.join(os.path.dirname(importlib.import_module(package).__file__), name), "rb")
'''
SEGMENT = '''import json, sys
from ylink_data.text.transform import units
texts = json.load(open(sys.argv[1], encoding="utf-8"))
units.load_segmenter()
print(json.dumps({"words": [units.chinese_words(t) for t in texts], "pkg_resources": "pkg_resources" in sys.modules}))
'''


def _environment(tmp_path: Path, kind: str) -> dict[str, str]:
    site = tmp_path / kind
    if kind == "absent":
        site.mkdir()
        (site / "sitecustomize.py").write_text(ABSENT, encoding="utf-8")
    else:
        (site / "pkg_resources").mkdir(parents=True)
        (site / "pkg_resources" / "__init__.py").write_text(DEPRECATED, encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}


def test_workers_segment_chinese_alike_without_pkg_resources_and_print_no_warning(tmp_path, shared_data):
    lines = (shared_data / "zh_thucnews_cnews" / "cnews.val.txt").read_text(encoding="utf-8").splitlines()
    texts = [line.partition("\t")[2] for line in lines[::8][:120]]
    (tmp_path / "texts.json").write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    paths = []
    for k in range(4):
        path = tmp_path / f"zh-{k}.jsonl"
        path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts[k::4]),
                        encoding="utf-8")
        paths.append(str(path))
    words, kept = {}, {}
    for kind in ("absent", "deprecated"):
        env = _environment(tmp_path, kind)
        proc = python(SEGMENT, tmp_path / "texts.json", env=env)
        assert proc.returncode == 0, proc.stderr
        said = json.loads(proc.stdout)
        assert not said["pkg_resources"] and "pkg_resources" not in proc.stderr, (kind, proc.stderr)
        words[kind] = said["words"]
        out = tmp_path / f"out-{kind}"
        pipeline = tmp_path / f"{kind}.yaml"
        pipeline.write_text(yaml.safe_dump({
            "input": {"paths": paths, "format": "jsonl", "split_bytes": 40_000},
            "output": {"path": str(out), "keep_rejected": True}, "ray": {"execution": "processes"},
            "stages": [{"gopher_quality": {"language": "zh"}}, {"gopher_repetition": {"language": "zh"}}]}),
            encoding="utf-8")
        proc = ylink("run", pipeline, "--no-progress", env=env)
        assert proc.returncode == 0, proc.stderr
        assert "pkg_resources" not in proc.stderr and "Warning" not in proc.stderr, (kind, proc.stderr)
        tasks = re.search(r"phase 0: .*?(\d+)/\d+ tasks", proc.stderr)
        assert tasks and int(tasks.group(1)) >= 3, proc.stderr  # several tasks, in worker processes
        kept[kind] = sorted(r["text"] for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist())
    # The same words as in this process, however it found jieba's files.
    normal = [units.chinese_words(t) for t in texts]
    assert words["absent"] == words["deprecated"] == normal and sum(map(len, normal)) > 20_000
    assert kept["absent"] == kept["deprecated"] and 0 < len(kept["absent"]) < len(texts)
