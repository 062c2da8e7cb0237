"""Incremental MinHash (`index` / `save_index`) over generated sequences of runs (issue 39 point 4).

A walk over every ordered pair of steps (a de Bruijn sequence over the steps) runs, in one folder,
after a first snapshot A that saves the index:
- `B`: a second snapshot (copies of A's documents, new ones and copies among them), deduped against
  the index and saved into it, rerun with --fresh each time the walk comes back to it;
- `B+`: the same input file with new documents appended, into the same output (--fresh);
- `B2`: the current input into another output folder;
- `kill`: B's run stopped abruptly inside its save, after each of its key files
  (YLINK_FAIL_AFTER_TASKS, a real process exit).
After every step: no document is removed as a copy of itself (`dup_of == id`); each removal is a
measured near copy (the exact Jaccard, recomputed here); a run's decisions equal those of the same
input deduped against A's index alone, however often it ran before; the index lists each path once,
every listed file matches its sha256, each run holds the files of one save, and a stopped save
leaves index.json as it was. Real text: the bundled Common Crawl documents, cut into passages.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys

import pytest
import yaml

import ylink_data
from ylink_data.engine.stats import check_invariant
from ylink_data.ops.minhash_dedup import INDEX_FILE, read_index_file
from ylink_data.text.dedup.minhash import shingles

from .conftest import REPO, TEST_DATA

STEPS = ("B", "B+", "B2", "kill")
THRESHOLD = 0.8


def de_bruijn_walk(k: int) -> list[int]:
    """A walk over 0..k-1 that holds every ordered pair (repeats too) as consecutive items."""
    seen, walk = set(), [0]
    while len(seen) < k * k:
        # the next item not yet after the current one, largest first (always completes for pairs)
        nxt = next(j for j in reversed(range(k)) if (walk[-1], j) not in seen)
        seen.add((walk[-1], nxt))
        walk.append(nxt)
    return walk


def _passages() -> list[str]:
    """Passages of 100 words of real Common Crawl documents (bundled), each unique."""
    with gzip.open(TEST_DATA / "cc_en_head-0174.jsonl.gz", "rt", encoding="utf-8") as f:
        words = [w for line in f for w in json.loads(line)["text"].split()]
    out = [" ".join(words[i:i + 100]) for i in range(0, len(words) - 100, 100)]
    assert len(set(out)) == len(out) >= 80
    return out


def _copy(text: str, rng: random.Random) -> str:
    """A near copy: two words deleted."""
    words = text.split()
    i = rng.randrange(len(words) - 2)
    return " ".join(words[:i] + words[i + 2:])


def _corpora() -> tuple[list[str], list[str], list[str]]:
    rng = random.Random(39)
    p = _passages()
    a = p[:30]
    b = [_copy(t, rng) for t in p[:8]] + p[30:55] + [_copy(t, rng) for t in p[30:34]]
    b_plus = b + p[55:70] + [_copy(t, rng) for t in p[8:12]]  # appended: B's documents keep their ids
    return a, b, b_plus


def _write(path, texts) -> None:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")


def _config(name: str, inp, out, **params) -> dict:
    return {"name": name, "input": {"paths": [str(inp)], "format": "jsonl", "split_bytes": 8_000},
            "output": {"path": str(out), "keep_rejected": True},
            "stages": [{"minhash_dedup": {"threshold": THRESHOLD, **params}}], "ray": {"execution": "local"}}


def _run(cfg: dict, capfd=None) -> str:
    _, stats = ylink_data.run(cfg, fresh=True, progress=False)
    assert check_invariant(stats) is None
    return cfg["output"]["path"]


def _jaccard(a: str, b: str) -> float:
    x, y = set(shingles(a)), set(shingles(b))
    return len(x & y) / len(x | y)


class World:
    """The folder a walk runs in, and every document text seen by id."""

    def __init__(self, root):
        self.root, self.idx, self.inp = root, root / "idx", root / "b.jsonl"
        self.text: dict[str, str] = {}

    def outcome(self, out: str) -> dict[str, str | None]:
        """Each input text -> the text it was removed as a copy of (None: kept), checking the evidence."""
        run = ylink_data.open_run(out)
        kept, rejected = run.to_arrow(), run.rejected()
        for table in (kept, rejected):
            self.text.update(zip(table.column("id").to_pylist(), table.column("text").to_pylist()))
        result = {t: None for t in kept.column("text").to_pylist()}
        if not rejected.num_rows:
            return result
        for i, t, dup, sim in zip(*(rejected.column(c).to_pylist() for c in ("id", "text", "dup_of", "dup_similarity"))):
            assert dup != i, f"{i} removed as a copy of itself"
            assert sim >= THRESHOLD and sim == pytest.approx(_jaccard(t, self.text[dup]))
            result[t] = self.text[dup]
        return result

    def check_index(self, completed_by: str | None = None) -> dict:
        """index.json: unique paths, each file matching its sha256, one save per run, documents counted;
        after a save by `completed_by` (a run folder) none of its files is left unlisted."""
        meta = json.loads((self.idx / INDEX_FILE).read_text())
        paths = [f["path"] for f in meta["files"]]
        assert len(paths) == len(set(paths)), paths
        import fsspec
        fs = fsspec.filesystem("file")
        for f in meta["files"]:
            read_index_file(fs, str(self.idx / f["path"]), f["sha256"], ["id"])
        saves: dict[str, set] = {}
        for f in meta["files"]:
            saves.setdefault(f.get("run"), set()).add(f["path"].split("-")[2])
        assert all(len(s) == 1 for s in saves.values()), saves
        assert meta["documents"] == sum(f["rows"] for f in meta["files"])
        if completed_by:
            stamps = {f["path"].split("-")[1] for f in meta["files"] if f.get("run") == completed_by}
            left = [p.name for p in self.idx.glob("*keys-*") if p.name not in paths and p.name.split("-")[1] in stamps]
            assert not left, left
        return meta


def _tasks_before_save(log: str) -> tuple[int, int]:
    """From a run's progress: the tasks completed before minhash_dedup's save step, and its tasks."""
    lines = log.replace("\r", "\n").splitlines()
    totals: dict[str, int] = {}
    for line in lines:
        m = re.match(r"\s*(.+?): (\d+)/(\d+) tasks", line)
        if m:
            totals[m.group(1)] = int(m.group(3))
    names = list(totals)
    save = names.index("minhash_dedup: save index")
    return sum(totals[n] for n in names[:save]), totals[names[save]]


def _ylink_killed(cfg: dict, path, fail_after: int) -> subprocess.CompletedProcess:
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "YLINK_FAIL_AFTER_TASKS": str(fail_after), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", "run", str(path), "--fresh", "--no-progress"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_walk_of_index_runs_keeps_every_invariant(tmp_path, capfd):
    a, b, b_plus = _corpora()
    variants = {"B": b, "B+": b_plus}
    # The reference: each input deduped against A's index alone, in a folder of its own.
    ref = tmp_path / "reference"
    ref.mkdir()
    _write(ref / "a.jsonl", a)
    ref_world = World(ref)
    ref_world.outcome(_run(_config("a", ref / "a.jsonl", ref / "a", save_index=str(ref / "idx"))))
    world = World(tmp_path / "walk")
    reference = {}
    for name, texts in variants.items():
        _write(ref / "b.jsonl", texts)
        reference[name] = ref_world.outcome(_run(_config("b", ref / "b.jsonl", ref / name, index=str(ref / "idx"))))
    copies_of_a = sum(1 for t, d in reference["B"].items() if d in a)
    assert copies_of_a >= 6 and sum(d is not None for d in reference["B"].values()) > copies_of_a  # both kinds

    root = world.root
    root.mkdir()
    _write(root / "a.jsonl", a)
    world.outcome(_run(_config("a", root / "a.jsonl", root / "a", save_index=str(world.idx))))
    world.check_index(str(root / "a"))
    walk = [STEPS[i] for i in de_bruijn_walk(len(STEPS))]
    assert len(walk) == len(STEPS) ** 2 + 1
    variant = "B"
    for step in walk:
        if step in variants:
            variant = step
            _write(world.inp, variants[variant])
        out = root / ("b2" if step == "B2" else "b")
        cfg = _config("b", world.inp, out, index=str(world.idx), save_index=str(world.idx))
        if step != "kill":
            assert world.outcome(_run(cfg)) == reference[variant], (step, variant)
            world.check_index(str(out))
            continue
        # Stopped after each key file of the save, before index.json: the index is as it was.
        capfd.readouterr()
        _run({**cfg, "stages": [{"minhash_dedup": {**cfg["stages"][0]["minhash_dedup"],
                                                   "save_index": str(root / "probe-idx")}}]}, capfd)
        before, saves = _tasks_before_save(capfd.readouterr().err)
        assert saves >= 2  # several key files
        committed = (world.idx / INDEX_FILE).read_bytes()
        for j in sorted({1, saves}):  # after its first key file, after its last
            killed = _ylink_killed(cfg, root / "killed.yaml", before + j)
            assert killed.returncode == 75, killed.stderr
            assert (world.idx / INDEX_FILE).read_bytes() == committed
            assert len(list(world.idx.glob("*keys-*"))) > len(world.check_index()["files"])  # its files, unlisted


def test_bucket_edges_never_pair_a_document_with_its_own_id():
    """Generated buckets where earlier runs' rows (node < 0) may carry the id of a document of this run
    (0 to 2 entries of it): every pair joins two ids, its f ranks before its m, and each document is
    paired, in each of its buckets, with the best-ranked row of another id ranking before it (brute force)."""
    import numpy as np

    from ylink_data.text.dedup.verified import bucket_edges, rank_order

    rng = np.random.default_rng(39)
    for _ in range(300):
        n_run, n_index = int(rng.integers(1, 8)), int(rng.integers(0, 6))
        run_ident = rng.choice(2**40, n_run, replace=False).astype(np.uint64)
        # an index row is another document's, or an earlier entry of one of this run's documents
        index_ident = np.where(rng.random(n_index) < 0.5, rng.choice(run_ident, n_index),
                               rng.choice(2**40, n_index).astype(np.uint64) + np.uint64(2**41))
        node = np.r_[np.arange(n_run), -1 - np.arange(n_index)].astype(np.int64)
        ident = np.r_[run_ident, index_ident].astype(np.uint64)
        priority = np.r_[rng.integers(0, 3, n_run).astype(float), np.zeros(n_index)]
        rows = [(k, i) for k in range(int(rng.integers(1, 4))) for i in range(node.size) if rng.random() < 0.7]
        if not rows:
            continue
        key = np.array([k for k, _ in rows], np.uint64)
        at = np.array([i for _, i in rows])
        m, f, _, _ = bucket_edges(key, node[at], priority[at], ident[at])
        rank = np.empty(node.size, np.int64)
        rank[rank_order(node, priority)] = np.arange(node.size)
        index_of = {int(v): i for i, v in enumerate(node)}
        expected = set()
        for k in set(key.tolist()):
            members = sorted(at[key == k], key=lambda i: rank[i])
            for i in members:
                if node[i] < 0:
                    continue
                other = [j for j in members if ident[j] != ident[i]]
                if other and rank[other[0]] < rank[i]:
                    expected.add((int(node[i]), int(node[other[0]])))
        got = set(zip(m.tolist(), f.tolist()))
        assert got == expected
        assert all(ident[index_of[a]] != ident[index_of[b]] and rank[index_of[b]] < rank[index_of[a]] for a, b in got)
