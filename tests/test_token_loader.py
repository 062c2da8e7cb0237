"""TokenLoader and TokenDataset: fixed-length windows of a run's Megatron token files, every token once
per epoch over ranks x workers, in the documented order, resumable exactly and elastically, with
document boundaries, through the node-local cache from local disk and from S3.

Data: a real token run (`tokenruns.write_token_run`): bundled crawl documents tokenized by a real BPE,
written as .bin/.idx pairs by ylink's writer. Every expectation is computed here independently: the
documents' tokens straight from the tokenizer (`Tokenizer.encode(text).ids` + the end-of-document id),
the stream cut by hand, the order from the documented recipe (test_loader.reference_order)."""
from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ylink_data.cache.download import DownloadError
from ylink_data.cache.order import Partition
from ylink_data.cache.position import merge_states
from ylink_data.cache.tokens import TokenLoader
from ylink_data.core.errors import InputError
from ylink_data.text.tokens.load import load_tokenizer

from .conftest import REPO
from .s3server import s3_server
from .shardruns import crawl_documents
from .test_loader import reference_order, round_robin
from .tokenruns import crawl_tokenizer, write_token_run

pytestmark = [pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
              pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")]

DOCS_PER_PAIR = [5, 7, 0, 1, 9, 3]   # one pair without documents, one with a single document
SEQ = 64
# Small blocks and windows so that ~470 windows make many blocks and several shuffle windows.
SHAPE = dict(seq_len=SEQ, block_windows=16, window_blocks=4)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tokens") / "run"
    write_token_run(root, DOCS_PER_PAIR)
    return root


@pytest.fixture(scope="module")
def pair_docs(run) -> list[list[np.ndarray]]:
    """Each pair's documents' tokens, from the tokenizer itself (not from the files)."""
    tok = load_tokenizer(str(crawl_tokenizer(run.parent / "tokenizer")))
    texts, out, at = crawl_documents(), [], 0
    for n in DOCS_PER_PAIR:
        out.append([np.array(tok.tokenizer.encode(t).ids + [tok.eod_id], np.int64) for t in texts[at:at + n]])
        at += n
    return out


def file_order(n: int, seed: int, epoch: int, shuffle: bool = True) -> list[int]:
    """The documented order of the pairs: EpochOrder's shard permutation, the (seed, epoch, 0) stream."""
    if not shuffle:
        return list(range(n))
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch, 0])))
    return [int(i) for i in gen.permutation(n)]


def window_order(pair_docs, seed: int, epoch: int, seq: int = SEQ, labels: bool = False) -> list[int]:
    """The documented order of the windows (by number k: stream tokens k*seq...): the pairs are the
    shards of test_loader.reference_order, the windows starting in a pair its rows."""
    tokens = [sum(len(d) for d in docs) for docs in pair_docs]
    total = sum(tokens)
    n = (total - labels) // seq
    begin, at = {}, 0
    for p in file_order(len(pair_docs), seed, epoch):
        begin[p], at = at, at + tokens[p]
    # windows whose first token lies in pair p, by brute force over all windows
    home = [[k for k in range(n) if begin[p] <= k * seq < begin[p] + tokens[p]] for p in range(len(pair_docs))]
    rows = [len(h) for h in home]
    offset = np.concatenate([[0], np.cumsum(rows)])
    out = []
    for i in reference_order(rows, seed=seed, epoch=epoch, block_rows=16, window_blocks=4):
        p = int(np.searchsorted(offset, i, side="right")) - 1
        out.append(home[p][i - offset[p]])
    assert sorted(out) == list(range(n))
    return out


def stream(pair_docs, seed: int, epoch: int, shuffle: bool = True) -> tuple[np.ndarray, list[int]]:
    """The epoch's token stream and its document end offsets, built by hand."""
    docs = [d for p in file_order(len(pair_docs), seed, epoch, shuffle) for d in pair_docs[p]]
    return np.concatenate(docs), list(np.cumsum([len(d) for d in docs]))


def expected_windows(pair_docs, seed=0, epoch=0, labels=False, shuffle=True) -> list[tuple]:
    """Every window of the epoch, in stream order: cut every SEQ tokens, SEQ (+1) long."""
    tokens, _ = stream(pair_docs, seed, epoch, shuffle)
    n = (len(tokens) - labels) // SEQ
    return [tuple(tokens[k * SEQ:k * SEQ + SEQ + labels]) for k in range(n)]


def rows(batches) -> list[tuple]:
    return [tuple(r) for b in batches for r in b["input_ids"]]


def test_partition_batches_are_its_batch_for_every_step():
    """The vectorised `Partition.batches` the loader iterates equals `batch` step by step."""
    for n, start, world, size, workers in itertools.product([0, 1, 7, 100, 1001], [0, 3], [1, 2, 3], [1, 4, 16],
                                                            [1, 3]):
        if start > n:
            continue
        p = Partition(n, start, world, size, workers)
        for rank, worker, first in itertools.product(range(world), range(workers), (0, 1, 5)):
            steps = p.worker_steps(worker, first)
            assert p.batches(rank, steps) == [p.batch(rank, j) for j in steps]


def test_the_files_hold_the_tokenizers_documents(run, pair_docs):
    """The fixture's premise: each .bin is its documents' tokens end to end."""
    manifest = json.loads((run / "manifest.json").read_text())
    for entry, docs in zip(manifest["megatron"]["files"], pair_docs):
        data = np.fromfile(run / entry["bin"]["path"], dtype="<u2")
        assert data.tolist() == (np.concatenate(docs).tolist() if docs else [])


@pytest.mark.parametrize("world_size,workers", [(1, 1), (2, 2), (3, 1), (4, 3)])
def test_every_window_once_over_ranks_and_workers(run, pair_docs, world_size, workers):
    got, per_rank = [], []
    for rank in range(world_size):
        loaders = [TokenLoader(str(run), rank=rank, world_size=world_size, num_workers=workers, worker=w,
                               seed=5, batch_size=7, **SHAPE) for w in range(workers)]
        batches = list(round_robin(loaders))
        per_rank.append(len(batches))
        got += rows(batches)
    expected = expected_windows(pair_docs, seed=5)
    assert len(got) == len(expected) and Counter(got) == Counter(expected)
    assert len(set(per_rank)) == 1, "every rank yields the same number of batches"
    # Every token of the stream is an input once, except fewer than SEQ at its end.
    tokens, _ = stream(pair_docs, 5, 0)
    assert 0 <= len(tokens) - len(expected) * SEQ < SEQ


def test_rank_stream_is_the_documented_order(run, pair_docs):
    loader = TokenLoader(str(run), seed=2, epoch=1, batch_size=5, **SHAPE)
    windows = expected_windows(pair_docs, seed=2, epoch=1)
    assert rows(loader) == [windows[k] for k in window_order(pair_docs, 2, 1)]
    assert len(loader.epoch_files()[0]) == len(DOCS_PER_PAIR) - 1, "the pair without tokens holds no window"


def test_unshuffled_reads_the_stream_in_order_and_dtype(run, pair_docs):
    loader = TokenLoader(str(run), shuffle=False, batch_size=10, dtype=None, **SHAPE)
    batches = list(loader)
    assert batches[0]["input_ids"].dtype == np.uint16 and batches[0]["input_ids"].shape == (10, SEQ)
    assert rows(batches) == expected_windows(pair_docs, shuffle=False)


def test_order_is_a_function_of_seed_and_epoch(run):
    first = rows(TokenLoader(str(run), seed=4, epoch=2, batch_size=6, **SHAPE))
    assert rows(TokenLoader(str(run), seed=4, epoch=2, batch_size=6, **SHAPE)) == first
    code = ("import json, sys; from ylink_data.cache.tokens import TokenLoader; "
            f"L = TokenLoader(sys.argv[1], seed=4, epoch=2, batch_size=6, **{SHAPE!r}); "
            "print(json.dumps([r.tolist() for b in L for r in b['input_ids']]))")
    out = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"}, check=True)
    assert [tuple(r) for r in json.loads(out.stdout)] == first
    other_epoch = rows(TokenLoader(str(run), seed=4, epoch=3, batch_size=6, **SHAPE))
    other_seed = rows(TokenLoader(str(run), seed=5, epoch=2, batch_size=6, **SHAPE))
    assert other_epoch != first and other_seed != first
    # Another epoch concatenates the files in another order, so it cuts other windows.
    assert set(other_epoch) != set(first)


def test_resume_equals_uninterrupted_also_twice(run):
    kw = dict(world_size=2, seed=3, epoch=1, batch_size=6, **SHAPE)
    for rank in range(2):
        full = rows(TokenLoader(str(run), rank=rank, **kw))
        first = TokenLoader(str(run), rank=rank, **kw)
        got = rows(itertools.islice(iter(first), 7))
        second = TokenLoader(str(run), rank=rank, **kw)
        second.load_state_dict(json.loads(json.dumps(first.state_dict())))  # states survive JSON
        got += rows(itertools.islice(iter(second), 11))
        third = TokenLoader(str(run), rank=rank, **kw)
        third.load_state_dict(second.state_dict())
        got += rows(third)
        assert got == full
        assert third.state_dict()["consumed"] == third.num_windows
        assert rows(third) == []


def test_elastic_resume_2x2_then_3x1_then_1x3_reads_each_window_once(run, pair_docs):
    common = dict(seed=8, **SHAPE)
    seen, state = [], None
    for rank in range(2):
        workers = [TokenLoader(str(run), rank=rank, world_size=2, num_workers=2, worker=w, batch_size=5, **common)
                   for w in range(2)]
        seen += rows(itertools.islice(round_robin(workers), 9))
        merged = merge_states([x.state_dict() for x in workers])
        assert state is None or merged == state  # every rank's consumer stands at the same position
        state = merged
    assert state["consumed"] == 9 * 2 * 5 and state["partition"] is None

    after = []
    for rank in range(3):
        loader = TokenLoader(str(run), rank=rank, world_size=3, batch_size=4, **common)
        loader.load_state_dict(state)
        seen += rows(itertools.islice(iter(loader), 6))
        after.append(loader.state_dict())
    assert after[0]["consumed"] == after[1]["consumed"] == after[2]["consumed"] == 90 + 6 * 3 * 4

    workers = [TokenLoader(str(run), num_workers=3, worker=w, batch_size=11, **common) for w in range(3)]
    for x in workers:
        x.load_state_dict(after[0])  # a single-worker state seeds any shape
    seen += rows(round_robin(workers))
    expected = expected_windows(pair_docs, seed=8)
    assert len(seen) == len(expected) and Counter(seen) == Counter(expected)


def test_labels_windows_overlap_by_one_token(run, pair_docs):
    loader = TokenLoader(str(run), labels=True, shuffle=False, batch_size=8, **SHAPE)
    got = rows(loader)
    tokens, _ = stream(pair_docs, 0, 0, shuffle=False)
    assert len(got[0]) == SEQ + 1 and len(got) == (len(tokens) - 1) // SEQ
    assert all(a[-1] == b[0] for a, b in zip(got, got[1:]))
    assert [t for w in got for t in w[:SEQ]] == tokens[:len(got) * SEQ].tolist()
    shuffled = rows(TokenLoader(str(run), labels=True, seed=1, batch_size=8, **SHAPE))
    assert Counter(shuffled) == Counter(expected_windows(pair_docs, seed=1, labels=True))


@pytest.mark.parametrize("labels,seq", [(False, SEQ), (True, SEQ), (False, 1500)])
def test_boundaries_are_the_documents_edges(run, pair_docs, labels, seq):
    """Short windows (most inside one document) and long ones (1,500 tokens: crossing documents
    and running into the next file past a whole document of it)."""
    tok = load_tokenizer(str(crawl_tokenizer(run.parent / "tokenizer")))
    seed = 6
    loader = TokenLoader(str(run), boundaries=True, labels=labels, seed=seed, batch_size=5,
                         **{**SHAPE, "seq_len": seq})
    tokens, ends = stream(pair_docs, seed, 0)
    n = (len(tokens) - labels) // seq
    ids = window_order(pair_docs, seed, 0, seq, labels)
    at = 0
    for batch in loader:
        count = len(batch["input_ids"])
        expected_cu, expected_pos = [0], []
        for b, k in enumerate(ids[at:at + count]):
            start = k * seq
            assert tuple(batch["input_ids"][b]) == tuple(tokens[start:start + seq + labels])
            inner = [e - start for e in ends if start < e < start + seq]
            expected_cu += [b * seq + e for e in inner] + [(b + 1) * seq]
            pos, last = [], 0
            for t in range(seq):
                if t in inner:
                    last = t
                pos.append(t - last)
            expected_pos.append(pos)
            # A document ends with its end-of-document token.
            assert all(batch["input_ids"][b][e - 1] == tok.eod_id for e in inner)
        assert batch["cu_seqlens"].dtype == np.int32 and batch["cu_seqlens"].tolist() == expected_cu
        assert batch["position_ids"].tolist() == expected_pos
        at += count
    assert at == n


def test_through_the_cache_reads_the_same_and_downloads_each_file_once(run, tmp_path):
    kw = dict(seed=1, batch_size=9, boundaries=True, **SHAPE)
    plain = list(TokenLoader(str(run), **kw))
    cache = tmp_path / "cache"
    for _ in range(2):  # the second reads the warm cache
        cached = list(TokenLoader(str(run), cache_dir=str(cache), **kw))
        assert len(cached) == len(plain)
        for a, b in zip(plain, cached):
            assert all(np.array_equal(a[k], b[k]) for k in a)
    downloads = [json.loads(line)["url"] for line in (cache / "downloads.log").read_text().splitlines()]
    manifest = json.loads((run / "manifest.json").read_text())
    files = [f[k]["path"] for f in manifest["megatron"]["files"] if f["tokens"] for k in ("bin", "idx")]
    assert sorted(Path(u).name for u in downloads) == sorted(Path(p).name for p in files)


def test_a_run_on_s3_reads_the_same_with_and_without_the_cache(run, tmp_path):
    kw = dict(seed=2, batch_size=8, labels=True, boundaries=True, **SHAPE)
    local = list(TokenLoader(str(run), **kw))
    with s3_server(tmp_path / "s3") as server:
        server.upload_folder(run, "runs/tokens")
        options = server.storage_options()
        for cache_dir in (str(tmp_path / "cache"), None):
            remote = list(TokenLoader("s3://runs/tokens", cache_dir=cache_dir, storage_options=options, **kw))
            assert len(remote) == len(local)
            for a, b in zip(local, remote):
                assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("cached", [False, True], ids=["in-place", "cache"])
def test_a_corrupted_bin_is_refused_naming_it(run, tmp_path, cached):
    bad = tmp_path / "run"
    shutil.copytree(run, bad)
    target = bad / "megatron" / "part-00001.bin"
    data = bytearray(target.read_bytes())
    data[100] ^= 0x01  # same size, one bit flipped
    target.write_bytes(bytes(data))
    loader = TokenLoader(str(bad), shuffle=False, batch_size=4, cache_dir=str(tmp_path / "c") if cached else None,
                         **SHAPE)
    with pytest.raises(DownloadError, match=r"part-00001\.bin.*sha256"):
        list(loader)


def test_a_run_without_megatron_files_says_how_to_make_them(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"version": 1, "shards": []}))
    with pytest.raises(InputError, match=r"no Megatron token files.*output\.megatron.*ylink export megatron") as info:
        TokenLoader(str(tmp_path), seq_len=8)
    assert "\n" not in str(info.value)


def test_a_state_of_another_shape_or_kind_is_refused(run):
    state = TokenLoader(str(run), seed=1, **SHAPE).state_dict()
    with pytest.raises(ValueError, match="seq_len"):
        TokenLoader(str(run), seed=1, **{**SHAPE, "seq_len": 32}).load_state_dict(state)
    with pytest.raises(ValueError, match="labels"):
        TokenLoader(str(run), seed=1, labels=True, **SHAPE).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        TokenLoader(str(run), seed=2, **SHAPE).load_state_dict(state)
    from ylink_data.cache.loader import ShardLoader
    documents = ShardLoader(str(run))  # the token run has no Parquet shards: an empty document loader
    with pytest.raises(ValueError, match="not a TokenLoader's"):
        TokenLoader(str(run), seed=1, **SHAPE).load_state_dict(documents.state_dict())
    with pytest.raises(ValueError, match="not a ShardLoader's"):
        documents.load_state_dict(state)


# -- PyTorch ------------------------------------------------------------------------------------

def test_dataloader_workers_deliver_the_rank_sequence(run):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from ylink_data.torch import TokenDataset

    kw = dict(rank=1, world_size=2, seed=3, batch_size=6, **SHAPE)
    expected = rows(TokenLoader(str(run), **kw))
    got = list(DataLoader(TokenDataset(str(run), **kw), batch_size=None, num_workers=3))
    assert got[0]["input_ids"].dtype == torch.int64
    assert [tuple(r.tolist()) for b in got for r in b["input_ids"]] == expected


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resume_equals_uninterrupted(run, workers):
    pytest.importorskip("torch")
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from ylink_data.torch import TokenDataset

    kw = dict(rank=0, world_size=2, seed=3, batch_size=6, boundaries=True, **SHAPE)
    make = lambda: stateful.StatefulDataLoader(TokenDataset(str(run), **kw), batch_size=None,  # noqa: E731
                                               num_workers=workers)
    key = lambda b: (b["input_ids"].tolist(), b["cu_seqlens"].tolist(), b["position_ids"].tolist())  # noqa: E731
    full = [key(b) for b in make()]
    got, state = [], None
    for n in (5, 9, None):
        loader = make()
        if state is not None:
            loader.load_state_dict(state)
        for i, batch in enumerate(loader):
            got.append(key(batch))
            if n is not None and i + 1 == n:
                break
        state = loader.state_dict()
    assert got == full


def test_stateful_dataloader_state_resumes_elastically(run, pair_docs):
    pytest.importorskip("torch")
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from ylink_data.torch import TokenDataset, position

    seen, state = [], None
    for rank in range(2):
        loader = stateful.StatefulDataLoader(TokenDataset(str(run), rank=rank, world_size=2, batch_size=5, seed=4,
                                                          **SHAPE), batch_size=None, num_workers=2)
        seen += [tuple(r.tolist()) for b in itertools.islice(loader, 8) for r in b["input_ids"]]
        state = loader.state_dict()
    pos = position(state)
    assert pos["consumed"] == 8 * 2 * 5 and pos["partition"] is None
    for rank in range(3):
        ds = TokenDataset(str(run), rank=rank, world_size=3, batch_size=7, seed=4, **SHAPE)
        ds.load_state_dict(pos)
        seen += [tuple(r.tolist()) for b in stateful.StatefulDataLoader(ds, batch_size=None, num_workers=3)
                 for r in b["input_ids"]]
    expected = expected_windows(pair_docs, seed=4)
    assert len(seen) == len(expected) and Counter(seen) == Counter(expected)


def test_cache_warm_pulls_the_megatron_files_so_a_loader_downloads_nothing(run, tmp_path):
    cache = tmp_path / "cache"
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", "cache", "warm", str(run), "--cache-dir",
                           str(cache), "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    files = [f[k] for f in manifest["megatron"]["files"] for k in ("bin", "idx")]
    assert f"0 shards and {len(files)} Megatron files, {sum(f['bytes'] for f in files):,} bytes" in proc.stdout
    log = cache / "downloads.log"
    before = log.read_text()
    assert len(before.splitlines()) == len(files)
    list(TokenLoader(str(run), cache_dir=str(cache), boundaries=True, batch_size=16, **SHAPE))
    assert log.read_text() == before, "the warm cache served every file"
