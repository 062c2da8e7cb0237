"""Issue 33, point 13: an output.path that cannot be written. With s3:// and no credentials, or an
endpoint that does not answer, `ylink validate` said ok and `ylink run` printed a 70- and a 145-line
traceback from the lease (engine/lock.py). Now the run's first write (its lock or lease) and
validate's probe (io/writable.py: a small object written and deleted) are one boundary: every way a
store refuses is one line naming the output, and nothing is written.

The probes are generated, one per way of refusing, each through both commands: wrong credentials,
none at all, an endpoint nothing listens on, a bucket that does not exist (a real SeaweedFS on
127.0.0.1, tests/s3server.py), and a read-only local folder (a read-only tmpfs in a private mount
namespace)."""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable

import pytest
import yaml

from ..conftest import SAMPLES
from ..s3server import s3_server
from .processes import needs_mount_namespace, ylink, ylink_in_mount_namespace

BUCKET = "out-bucket"
INPUT = SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.gz"
# No credentials from anywhere but the pipeline: not the environment, files or an instance's metadata.
NO_AMBIENT_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
                          "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
                          "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent"}


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        server.filesystem().mkdir(BUCKET)
        yield server


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once returned: nothing listens there


# name -> (output.path, storage.s3) for a server's options
PROBES: dict[str, Callable[[dict], tuple[str, dict]]] = {
    "wrong credentials": lambda o: (f"s3://{BUCKET}/run", {**o, "secret": "not-the-secret"}),
    "no credentials": lambda o: (f"s3://{BUCKET}/run", {"endpoint_url": o["endpoint_url"]}),
    "unreachable endpoint": lambda o: (f"s3://{BUCKET}/run",
                                       {**o, "endpoint_url": f"http://127.0.0.1:{_closed_port()}"}),
    "missing bucket": lambda o: ("s3://no-such-bucket/run", o),
}


def _pipeline(tmp_path: Path, output: str, storage: dict) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump({"input": {"paths": [str(INPUT)]}, "output": {"path": output},
                                    "storage": {"s3": storage} if storage else {}}))
    return path


def _one_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("probe", sorted(PROBES))
def test_an_unwritable_store_is_one_line_and_nothing_is_written(s3, tmp_path, probe, command):
    output, storage = PROBES[probe](s3.storage_options())
    pipeline = _pipeline(tmp_path, output, storage)
    line = _one_line(ylink(command, pipeline, *(["--no-progress"] if command == "run" else []),
                           env=NO_AMBIENT_CREDENTIALS, timeout=180))
    assert line.startswith(f"ylink: error: {output} ") and ("not writable" in line or "cannot be written" in line), line
    assert "output.path" in line, line  # the fix names the key
    assert s3.storage_options()["secret"] not in line
    assert s3.filesystem().find(BUCKET) == []  # not a lease, not a probe, nothing


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("below", ["", "/new/run"])
def test_a_read_only_local_folder_is_one_line_in_validate_as_in_run(tmp_path, command, below):
    needs_mount_namespace()
    mount = tmp_path / "ro"
    mount.mkdir()
    output = f"{mount}{below}"
    pipeline = _pipeline(tmp_path, output, {})
    line = _one_line(ylink_in_mount_namespace(f"mount -t tmpfs -o ro,size=1m tmpfs {mount}", command, str(pipeline),
                                              *(["--no-progress"] if command == "run" else [])))
    assert line.startswith(f"ylink: error: {output} is not writable (Read-only file system)"), line
