"""The global phases are cut into partitions by the CPUs a run has (at least two per CPU) and by
`rows_per_partition`; what they decide must not depend on either: the same documents kept, the same
reasons and the same clusters with 1 or 2 worker processes and with two partition sizes, and after
a run stopped inside a global phase resumes on another number of CPUs."""
from __future__ import annotations

import json
import re

import yaml

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.engine.runner import Runner
from ylink_data.engine.stats import check_invariant

from .test_minhash_dedup import _corpus
from .test_resume import _ylink_run

EXACT_COPIES = slice(0, 40, 3)


def _corpus_file(shared_data, tmp_path) -> tuple:
    """Real articles with edited near-copies (test_minhash_dedup's) and some exact copies, as JSONL."""
    texts, langs = _corpus(shared_data, n=150)
    texts += texts[EXACT_COPIES]
    langs += langs[EXACT_COPIES]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t, "lang": lang, "url": f"doc/{i}"}, ensure_ascii=False) + "\n"
                            for i, (t, lang) in enumerate(zip(texts, langs))), encoding="utf-8")
    return path, texts


def _config(path, out, cpus: int, rows_per_partition: int = 4_000_000) -> dict:
    return {"name": "parts", "input": {"paths": [str(path)], "format": "jsonl", "split_bytes": 150_000},
            "output": {"path": str(out), "keep_rejected": True},
            "stages": [{"exact_dedup": {"rows_per_partition": rows_per_partition}},
                       {"minhash_dedup": {"cluster_columns": True, "rows_per_partition": rows_per_partition}}],
            "ray": {"execution": "processes", "num_cpus": cpus}}


def _outcome(out) -> dict:
    """Each document's fate: kept, or its reason and its cluster."""
    run = ylink_data.open_run(str(out))
    rejected = run.rejected()
    outcome = {url: ("kept", None) for url in run.to_arrow().column("url").to_pylist()}
    outcome.update(zip(rejected.column("url").to_pylist(),
                       zip(rejected.column("reason").to_pylist(), rejected.column("dup_cluster_id").to_pylist())))
    return outcome


def _tasks(log: str, label: str) -> int:
    found = re.search(re.escape(label) + r": (\d+)/", log)
    assert found, log
    return int(found.group(1))


def test_same_decisions_whatever_the_cpus_and_partition_sizes(shared_data, tmp_path, capfd):
    path, texts = _corpus_file(shared_data, tmp_path)
    outcomes, partitions = {}, {}
    for cpus, rows_per_partition in ((1, 4_000_000), (2, 4_000_000), (1, 80), (2, 80)):
        out = tmp_path / f"out-{cpus}-{rows_per_partition}"
        _, stats = ylink_data.run(_config(path, out, cpus, rows_per_partition), fresh=True, progress=False)
        assert check_invariant(stats) is None
        log = capfd.readouterr().err
        outcomes[cpus, rows_per_partition] = _outcome(out)
        partitions[cpus, rows_per_partition] = (_tasks(log, "exact_dedup: find repeats"),
                                                _tasks(log, "minhash_dedup: candidate pairs"))
    # The settings did cut different partitions: at least two per CPU, more for the small size.
    assert partitions[1, 4_000_000] == (2, 2) and partitions[2, 4_000_000] == (4, 4)
    assert all(p > 4 for p in partitions[1, 80]), partitions
    reference = outcomes[1, 4_000_000]
    reasons = [r for r, _ in reference.values()]
    assert len(reference) == len(texts)
    assert reasons.count("exact_dedup") == len(texts[EXACT_COPIES]) and reasons.count("minhash_dedup") >= 20
    for key, outcome in outcomes.items():
        assert outcome == reference, key


def test_a_run_stopped_in_a_global_phase_resumes_on_other_cpus(shared_data, tmp_path, capfd):
    """Stopped inside exact_dedup's shuffle on 2 CPUs (4 partitions), resumed on 1 (2 partitions):
    the resolve starts over and decides what a run on 1 CPU from the start decides."""
    path, _ = _corpus_file(shared_data, tmp_path)
    ylink_data.run(_config(path, tmp_path / "reference", 1), progress=False)
    out, config = tmp_path / "resumed", tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(_config(path, out, 2)))
    tasks = len(Runner(load_config(config)).plan().tasks)
    assert tasks >= 3
    first = _ylink_run(config, fail_after=tasks + 2)  # phase 0, then 2 of exact_dedup's shuffle tasks
    assert first.returncode == 75, first.stderr
    spilled = [p.name for p in (out / "_work" / "phase0" / "resolve" / "shuffle").glob("*.parquet")]
    assert any(name.endswith("-p00003.parquet") for name in spilled), spilled  # 4 partitions were cut
    assert not (out / "_work" / "phase0" / "resolved.json").exists()
    config.write_text(yaml.safe_dump(_config(path, out, 1)))
    second = _ylink_run(config, fail_after=None)
    assert second.returncode == 0, second.stderr
    assert "resuming" in second.stderr and "exact_dedup: find repeats: 2/2" in second.stderr, second.stderr
    assert _outcome(out) == _outcome(tmp_path / "reference")
