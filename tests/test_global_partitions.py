"""The global phases are cut into partitions by the CPUs a run has (at least two per CPU) and by
`rows_per_partition`; what they decide must not depend on either: the same documents kept, the same
reasons and the same clusters with 1 or 2 worker processes and with two partition sizes."""
from __future__ import annotations

import json
import re

import pyarrow as pa

import ylink_data
from ylink_data.pipeline.stats import check_invariant

from .test_minhash_dedup import _corpus


def _run(path, out, cpus: int, rows_per_partition: int, capfd) -> tuple[dict, str]:
    _, stats = ylink_data.run(
        {"name": "parts", "input": {"paths": [str(path)], "format": "jsonl", "split_bytes": 150_000},
         "output": {"path": str(out), "keep_rejected": True},
         "stages": [{"exact_dedup": {"rows_per_partition": rows_per_partition}},
                    {"minhash_dedup": {"cluster_columns": True, "rows_per_partition": rows_per_partition}}],
         "ray": {"execution": "processes", "num_cpus": cpus}}, fresh=True, progress=False)
    assert check_invariant(stats) is None
    run = ylink_data.open_run(out)
    rejected = run.rejected()
    outcome = {url: ("kept", None) for url in run.to_arrow().column("url").to_pylist()}
    outcome.update(zip(rejected.column("url").to_pylist(),
                       zip(rejected.column("reason").to_pylist(), rejected.column("dup_cluster_id").to_pylist())))
    return outcome, capfd.readouterr().err


def _tasks(log: str, label: str) -> int:
    found = re.search(re.escape(label) + r": (\d+)/", log)
    assert found, log
    return int(found.group(1))


def test_same_decisions_whatever_the_cpus_and_partition_sizes(shared_data, tmp_path, capfd):
    texts, langs = _corpus(shared_data, n=150)
    texts += texts[:40:3]  # exact copies too, for exact_dedup
    langs += langs[:40:3]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t, "lang": lang, "url": f"doc/{i}"}, ensure_ascii=False) + "\n"
                            for i, (t, lang) in enumerate(zip(texts, langs))), encoding="utf-8")
    outcomes, partitions = {}, {}
    for cpus, rows_per_partition in ((1, 4_000_000), (2, 4_000_000), (1, 80), (2, 80)):
        outcome, log = _run(path, tmp_path / f"out-{cpus}-{rows_per_partition}", cpus, rows_per_partition, capfd)
        outcomes[cpus, rows_per_partition] = outcome
        partitions[cpus, rows_per_partition] = (_tasks(log, "exact_dedup: find repeats"),
                                                _tasks(log, "minhash_dedup: candidate pairs"))
    # The settings did cut different partitions: at least two per CPU, more for the small size.
    assert partitions[1, 4_000_000] == (2, 2) and partitions[2, 4_000_000] == (4, 4)
    assert all(p > 4 for p in partitions[1, 80]), partitions
    reference = outcomes[1, 4_000_000]
    reasons = [r for r, _ in reference.values()]
    assert len(reference) == len(texts)
    assert reasons.count("exact_dedup") == len(texts[:40:3]) and reasons.count("minhash_dedup") >= 20
    for key, outcome in outcomes.items():
        assert outcome == reference, key
