"""Issue 13, point 2: `--fresh` stopped while it deleted the old run left a manifest.json listing
deleted shards, and the old configuration then reported "already complete". The removal now starts
with the manifest (and ends with run.json), and a manifest is only trusted when the shards it lists
are there with their sizes."""
from __future__ import annotations

import json
import shutil

import yaml

import ylink_data

from ..conftest import quickstart_config
from ..test_resume import _assert_same_run
from .processes import needs_mount_namespace, ylink, ylink_in_mount_namespace

SPLIT, SHARD_BYTES = 60_000, 20_000  # the sample crawl in dozens of tasks and several shards


def _finished_run(tmp_path):
    """A finished quickstart run of several shards, its pipeline file, and a copy of it as it was."""
    out = tmp_path / "run"
    cfg = quickstart_config(out, input__split_bytes=SPLIT, output__shard_bytes=SHARD_BYTES)
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    ylink_data.run(cfg)
    reference = tmp_path / "reference"
    shutil.copytree(out, reference)
    assert len(json.loads((out / "manifest.json").read_text())["shards"]) >= 3
    return out, path, reference


def test_fresh_stopped_half_way_leaves_no_manifest_behind(ray_session, tmp_path):
    """A real interruption at a fixed point: `rejected/` is read-only in the --fresh run's mount
    namespace, so the removal of the old run fails there, after the shards are gone."""
    needs_mount_namespace()
    out, path, reference = _finished_run(tmp_path)
    other = yaml.safe_load(path.read_text())
    other["stages"] = other["stages"][:2]
    other_path = tmp_path / "other.yaml"
    other_path.write_text(yaml.safe_dump(other))

    rejected = out / "rejected"
    stopped = ylink_in_mount_namespace(f"mount --bind {rejected} {rejected}; mount -o remount,bind,ro {rejected}",
                                       "run", other_path, "--fresh", "--no-progress")
    assert stopped.returncode == 2 and "Traceback" not in stopped.stderr, stopped.stderr
    assert "is not writable" in stopped.stderr
    assert not (out / "data").exists()  # the removal got past the shards...
    assert not (out / "manifest.json").exists()  # ...and the manifest went first

    rerun = ylink("run", path, "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    assert "already complete" not in rerun.stderr
    _assert_same_run(out, reference)


def test_a_manifest_listing_missing_or_changed_shards_is_not_complete(ray_session, tmp_path, capfd):
    out, path, reference = _finished_run(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    shards = json.loads((out / "manifest.json").read_text())["shards"]

    (out / shards[1]["path"]).unlink()  # what the interrupted --fresh used to leave
    capfd.readouterr()
    ylink_data.run(cfg, progress=False)
    err = capfd.readouterr().err
    assert "already complete" not in err and f"1 shard(s) listed in manifest.json are missing or changed ({shards[1]['path']})" in err
    _assert_same_run(out, reference)

    last = out / shards[-1]["path"]
    last.write_bytes(last.read_bytes()[: shards[-1]["bytes"] // 2])  # a truncated shard
    ylink_data.run(cfg, progress=False)
    assert "already complete" not in capfd.readouterr().err
    _assert_same_run(out, reference)

    ylink_data.run(cfg, progress=False)  # and once whole, it is complete again
    assert "already complete" in capfd.readouterr().err
