"""Ray, one way: `ray.address: null` starts an embedded single-machine Ray (no set-up); "auto" or
"ray://host:port" joins a cluster. A process that already has Ray initialised keeps using it."""
from __future__ import annotations

import logging
import os

from ..config import RayConfig

EMBEDDED_OBJECT_STORE = 512 * 1024 * 1024  # data moves through files, not the object store


def ensure_ray(cfg: RayConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    common = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True)
    if cfg.address:
        ray.init(address=cfg.address, **common)
    else:
        # An embedded Ray listens on loopback only and lives as long as this process: no token.
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        # "local" always starts a private instance: a bare ray.init() would join any cluster this
        # machine happens to run (`ray start`, another test's cluster), which is not what null means.
        ray.init(address="local", num_cpus=cfg.num_cpus, object_store_memory=cfg.object_store_memory or EMBEDDED_OBJECT_STORE,
                 **common)


def cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))
