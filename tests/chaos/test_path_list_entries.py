"""Issue 39 point 11: `input.paths_from` itself as a FIFO hung `run` and `validate` (opening it waits
for a writer), and as /dev/zero it grew without bound (a line that never ends). The list is now
checked as input files are (io/entries.py) and its lines and size are bounded (io/path_list.py).

Generated: every kind of directory entry of tests/chaos/test_input_entries.py named as the list,
through `ylink validate` and `ylink run` (bounded by the subprocess timeout: a hang fails), and every
way its content can be unbounded or not text, each a one-line error naming the list (and the line)."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from ylink_data.core.errors import InputError
from ylink_data.engine.config import load_config
from ylink_data.engine.runner import Runner
from ylink_data.io.path_list import MAX_LINE_BYTES, MAX_LIST_BYTES

from ..conftest import TEST_DATA
from .processes import ylink
from .test_input_entries import KINDS

JSONL = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # real Common Crawl documents (see tests/data/SOURCE.md)


def _list_at(kind: str, root: Path) -> tuple[Path, str]:
    """The path list made as an entry of `kind`, and what naming it does: "read", or a phrase of the
    one-line refusal. A list is read when it is a file of paths (a regular file or a link to one);
    every other kind holds no list, and is refused rather than skipped (it is the only list)."""
    root.mkdir()
    good = root / "paths.txt"
    good.write_text(f"{JSONL}\n")
    make, listed = KINDS[kind]
    if kind == "regular file":
        return good, "read"
    if kind == "symlink to a file":
        (root / "link.txt").symlink_to(good)
        return root / "link.txt", "read"
    if make is None:  # a Latin-1 name
        odd = os.path.join(os.fsencode(root), b"caf\xe9.txt")
        Path(os.fsdecode(odd)).write_text(f"{JSONL}\n")
        return Path(os.fsdecode(odd)), listed
    entry = root / "entry.txt"
    if kind == "symlink to a block device" and not any(Path("/dev", n).is_block_device() for n in os.listdir("/dev")):
        pytest.skip("no block device in /dev here")
    make(entry)
    return entry, listed if listed not in ("read", "skipped") else "not a file listing paths"  # a folder too


def _pipeline(tmp_path: Path) -> Path:
    """The pipeline; the list is named with --set, as a name that is not UTF-8 can only be (YAML is UTF-8)."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"name: lists\ninput: {{paths_from: set-below}}\noutput: {{path: '{tmp_path / 'out'}'}}\n"
                        "stages:\n  - normalize: {}\n")
    return pipeline


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_of_entry_as_the_path_list(kind, tmp_path):
    listed, expected = _list_at(kind, tmp_path / "lists")
    pipeline = _pipeline(tmp_path)
    for command in ("validate", "run"):
        done = ylink(command, pipeline, "--set", f"input.paths_from={listed}", timeout=240)
        if expected == "read":
            assert done.returncode == 0, done.stderr[-3000:]
            continue
        assert done.returncode == 2, (command, done.stderr[-3000:])
        errors = [line for line in done.stderr.splitlines() if line.startswith("ylink: error:")]
        assert len(errors) == 1 and expected in errors[0] and "input.paths_from" in errors[0], (command, done.stderr)
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    if expected == "read":
        assert (tmp_path / "out" / "manifest.json").exists()


def _long_line(path: Path) -> int:
    path.write_bytes(b"x" * (MAX_LINE_BYTES + 1))
    return 1


def _zeros(path: Path) -> int:
    path.write_bytes(b"\0" * (2 * MAX_LINE_BYTES))
    return 1


def _long_line_after_good_ones(path: Path) -> int:
    path.write_bytes(f"{JSONL}\n# a comment\n".encode() + b"y" * (3 * MAX_LINE_BYTES) + b"\n")
    return 3


def _gzip_of_a_long_line(path: Path) -> int:
    path.write_bytes(gzip.compress(b"z" * (4 * MAX_LINE_BYTES)))
    return 1


def _too_many_paths(path: Path) -> int:
    """A gzip list that unpacks past MAX_LIST_BYTES (comment lines: nothing to look up on the way)."""
    line = b"#" + b"c" * (MAX_LINE_BYTES - 2) + b"\n"
    count = MAX_LIST_BYTES // len(line) + 2
    with gzip.open(path, "wb", compresslevel=1) as f:
        for _ in range(count):
            f.write(line)
    return MAX_LIST_BYTES // len(line) + 1


def _not_text(path: Path) -> int:
    path.write_bytes(f"{JSONL}\n".encode() + b"caf\xe9.jsonl\n")
    return 2


CONTENTS = {  # name -> (writes the list at a path and returns the line the error names, phrase of the error)
    "one line longer than the bound": (_long_line, "txt", "is longer than"),
    "zeros, no newline": (_zeros, "txt", "is longer than"),
    "a long line after good ones": (_long_line_after_good_ones, "txt", "is longer than"),
    "gzip of a long line": (_gzip_of_a_long_line, "txt.gz", "is longer than"),
    "a gzip list past the size bound": (_too_many_paths, "txt.gz", "MiB of paths"),
    "a line that is not UTF-8": (_not_text, "txt", "is not UTF-8 text"),
}


@pytest.mark.parametrize("name", list(CONTENTS))
def test_every_unbounded_or_binary_list_is_one_line(name, tmp_path):
    write, suffix, phrase = CONTENTS[name]
    listed = tmp_path / f"paths.{suffix}"
    line = write(listed)
    cfg = load_config({"name": "lists", "input": {"paths_from": str(listed)}, "output": {"path": str(tmp_path / "o")},
                       "stages": []})
    with pytest.raises(InputError) as err:
        Runner(cfg).plan()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"input.paths_from: {listed}") and phrase in message, message
    assert f"line {line} " in message or f"at line {line})" in message, message
