"""One setting moves a run onto a cluster: a two-node Ray cluster simulated on this machine
(`ray.cluster_utils.Cluster`) produces byte-identical shards to embedded local mode."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

import ylink_data

from .conftest import REPO, quickstart_config

SPLIT = 100_000


@pytest.fixture
def two_node_cluster():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "object_store_memory": 100 * 1024 * 1024,
                                      "resources": {"head": 1}})
    cluster.add_node(num_cpus=1, object_store_memory=100 * 1024 * 1024, resources={"worker": 1})
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def test_cluster_run_matches_local_run(ray_session, two_node_cluster, tmp_path):
    local = tmp_path / "local"
    ylink_data.run(quickstart_config(local, input__split_bytes=SPLIT))

    on_cluster = tmp_path / "cluster"
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(quickstart_config(on_cluster, input__split_bytes=SPLIT)))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(config), "--no-progress",
                           "--set", f"ray.address={two_node_cluster.address}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # The head has a CPU here: the driver's node runs tasks too, the other one may not see local paths.
    assert "this Ray cluster runs tasks on 1 other node with CPUs" in proc.stderr
    assert f"output.path: {on_cluster}" in proc.stderr
    info = yaml.safe_load((on_cluster / "run.json").read_text())
    assert info["config"]["ray"]["address"] == two_node_cluster.address

    a, b = ylink_data.open_run(str(local)), ylink_data.open_run(str(on_cluster))
    assert b.stats["output_records"] == a.stats["output_records"] > 50
    assert [s["sha256"] for s in b.manifest["shards"]] == [s["sha256"] for s in a.manifest["shards"]]
    assert b.to_arrow().equals(a.to_arrow())
