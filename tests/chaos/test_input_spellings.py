"""Issue 39 point 7: the same file under several spellings was read several times. `a.jsonl`,
`../e/a.jsonl` and `/abs//a.jsonl` gave 3 copies of every document, with different ids.

Now local names are normalised (no `.`, `..` or doubled slashes) and names of one file (a symlink, a
hard link: one device and inode) are one input, named by the first of its names in sorted order
(io/listing.py `_Names`), and the listing says in one line that it read such files once. The
spellings are generated: every way below of naming one file, in every pair and order, in input.paths
and in a path list."""
from __future__ import annotations

import gzip
import itertools
import logging
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.engine.runner import Runner
from ylink_data.io.listing import expand_paths

from ..conftest import TEST_DATA

JSONL = TEST_DATA / "cc_en_head-0174.jsonl.gz"  # real Common Crawl documents (see tests/data/SOURCE.md)


def _tree(root: Path) -> Path:
    """root/e/a.jsonl (the file), root/d (the working directory), a symlink and a hard link to the
    file, and a symlink to the folder e; returns the file."""
    (root / "e").mkdir(parents=True)
    (root / "d").mkdir()
    target = root / "e" / "a.jsonl"
    target.write_bytes(gzip.decompress(JSONL.read_bytes()))
    (root / "link.jsonl").symlink_to(target)
    os.link(target, root / "hard.jsonl")
    (root / "d" / "up").symlink_to(root / "e", target_is_directory=True)
    return target


def _spellings(root: Path) -> dict[str, str]:
    """Ways of naming root/e/a.jsonl from the working directory root/d."""
    a = str(root / "e" / "a.jsonl")
    return {
        "relative with ..": "../e/a.jsonl",
        "absolute": a,
        "doubled slash": a.replace("/e/", "//e/"),
        "dot folder": a.replace("/e/", "/e/./"),
        "down and up again": a.replace("/e/", "/d/../e/"),
        "file:// URL": f"file://{a}",
        "wildcard": "../e/*.jsonl",
        "its folder": "../e",
        "symlink": str(root / "link.jsonl"),
        "hard link": str(root / "hard.jsonl"),
        "through a folder symlink": "up/a.jsonl",
        "folder symlink then ..": "up/../e/a.jsonl",  # `up` leads to root/e: `..` is root, not root/d
    }


def test_every_spelling_of_one_file_is_read_once(tmp_path, monkeypatch, caplog):
    target = _tree(tmp_path)
    monkeypatch.chdir(tmp_path / "d")
    spellings = _spellings(tmp_path)
    alone = {name: expand_paths([p], lambda url: {}) for name, p in spellings.items()}
    assert all(len(files) == 1 for files in alone.values())
    for (one, p), (two, q) in itertools.permutations(spellings.items(), 2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ylink_data.io.listing"):
            files = expand_paths([p, q], lambda url: {})
        assert len(files) == 1, (one, two, files)
        assert files[0].url == min(alone[one][0].url, alone[two][0].url), (one, two)
        assert os.path.samefile(files[0].url, target)
        if alone[one][0].url != alone[two][0].url or p != q:
            said = [r.getMessage() for r in caplog.records if "named in more than one way" in r.getMessage()]
            assert len(said) == 1 and "read once" in said[0], (one, two, caplog.text)
    normalised = {name: files[0].url for name, files in alone.items()}
    assert normalised["relative with .."] == normalised["doubled slash"] == normalised["dot folder"] == str(target)
    assert normalised["folder symlink then .."] == str(target)  # not root/d/../e/a.jsonl's lexical root/e


def test_a_run_reads_a_file_named_three_ways_once(tmp_path, monkeypatch):
    """The issue's three spellings in input.paths, and again as lines of input.paths_from."""
    target = _tree(tmp_path)
    monkeypatch.chdir(tmp_path / "d")
    three = ["../e/a.jsonl", str(target).replace("/e/", "//e/"), str(target)]
    (tmp_path / "list.txt").write_text("\n".join(three) + "\n")

    def documents(out: str, **inp) -> list[tuple[str, str]]:
        ylink_data.run({"name": "s", "input": inp, "output": {"path": out}, "stages": [],
                        "ray": {"execution": "local"}}, progress=False)
        return sorted((r["id"], r["text"]) for f in sorted(Path(out, "data").glob("*.parquet"))
                      for r in pq.read_table(f, columns=["id", "text"]).to_pylist())

    once = documents(str(tmp_path / "once"), paths=[str(target)])
    assert documents(str(tmp_path / "three"), paths=three) == once
    assert documents(str(tmp_path / "listed"), paths_from=str(tmp_path / "list.txt")) == once
    plan = Runner(load_config({"name": "s", "input": {"paths": three}, "output": {"path": str(tmp_path / "p")},
                               "stages": []})).plan()
    assert plan.fingerprinted["input files"] == [[str(target), target.stat().st_size]]


@pytest.mark.parametrize("order", ["as written", "reversed"])
def test_the_name_kept_does_not_depend_on_the_order_of_input_paths(tmp_path, monkeypatch, order):
    target = _tree(tmp_path)
    monkeypatch.chdir(tmp_path / "d")
    names = [str(tmp_path / "link.jsonl"), str(tmp_path / "hard.jsonl"), str(target)]
    files = expand_paths(names if order == "as written" else names[::-1], lambda url: {})
    assert [f.url for f in files] == [str(target)]  # root/e/a.jsonl sorts before root/hard.jsonl, root/link.jsonl
