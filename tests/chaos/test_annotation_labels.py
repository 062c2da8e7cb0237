"""Issue 33, point 12: `ylink quality train --from RUN` with a ±inf label ended in a traceback
(round(inf) for a graded model). Every label that is not a finite number is left out where labels
are read (train/quality.py, read_annotations) and counted in MODEL.metrics.json.

The probes are generated: every kind of unusable value (null, NaN, +inf, -inf) at generated places
(a fixed seed) among real Reuters articles labelled by tests/llmserver.py's judge rule (`edu_score`),
for a graded model and a good/bad one."""
from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.llmserver import edu_score
from tests.test_judge_edu import reuters
from ylink_data import run
from ylink_data.train.quality import train_from_run

UNUSABLE = {"null": None, "nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def annotated_run(folder: Path, texts: list[str], labels: list[float | None]) -> Path:
    """A finished run of `texts` whose shard carries a `judge_score` column of `labels`, as a judge
    step would leave it (the shard rewritten with the column, its manifest entry made to match)."""
    data = folder / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    out = folder / "run"
    run({"input": {"paths": [str(data)], "format": "jsonl"}, "output": {"path": str(out)}}, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    [entry] = manifest["shards"]
    shard = out / entry["path"]
    table = pq.read_table(shard)
    by_text = dict(zip(texts, labels))
    table = table.append_column("judge_score", pa.array([by_text[t] for t in table.column("text").to_pylist()],
                                                        pa.float64()))
    pq.write_table(table, shard)
    entry.update(bytes=shard.stat().st_size, sha256=hashlib.sha256(shard.read_bytes()).hexdigest())
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("threshold", [None, 3.0], ids=["graded", "good-bad"])
@pytest.mark.parametrize("kind", sorted(UNUSABLE))
def test_unusable_labels_are_left_out_and_counted(shared_data, tmp_path, kind, threshold):
    texts = reuters(shared_data, 60)
    rng = random.Random(f"{kind}-{threshold}")
    bad = set(rng.sample(range(len(texts)), 7))
    labels = [UNUSABLE[kind] if i in bad else float(edu_score(t)) for i, t in enumerate(texts)]
    folder = annotated_run(tmp_path, texts, labels)
    result = train_from_run(str(folder), str(tmp_path / "m.bin"), threshold=threshold, autotune_seconds=0)
    counts = result["counts"]
    assert counts["annotated_documents"] == len(texts) - len(bad)
    left_out = "infinite_annotation" if kind.endswith("inf") else "without_annotation"
    assert counts[left_out] == len(bad)
    assert counts["without_annotation"] + counts["infinite_annotation"] == len(bad)
    assert json.loads((tmp_path / "m.metrics.json").read_text())["counts"] == counts
