"""Issue 13, point 2: `--fresh` stopped while it deleted the old run left a manifest.json listing
deleted shards, and the old configuration then reported "already complete". The removal now starts
with the manifest (and ends with run.json), and a manifest is only trusted when the shards it lists
are there with their sizes."""
from __future__ import annotations

import json
import shutil
import sys

import yaml

import ylink_data

from ..conftest import quickstart_config
from ..test_resume import _assert_same_run
from .processes import in_mount_namespace, needs_mount_namespace, ylink, ylink_in_mount_namespace

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
    namespace, so the removal of the old run (at the swap, once the new run is complete in
    _work/next/) fails there, after the shards are gone. The rerun of the old configuration finishes
    the swap, then recomputes what the change touched."""
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


# ------------------------------------------------------------------ output tiers

TIERS = {"high": 0.5, "low": 0.0}


def _finished_tiered_run(tmp_path):
    """A finished run whose documents go to two output tiers (tiers/high/, tiers/low/), each of a
    few shards and a manifest of its own, and its pipeline file."""
    out = tmp_path / "run"
    cfg = quickstart_config(out, input__split_bytes=SPLIT, output__shard_bytes=SHARD_BYTES)
    cfg["stages"] = [{"extract": {}}, {"langid": {"languages": ["en", "zh"], "min_score": 0.5}},
                     {"quality_classifier": {"tiers": TIERS}}]
    path = tmp_path / "tiered.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert ylink("run", path, "--no-progress").returncode == 0
    for tier in TIERS:
        assert len(json.loads((out / "tiers" / tier / "manifest.json").read_text())["shards"]) >= 2
    return out, path


def _stale_manifests(out) -> list[str]:
    """Shards listed by a manifest of the run (its own or a tier's) that are not there."""
    return [f"{m.relative_to(out)}: {s['path']}"
            for m in [out / "manifest.json", *sorted(out.glob("tiers/*/manifest.json"))] if m.exists()
            for s in json.loads(m.read_text())["shards"] if not (m.parent / s["path"]).exists()]


def test_a_rerun_over_missing_tier_shards_withdraws_the_tier_manifests(tmp_path):
    """The rerun after a shard went missing withdrew manifest.json only: stopped before it was done,
    it left tiers/high/manifest.json listing the missing shard, read by open_run and ShardLoader."""
    out, path = _finished_tiered_run(tmp_path)
    gone = json.loads((out / "tiers" / "high" / "manifest.json").read_text())["shards"][0]["path"]
    (out / "tiers" / "high" / gone).unlink()

    stopped = ylink("run", path, "--no-progress", env={"YLINK_FAIL_AFTER_TASKS": "1"})
    assert stopped.returncode == 75, stopped.stderr
    assert _stale_manifests(out) == [] and not list(out.glob("tiers/*/manifest.json"))
    # A finished run keeps no _work/: what runs again is the whole pipeline, and the note says so.
    assert f"listed in manifest.json are missing or changed (tiers/high/{gone}); running the pipeline again" \
        in stopped.stderr

    assert ylink("run", path, "--no-progress").returncode == 0
    assert _stale_manifests(out) == [] and (out / "tiers" / "high" / gone).exists()


_FRESH_THEN_LOOK = """
import json, subprocess, sys
from pathlib import Path
out = Path(sys.argv[1])
proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", *sys.argv[2:]], capture_output=True, text=True)
stale = [f"{m.relative_to(out)}: {s['path']}"
         for m in [out / "manifest.json", *sorted(out.glob("tiers/*/manifest.json"))] if m.exists()
         for s in json.loads(m.read_text())["shards"] if not (m.parent / s["path"]).exists()]
print(json.dumps({"returncode": proc.returncode, "stderr": proc.stderr, "stale": stale,
                  "high shards left": sorted(p.name for p in (out / "tiers/high/data").iterdir())}))
"""


def test_fresh_stopped_inside_a_tier_folder_leaves_no_tier_manifest_behind(tmp_path):
    """--fresh removed tiers/ with one recursive delete in the order the folder lists: stopped
    (kill -9) after a tier's shards and before its manifest, it left tiers/<t>/manifest.json listing
    deleted shards. Here that moment is made for real in a private mount namespace: tiers/high
    lists data/ before manifest.json, and data/ is a mount point, so its removal stops (EBUSY) right
    after its shards are gone."""
    needs_mount_namespace()
    out, path = _finished_tiered_run(tmp_path)
    other = yaml.safe_load(path.read_text())
    other["stages"] = other["stages"][:2]
    other_path = tmp_path / "other.yaml"
    other_path.write_text(yaml.safe_dump(other))
    saved, high = tmp_path / "saved-high", out / "tiers" / "high"
    shutil.copytree(high, saved)

    data_first = (f"mount -t tmpfs none {high}; cp {saved}/manifest.json {high}/; mkdir {high}/data; "
                  f"if [ \"$(ls -U {high} | head -n 1)\" != data ]; then rm -r {high}/data {high}/manifest.json; "
                  f"mkdir {high}/data; cp {saved}/manifest.json {high}/; fi; "
                  f"mount -t tmpfs none {high}/data; cp {saved}/data/* {high}/data/")
    seen = in_mount_namespace(data_first, [sys.executable, "-c", _FRESH_THEN_LOOK, str(out),
                                           "run", str(other_path), "--fresh", "--no-progress"])
    assert seen.returncode == 0, seen.stderr
    result = json.loads(seen.stdout)
    assert result["returncode"] == 2 and "Traceback" not in result["stderr"], result["stderr"]
    assert result["high shards left"] == []  # the removal got past the tier's shards...
    assert result["stale"] == []  # ...and no manifest lists them
