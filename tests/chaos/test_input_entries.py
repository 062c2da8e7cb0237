"""Issue 33, points 6 and 7, and its dangling-symlink line: every kind of directory entry an input
folder can hold goes through one listing boundary (io/entries.py). A FIFO or a symlink to /dev/zero
hung the run forever (validate counted them as input files), a name that is not UTF-8 gave a
traceback from writing run.json and left an empty output folder, and a dangling symlink said "no
permission to read".

The kinds are generated: each maker below puts one entry of its kind beside a real document, and
every kind is checked both through `expand_paths` and through a real `ylink run`."""
from __future__ import annotations

import os
import shutil
import socket
import stat
from pathlib import Path

import pytest

from ylink_data.io.listing import expand_paths

from ..conftest import TEST_DATA
from .processes import ylink

JSONL = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # real Common Crawl documents (see tests/data/SOURCE.md)


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _socket(p: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()  # the socket file stays


def _block_device() -> str | None:
    for name in sorted(os.listdir("/dev")):
        if stat.S_ISBLK(os.stat(f"/dev/{name}").st_mode):
            return f"/dev/{name}"
    return None


# kind -> (make the entry at a path, what the listing does with it: "read", "skipped" or a phrase of
# the one-line refusal)
KINDS = {
    "regular file": (lambda p: shutil.copy(JSONL, p), "read"),
    "symlink to a file": (lambda p: p.symlink_to(JSONL), "read"),
    "folder": (lambda p: (p.mkdir(), shutil.copy(JSONL, p / "inner.jsonl.gz")), "read"),
    "symlink to a folder": (lambda p: p.symlink_to(JSONL.parent, target_is_directory=True), "skipped"),
    "FIFO": (_fifo, "skipped"),
    "socket": (_socket, "skipped"),
    "symlink to /dev/zero": (lambda p: p.symlink_to("/dev/zero"), "skipped"),
    "symlink to /dev/null": (lambda p: p.symlink_to("/dev/null"), "skipped"),
    "symlink to a block device": (lambda p: p.symlink_to(_block_device()), "skipped"),
    "dangling symlink": (lambda p: p.symlink_to(p.parent / "gone.jsonl.gz"), "which does not exist"),
    "symlink loop": (lambda p: p.symlink_to(p), "symlink loop"),
    "name that is not UTF-8": (None, "is not UTF-8"),
}


def _make(kind: str, root: Path) -> Path:
    root.mkdir()
    shutil.copy(JSONL, root / "good.jsonl.gz")
    make, _ = KINDS[kind]
    if make is None:  # a Latin-1 name, as an old archive unpacked on Linux gives
        odd = os.path.join(os.fsencode(root), b"caf\xe9.jsonl.gz")
        shutil.copy(JSONL, odd)
        return Path(os.fsdecode(odd))
    if kind == "symlink to a block device" and _block_device() is None:
        pytest.skip("no block device in /dev here")
    entry = root / "entry.jsonl.gz"
    make(entry)
    return entry


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_of_entry_is_read_skipped_or_refused_in_one_line(kind, tmp_path, caplog):
    root = tmp_path / "corpus"
    entry = _make(kind, root)
    expected = KINDS[kind][1]
    if expected in ("read", "skipped"):
        files = [f.url for f in expand_paths([str(root)], lambda _: {})]
        assert str(root / "good.jsonl.gz") in files
        assert (expected == "read") == any(f.startswith(str(entry)) for f in files), files
        if expected == "skipped":
            assert f"skipped {entry}: it is " in caplog.text
        return
    with pytest.raises(Exception) as refused:
        expand_paths([str(root)], lambda _: {})
    message = str(refused.value)
    assert type(refused.value).__name__ == "InputError" and expected in message and "\n" not in message
    assert "input.paths[0]" in message and "permission" not in message


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_run_over_a_folder_with_every_kind_of_entry_ends(kind, tmp_path):
    """The real command: reads the good file (and whatever else is a file), or refuses in one line
    before it writes anything. Bounded by the subprocess timeout: a FIFO hung it forever."""
    root = tmp_path / "corpus"
    _make(kind, root)
    out = tmp_path / "out"
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"name: entries\ninput: {{paths: ['{root}'], format: jsonl}}\noutput: {{path: '{out}'}}\n"
                        f"stages:\n  - normalize: {{}}\n")
    done = ylink("run", pipeline, timeout=240)
    expected = KINDS[kind][1]
    if expected in ("read", "skipped"):
        assert done.returncode == 0, done.stderr[-3000:]
        assert (out / "manifest.json").exists()
        if expected == "skipped":
            assert "skipped " in done.stderr
        return
    assert done.returncode != 0
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert not out.exists() or not any(out.iterdir())  # refused before the run wrote anything
