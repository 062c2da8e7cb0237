"""S3 end to end: input read from and output written to a real S3-compatible server (SeaweedFS)
started on 127.0.0.1, through s3fs, with credentials passed as storage options."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

import ylink_data
from ylink_data.core.errors import InputError

from .conftest import REPO, SAMPLES, quickstart_config
from .s3server import s3_server


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        fs = server.filesystem()
        fs.mkdir("crawl-in")
        fs.mkdir("corpus-out")
        for path in sorted(SAMPLES.glob("*.warc.gz")):
            fs.put_file(str(path), f"crawl-in/cc/{path.name}")
        yield server


def _s3_config(server, output: str, **input_changes) -> dict:
    return {"name": "s3", "input": {"paths": ["s3://crawl-in/cc/*.warc.gz"], **input_changes},
            "output": {"path": output, "keep_rejected": True}, "stages": [{"exact_dedup": {}}],
            "storage": {"s3": server.storage_options()}}


def test_s3_in_s3_out_equals_local(ray_session, s3, tmp_path):
    local = tmp_path / "local"
    cfg = quickstart_config(local)
    cfg["input"]["paths"] = [str(SAMPLES / "*.warc.gz")]
    cfg["stages"] = _s3_config(s3, "unused")["stages"]
    ylink_data.run(cfg)

    url, stats = ylink_data.run(_s3_config(s3, "s3://corpus-out/run1", split_bytes=100_000))
    assert url == "s3://corpus-out/run1"
    fs = s3.filesystem()
    manifest = json.loads(fs.cat_file("corpus-out/run1/manifest.json"))
    assert manifest["shards"]
    # The run keeps phase 0 (before exact_dedup) for reuse; `ylink clean` removes it, on S3 too.
    # SeaweedFS lists an emptied prefix as a folder for a while: only files are counted.
    def left() -> list[str]:
        fs.invalidate_cache("corpus-out/run1")
        return [p for p, i in fs.find("corpus-out/run1/_work", detail=True).items() if i["type"] == "file"]

    assert "corpus-out/run1/_work/phase0/reuse.json" in left()
    cleaned = subprocess.run([sys.executable, "-m", "ylink_data.cli", "clean", url, "--storage-options",
                              json.dumps(s3.storage_options())], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0 and "removed" in cleaned.stdout, cleaned.stderr
    assert s3.secret not in cleaned.stdout + cleaned.stderr
    assert left() == []
    remote = ylink_data.open_run("s3://corpus-out/run1", storage_options=s3.storage_options())
    local_run = ylink_data.open_run(str(local))
    assert remote.stats["output_records"] == local_run.stats["output_records"] == stats["output_records"] > 50
    # Same documents; ids differ because they hash the source URL, which differs (s3:// vs a local path).
    assert sorted(remote.to_arrow().column("text").to_pylist()) == sorted(local_run.to_arrow().column("text").to_pylist())
    assert all(s.startswith("s3://crawl-in/cc/") for s in remote.to_arrow().column("source").to_pylist())
    assert remote.rejected("exact_dedup").num_rows == stats["stages"][1]["dropped"]["exact_dedup"]


def test_credentials_never_reach_run_files(ray_session, s3):
    ylink_data.run(_s3_config(s3, "s3://corpus-out/run2"))
    fs = s3.filesystem()
    for name in ("run.json", "manifest.json", "stats.json"):
        text = fs.cat_file(f"corpus-out/run2/{name}").decode()
        assert s3.secret not in text and s3.key not in text
    info = json.loads(fs.cat_file("corpus-out/run2/run.json"))
    assert info["config"]["storage"]["s3"]["secret"] == "***"
    assert info["config"]["storage"]["s3"]["endpoint_url"] == s3.endpoint_url


def test_missing_bucket_fails_up_front_with_one_line(s3, tmp_path):
    cfg = _s3_config(s3, str(tmp_path / "out"))
    cfg["input"]["paths"] = ["s3://no-such-bucket-here/crawl/*.warc.gz"]
    with pytest.raises(InputError, match=r"input.paths\[0\]: .*no-such-bucket-here"):
        ylink_data.run(cfg)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-bucket-here" in lines[0] and s3.secret not in proc.stderr
