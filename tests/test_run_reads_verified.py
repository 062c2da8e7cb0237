"""Issue 39, point 8: every reader of a finished run checks each file against its manifest before it
reads it, as a pipeline checks a run's shard it reads as input. Before, `open_run(...).to_pandas()`
and `ylink inspect` read a shard swapped after the run was written as if it were the run's.

Generated: every file the manifest lists (the shards, the rejected/ and quarantine/ files), swapped for
another of its kind (or, alone of its kind, damaged in place), under every reader of a run that reads
files of that kind. Each must refuse in one line naming the file, and read nothing of it."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import ylink_data
from ylink_data.cli.inspect import inspect_path
from ylink_data.core.errors import YlinkError
from ylink_data.explore import sample_documents, sample_rejected
from ylink_data.io.texts import iter_texts
from ylink_data.report import write_report

from .test_publish_steps import _config, _inputs

# Every reader of a finished run, by the kind of files it reads (the manifest's section).
READERS = {
    "shards": {
        "open_run().to_arrow()": lambda run, tmp: ylink_data.open_run(run).to_arrow(),
        "open_run().to_pandas()": lambda run, tmp: ylink_data.open_run(run).to_pandas(),
        "ylink inspect": lambda run, tmp: inspect_path(run, limit=1000),
        "sample_documents": lambda run, tmp: sample_documents(run, n=1000),
        "iter_texts": lambda run, tmp: list(iter_texts([run])),
        "write_report": lambda run, tmp: write_report(run, str(tmp / "report.html")),
    },
    "rejected": {
        "open_run().rejected()": lambda run, tmp: ylink_data.open_run(run).rejected(),
        "sample_rejected": lambda run, tmp: sample_rejected(run, n=1000),
        "sample_documents(source='rejected')": lambda run, tmp: sample_documents(run, n=1000, source="rejected"),
        "write_report": lambda run, tmp: write_report(run, str(tmp / "report.html")),
    },
    "quarantine": {
        "open_run().quarantine()": lambda run, tmp: ylink_data.open_run(run).quarantine(),
        "write_report": lambda run, tmp: write_report(run, str(tmp / "report.html")),
    },
}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("verified")
    largest = _inputs(tmp / "in")
    out = tmp / "run"
    ylink_data.run(_config(tmp / "in", largest, out, "local"), progress=False)
    return out


def _listed(run: Path) -> list[tuple[str, str]]:
    manifest = json.loads((run / "manifest.json").read_text())
    files = [("shards", s["path"]) for s in manifest["shards"]]
    return files + [(kind, f["path"]) for kind in ("rejected", "quarantine") for f in manifest[kind]["files"]]


def test_the_run_has_files_of_every_kind_and_every_reader_reads_it_whole(run, tmp_path):
    kinds = [kind for kind, _ in _listed(run)]
    assert kinds.count("shards") >= 2 and kinds.count("rejected") >= 2 and "quarantine" in kinds
    for readers in READERS.values():
        for name, read in readers.items():
            with redirect_stdout(io.StringIO()):
                read(str(run), tmp_path)


def test_a_swapped_or_damaged_file_is_refused_by_every_reader_that_reads_it(run, tmp_path):
    listed = _listed(run)
    cases = 0
    for kind, rel in listed:
        path = run / rel
        whole = path.read_bytes()
        others = [p for k, p in listed if k == kind and p != rel]
        if others:  # another file of the run, as a copy or a mix-up would put it there
            path.write_bytes((run / others[0]).read_bytes())
        else:
            damaged = bytearray(whole)
            for at in range(len(damaged) // 2, len(damaged) // 2 + 8):
                damaged[at] ^= 0xFF
            path.write_bytes(bytes(damaged))
        try:
            for name, read in READERS[kind].items():
                with pytest.raises(YlinkError) as err, redirect_stdout(io.StringIO()):
                    read(str(run), tmp_path)
                message = str(err.value)
                assert str(path) in message and "manifest.json" in message and "\n" not in message, (name, rel, message)
                cases += 1
        finally:
            path.write_bytes(whole)
    assert cases >= 2 * len(READERS["shards"]) + 2 * len(READERS["rejected"]) + len(READERS["quarantine"])
