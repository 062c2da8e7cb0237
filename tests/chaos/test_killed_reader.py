"""Issue 33, point 4: a document reader child killed from outside in the middle of a file (as the
OOM killer does for another process's sake) was blamed on the file: quarantined for good as damaged,
and the run published as complete. Now the file goes to a new child once more; only a file that
kills that one too is quarantined, saying so. Generated over the signals a child dies of and how
many times it dies; the real child is held on the file (YLINK_TEST_HOLD_CHILD) and killed by PID."""
from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from ylink_data.core.deadline import HOLD_ENV
from ylink_data.io.readers.base import Record
from ylink_data.io.readers.isolated import reader_process

from ..conftest import REPO
from .processes import YLINK, _env, wait_for, wait_until
from .test_hostile_documents import DOCS, HANG_GUARD_S, read

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


# ----------------------------------------------------------------------------- issue 39, point 16
# A reader child killed between two files (the OOM killer) crashed the next read with BrokenPipeError
# from DeadlineProcess.close(): the next read's request went to a child that had died after the parent
# last saw it alive, the write failed with the request still buffered, and closing the dead child's
# stdin flushed it again. Generated over when the child dies: between files (the test waits until it
# is a zombie), and inside the next request's write (the child stopped, its pipe filled, the parent
# blocked writing to it: then killed, as the OOM killer does, never a signal a stopped child holds
# back). Each is a state the test waits for, never a time.

MARKDOWN = DOCS / "poetry-faq.md"  # 7 KB: one request is buffered whole, then flushed at once
MOMENTS = [("between files", sig) for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV)] + [
    ("inside the next request", signal.SIGKILL)]
WRITE_SYSCALL = {"x86_64": "1", "aarch64": "64"}  # /proc/.../syscall names the call by number


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _blocked_writing(tid: int) -> bool:
    """Whether this process's thread `tid` waits inside write(2) on a full pipe."""
    with open(f"/proc/self/task/{tid}/wchan") as f:
        if "pipe_write" in f.read():
            return True
    with open(f"/proc/self/task/{tid}/syscall") as f:  # where the kernel does not name wait channels
        return f.read().split()[0] == WRITE_SYSCALL.get(platform.machine())


def _fill_the_pipe_to(pid: int) -> None:
    """Fill the pipe the child reads its requests from (a second writer opened on it, then closed)."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_WRONLY | os.O_NONBLOCK)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("moment,sig", MOMENTS, ids=[f"{m}-{signal.Signals(s).name}" for m, s in MOMENTS])
def test_a_reader_killed_before_the_next_file_reads_it_in_a_new_child(moment, sig):
    reader_process().close()
    (first,) = read(MARKDOWN)
    assert isinstance(first, Record)
    pid = reader_process().pid
    if moment == "between files":
        os.kill(pid, sig)
        wait_for(lambda: _state(pid) == "Z", "the killed child to be a zombie")
        (item,) = read(MARKDOWN)
    else:
        os.kill(pid, signal.SIGSTOP)
        _fill_the_pipe_to(pid)
        done: dict = {}

        def next_file() -> None:
            done["tid"] = threading.get_native_id()
            try:
                done["items"] = read(MARKDOWN)
            except BaseException as exc:  # noqa: BLE001 - the test reports what the read raised
                done["raised"] = exc

        thread = threading.Thread(target=next_file, daemon=True)
        thread.start()
        wait_for(lambda: "tid" in done and _blocked_writing(done["tid"]), "the read to block writing its request")
        os.kill(pid, sig)
        thread.join(timeout=HANG_GUARD_S)
        assert "raised" not in done, f"the next read raised {done['raised']!r}"
        (item,) = done["items"]
    assert isinstance(item, Record) and item.text == first.text, item
    assert reader_process().pid != pid  # read by a new child
