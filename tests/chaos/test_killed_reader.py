"""Issue 33, point 4: a document reader child killed from outside in the middle of a file (as the
OOM killer does for another process's sake) was blamed on the file: quarantined for good as damaged,
and the run published as complete. Now the file goes to a new child once more; only a file that
kills that one too is quarantined, saying so. Generated over the signals a child dies of and how
many times it dies; the real child is held on the file (YLINK_TEST_HOLD_CHILD) and killed by PID."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from ylink_data.core.deadline import HOLD_ENV
from ylink_data.io.readers.base import Record
from ylink_data.io.readers.isolated import reader_process

from ..conftest import REPO
from .processes import YLINK, _env, wait_until
from .test_hostile_documents import DOCS, read

PDF = DOCS / "multi_page.pdf"  # a real 5-page PDF (samples/documents/SOURCE.md)
SIGNALS = [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT]


def _killer(folder: Path, times: int, sig: int) -> threading.Thread:
    """Kills each held child as its pid file appears in `folder`, `times` children in all."""
    def kill_each() -> None:
        killed: set[str] = set()
        while len(killed) < times:
            for name in set(os.listdir(folder)) - killed:
                os.kill(int(name), sig)
                killed.add(name)
            threading.Event().wait(0.01)  # polling the folder for the next child, not a sync by sleep

    thread = threading.Thread(target=kill_each, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_file_is_quarantined_only_when_it_kills_the_reader_twice(sig, times, tmp_path, monkeypatch):
    held = tmp_path / "held"
    held.mkdir()
    monkeypatch.setenv(HOLD_ENV, f"{times}:{held}")
    reader_process().close()  # a new child, started with the hold in its environment
    killer = _killer(held, times, sig)
    try:
        (item,) = read(PDF)
    finally:
        reader_process().close()  # later tests get a child without the hold
    killer.join(timeout=60)
    assert len(os.listdir(held)) == times  # it was the real child, held on this file, that died
    if times == 1:
        assert isinstance(item, Record) and item.metadata["pages"] == 5
        return
    name = signal.Signals(sig).name
    assert item.reason == "unreadable", item
    assert f"it killed the document reader process twice ({name}, signal {int(sig)})" in item.error
    assert "\n" not in item.error


def test_a_run_whose_reader_is_killed_once_reads_the_file_and_quarantines_nothing(tmp_path):
    """The real command, its reader child killed from outside in the middle of the file."""
    folder, held, out = tmp_path / "docs", tmp_path / "held", tmp_path / "out"
    folder.mkdir()
    held.mkdir()
    (folder / PDF.name).write_bytes(PDF.read_bytes())
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(json.dumps({"name": "killed", "input": {"paths": [str(folder)]},
                                    "output": {"path": str(out)}, "stages": []}))
    proc = subprocess.Popen([*YLINK, "run", str(pipeline)], cwd=REPO, env=_env() | {HOLD_ENV: f"1:{held}"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_until(lambda: bool(os.listdir(held)), proc, "the reader child holding the file")
    (pid,) = os.listdir(held)
    os.kill(int(pid), signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["quarantined"] == 0 and stats["output_records"] == 1, stats
    assert (out / "manifest.json").exists()
