"""The Ray remote functions of a run, in one place (tasks retry on worker loss, not on bugs)."""
from __future__ import annotations

import ray

from .publish import publish_shard
from .tasks import execute_task

execute_task_remote = ray.remote(num_cpus=1, max_retries=3)(execute_task)
publish_shard_remote = ray.remote(num_cpus=1, max_retries=3)(publish_shard)
