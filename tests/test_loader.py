"""ShardLoader and TextDataset: each document exactly once per epoch over ranks x workers, equal batch
counts per rank, order a pure function of (manifest, seed, epoch), and mid-epoch resume equal to the
uninterrupted sequence (also twice, also with another world size). Data: Reuters-21578 (shared data)
written as uneven Parquet shards with a manifest, and a real run of the pipeline over the bundled crawl."""
from __future__ import annotations

import gzip
import itertools
import json
import math
import subprocess
import sys
from collections import Counter

import fsspec
import numpy as np
import pyarrow as pa
import pytest

import ylink_data
from ylink_data.cache.loader import ShardLoader, merge_states
from ylink_data.cache.order import EpochOrder, Partition, rng
from ylink_data.io.parquet import ParquetFileWriter

from .conftest import REPO, SHARED_DATA, quickstart_config
from .httpserver import FileServer
from .shardruns import write_run

REUTERS = SHARED_DATA / "en_reuters21578_nltk" / "reuters21578_apte.jsonl.gz"
pytestmark = [pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
              pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")]

# Small blocks and windows so that a 10788-document run has many blocks and several windows.
SHAPE = dict(block_rows=256, window_blocks=8, columns=["id"])


@pytest.fixture(scope="module")
def reuters_run(tmp_path_factory) -> str:
    """Reuters-21578 as 8 shards of uneven sizes (one of 1 row, one empty), each written in 999-row
    pieces so row groups do not line up with blocks; manifest as a run writes it."""
    if not REUTERS.is_file():
        pytest.skip(f"research-only data not found at {REUTERS} (CI always has ../shared/data)")
    out = tmp_path_factory.mktemp("reuters")
    docs = [json.loads(line) for line in gzip.open(REUTERS, "rt", encoding="utf-8")]
    sizes = [1500, 2300, 700, 1, 0, 1800, 2000]
    sizes.append(len(docs) - sum(sizes))
    fs, shards, i = fsspec.filesystem("file"), [], 0
    for k, n in enumerate(sizes):
        writer = ParquetFileWriter(fs, str(out / f"data/part-{k:05d}.parquet"))
        chunk, i = docs[i:i + n], i + n
        for c in range(0, max(n, 1), 999):
            part = chunk[c:c + 999]
            writer.write(pa.table({"id": [d["id"] for d in part], "text": [d["text"] for d in part]}))
        done = writer.close()
        shards.append({"path": f"data/part-{k:05d}.parquet", "rows": done.rows, "bytes": done.bytes,
                       "sha256": done.sha256})
    (out / "manifest.json").write_text(json.dumps({"version": 1, "shards": shards}))
    return str(out)


@pytest.fixture(scope="module")
def crawl_run(ray_session, tmp_path_factory) -> str:
    """A real run of the pipeline over the bundled crawl, with small shards (11 of about 30 kB)."""
    cfg = quickstart_config(tmp_path_factory.mktemp("crawl") / "run", output__shard_bytes=30_000,
                            input__split_bytes=100_000)
    cfg["stages"] = [{"extract": {}}, {"exact_dedup": {}}]
    path, _ = ylink_data.run(cfg)
    return path


def all_ids(run: str) -> list[str]:
    """The run's ids in manifest order (= sample id order), read independently of the loader."""
    return ylink_data.open_run(run).to_arrow(columns=["id"]).column("id").to_pylist()


def batches(loader) -> list[list[str]]:
    return [b.column("id").to_pylist() for b in loader]


def take(iterator, n: int) -> list[list[str]]:
    return [b.column("id").to_pylist() for b in itertools.islice(iterator, n)]


def round_robin(streams: list, first: int = 0):
    """Batches as a DataLoader collects them from its workers: in turn, starting at worker `first`,
    skipping workers that are done."""
    its, alive = [iter(s) for s in streams], [True] * len(streams)
    w = first
    while any(alive):
        if alive[w]:
            try:
                yield next(its[w])
            except StopIteration:
                alive[w] = False
        w = (w + 1) % len(streams)


def flat(batch_lists) -> list[str]:
    return [i for b in batch_lists for i in b]


# -- the order and the partition, as pure functions -----------------------------------------------

def reference_order(rows: list[int], seed: int, epoch: int, block_rows: int, window_blocks: int) -> list[int]:
    """The documented epoch order, materialised the plain way (one list of all sample ids)."""
    offset = np.concatenate([[0], np.cumsum(rows)])
    gen = lambda *key: np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(key))))  # noqa: E731
    blocks = [(s, b) for s in gen(seed, epoch, 0).permutation(len(rows))
              for b in range(math.ceil(rows[s] / block_rows))]
    keys = gen(seed, epoch, 1).random(len(blocks))
    # block i moves up to min(window_blocks, 1 + i/2) places later: a sliding window that opens
    shuffled = [blocks[i] for i in sorted(range(len(blocks)),
                                          key=lambda i: i + keys[i] * min(window_blocks, 1 + i / 2))]
    out = []
    for s, b in shuffled:
        n = min(block_rows, rows[s] - b * block_rows)
        out += [int(offset[s]) + b * block_rows + int(r) for r in gen(seed, epoch, 2, s, b).permutation(n)]
    return out


def test_epoch_order_is_the_documented_permutation():
    rows = [700, 0, 1, 1300, 256, 4000]
    order = EpochOrder(rows, seed=7, epoch=2, block_rows=256, window_blocks=5)
    ids = order.sample_ids().tolist()
    assert ids == reference_order(rows, 7, 2, 256, 5)
    assert sorted(ids) == list(range(sum(rows)))
    # Any slice read through pieces() is the same slice of the whole sequence.
    assert order.sample_ids(1000, 3333).tolist() == ids[1000:3333]
    assert EpochOrder(rows, seed=7, epoch=3, block_rows=256, window_blocks=5).sample_ids().tolist() != ids
    assert EpochOrder(rows, seed=8, epoch=2, block_rows=256, window_blocks=5).sample_ids().tolist() != ids
    assert EpochOrder(rows, shuffle=False).sample_ids().tolist() == list(range(sum(rows)))
    with pytest.raises(ValueError):
        EpochOrder(rows, seed=-1)


def shards_ahead(block_shard, blocks_per_shard: int, upto: int) -> float:
    """The most shards the first k blocks of an order touch beyond the k / blocks_per_shard that
    an even pace would need, over k <= upto: what a cold cache must fetch ahead of the reader."""
    seen: set[int] = set()
    excess = []
    for k, shard in enumerate(block_shard[:upto]):
        seen.add(int(shard))
        excess.append(len(seen) - (k + 1) / blocks_per_shard)
    return max(excess)


def test_shards_are_first_needed_at_the_pace_they_are_read():
    """The sliding window opens gradually, so the start of an epoch asks for shards at about the
    rate it reads them (a cold cache can keep up); fixed 64-block windows in random order ask for
    most of the first window's shards at once."""
    rows = [3 * 4096] * 200
    ours, fixed = [], []
    for seed in range(8):
        ours.append(shards_ahead(EpochOrder(rows, seed=seed).block_shard, 3, 64))
        gen = np.random.default_rng(seed)
        listing = np.repeat(gen.permutation(200), 3)
        perm = np.concatenate([w0 + gen.permutation(min(64, len(listing) - w0)) for w0 in range(0, len(listing), 64)])
        fixed.append(shards_ahead(listing[perm], 3, 64))
    assert max(ours) <= 6 < min(fixed), (ours, fixed)
    # ... and no block moves more than window_blocks places from its place in the shard sequence.
    order = EpochOrder(rows, seed=3, window_blocks=16)
    listing = np.repeat(rng(3, 0, 0).permutation(200), 3)  # the shard permutation, stream (seed, epoch, 0)
    where = {(int(s), int(b)): i for i, (s, b) in enumerate(zip(order.block_shard, order.block_index))}
    seen: Counter = Counter()
    for i, shard in enumerate(listing):
        block = seen[int(shard)]
        seen[int(shard)] += 1
        assert abs(where[(int(shard), block)] - i) <= 16


@pytest.mark.parametrize("rows,start", [(10788, 0), (10788, 4321), (104, 0), (7, 3), (0, 0), (5, 5)])
def test_partition_gives_every_position_once_with_equal_batch_counts(rows, start):
    for world_size, batch_size, workers in itertools.product((1, 2, 3, 5), (1, 4, 100), (1, 2, 3)):
        p = Partition(rows, start, world_size, batch_size, workers)
        seen, sizes = [], []
        for rank in range(world_size):
            steps = sorted(j for w in range(workers) for j in p.worker_steps(w))
            assert steps == list(range(p.steps))  # the workers split the rank's batches exactly
            spans = [p.batch(rank, j) for j in steps]
            assert all(b - a == batch_size for a, b in spans[:-1])
            sizes.append(spans[-1][1] - spans[-1][0] if spans else None)
            seen += [i for a, b in spans for i in range(a, b)]
        assert sorted(seen) == list(range(start, rows))
        assert p.steps == math.ceil((rows - start) / (world_size * batch_size))
        if p.steps:  # the last batches differ by at most one row
            assert max(sizes) - min(sizes) <= 1 and max(sizes) >= 1
        assert p.consumed(p.steps) == rows and p.consumed(0) == start


# -- ShardLoader on real shards --------------------------------------------------------------------

@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_exactly_once_over_ranks_and_workers(reuters_run, world_size, workers):
    ids = all_ids(reuters_run)
    got, per_rank = [], Counter()
    for rank, worker in itertools.product(range(world_size), range(workers)):
        loader = ShardLoader(reuters_run, rank=rank, world_size=world_size, num_workers=workers, worker=worker,
                             seed=3, epoch=1, batch_size=100, **SHAPE)
        assert len(loader) == len(loader.steps())
        for batch in loader:
            assert isinstance(batch, pa.RecordBatch) and batch.schema.names == ["id"]
            got += batch.column("id").to_pylist()
            per_rank[rank] += 1
    assert len(got) == len(ids) == 10788 and set(got) == set(ids)
    assert set(per_rank.values()) == {math.ceil(10788 / (world_size * 100))}


def test_rank_stream_reads_the_documented_order(reuters_run):
    """What ranks read is the epoch order cut into steps of world_size x batch_size, rank slices."""
    ids = all_ids(reuters_run)
    rows = [s["rows"] for s in ylink_data.open_run(reuters_run).manifest["shards"]]
    expected = [ids[i] for i in reference_order(rows, 3, 1, 256, 8)]
    streams = [batches(ShardLoader(reuters_run, rank=r, world_size=2, seed=3, epoch=1, batch_size=100, **SHAPE))
               for r in range(2)]
    interleaved = flat(b for step in zip(*streams) for b in step)
    assert interleaved == expected
    # Decoding ahead in threads (and how far) changes nothing but speed; so do all columns.
    for readahead in (0, 1, 16):
        again = [batches(ShardLoader(reuters_run, rank=r, world_size=2, seed=3, epoch=1, batch_size=100,
                                     readahead=readahead, **SHAPE)) for r in range(2)]
        assert again == streams
    full = ShardLoader(reuters_run, seed=3, epoch=1, batch_size=100, block_rows=256, window_blocks=8)
    assert flat(b.column("id").to_pylist() for b in full) == expected


def test_workers_deliver_the_rank_sequence_in_turn(reuters_run):
    single = batches(ShardLoader(reuters_run, rank=1, world_size=2, seed=3, batch_size=64, **SHAPE))
    for workers in (2, 3):
        loaders = [ShardLoader(reuters_run, rank=1, world_size=2, num_workers=workers, worker=w, seed=3,
                               batch_size=64, **SHAPE) for w in range(workers)]
        assert [b.column("id").to_pylist() for b in round_robin(loaders)] == single


def test_order_is_a_function_of_seed_and_epoch_across_processes(reuters_run):
    code = ("import json, sys; from ylink_data.cache.loader import ShardLoader; "
            "l = ShardLoader(sys.argv[1], seed=5, epoch=2, batch_size=500, block_rows=256, window_blocks=8, "
            "columns=['id']); print(json.dumps([i for b in l for i in b.column('id').to_pylist()]))")
    proc = subprocess.run([sys.executable, "-c", code, reuters_run], capture_output=True, text=True, cwd=REPO,
                          timeout=120, check=True)
    here = flat(batches(ShardLoader(reuters_run, seed=5, epoch=2, batch_size=500, **SHAPE)))
    assert json.loads(proc.stdout) == here
    other_epoch = flat(batches(ShardLoader(reuters_run, seed=5, epoch=3, batch_size=500, **SHAPE)))
    other_seed = flat(batches(ShardLoader(reuters_run, seed=6, epoch=2, batch_size=500, **SHAPE)))
    assert sorted(other_epoch) == sorted(here) and other_epoch != here and other_seed != here
    # Shuffled well beyond a block: fewer than 1% of neighbours are neighbours in the manifest.
    position = {d: i for i, d in enumerate(all_ids(reuters_run))}
    adjacent = sum(abs(position[a] - position[b]) == 1 for a, b in zip(here, here[1:]))
    assert adjacent < len(here) // 100
    unshuffled = ShardLoader(reuters_run, shuffle=False, batch_size=500, columns=["id"])
    assert flat(batches(unshuffled)) == all_ids(reuters_run)


def test_resume_equals_uninterrupted_also_twice(reuters_run):
    kw = dict(world_size=2, seed=3, epoch=1, batch_size=100, **SHAPE)
    for rank in range(2):
        full = batches(ShardLoader(reuters_run, rank=rank, **kw))
        first = ShardLoader(reuters_run, rank=rank, **kw)
        got = take(iter(first), 7)
        second = ShardLoader(reuters_run, rank=rank, **kw)
        second.load_state_dict(json.loads(json.dumps(first.state_dict())))  # states survive JSON
        got += take(iter(second), 20)
        third = ShardLoader(reuters_run, rank=rank, **kw)
        third.load_state_dict(second.state_dict())
        got += batches(third)
        assert got == full and len(full) == 54
        assert third.state_dict()["consumed"] == 10788
        assert batches(third) == []  # the epoch is over until set_epoch
        third.set_epoch(2)
        assert len(batches(third)) == 54


def test_resume_of_each_worker_equals_uninterrupted(reuters_run):
    """What StatefulDataLoader does: every worker gets its own state back, the turn goes on."""
    kw = dict(rank=0, world_size=2, num_workers=3, seed=3, batch_size=50, **SHAPE)
    full = [b.column("id").to_pylist()
            for b in round_robin([ShardLoader(reuters_run, worker=w, **kw) for w in range(3)])]
    loaders = [ShardLoader(reuters_run, worker=w, **kw) for w in range(3)]
    iters = [iter(x) for x in loaders]
    got = [next(iters[j % 3]).column("id").to_pylist() for j in range(11)]
    states = [x.state_dict() for x in loaders]
    resumed = [ShardLoader(reuters_run, worker=w, **kw) for w in range(3)]
    for loader, state in zip(resumed, states):
        loader.load_state_dict(state)
    got += [b.column("id").to_pylist() for b in round_robin(resumed, first=11 % 3)]
    assert got == full
    # One worker's state is not the consumer's position: it cannot seed another shape...
    other = ShardLoader(reuters_run, rank=0, world_size=3, seed=3, batch_size=50, **SHAPE)
    with pytest.raises(ValueError, match="merge_states"):
        other.load_state_dict(states[0])
    # ...but all of them merged are: the consumer got 11 batches of 2 x 50 positions.
    assert merge_states(states)["consumed"] == 11 * 100
    with pytest.raises(ValueError, match="all 3 workers"):
        merge_states(states[:2])


def test_elastic_resume_delivers_each_document_once(reuters_run):
    """Save at world size 2 (after 13 steps), resume at 3 with 2 workers and another batch size,
    save again after 5 steps, finish at world size 1: every document exactly once."""
    ids = all_ids(reuters_run)
    common = dict(seed=9, epoch=0, **SHAPE)
    before = [ShardLoader(reuters_run, rank=r, world_size=2, batch_size=100, **common) for r in range(2)]
    seen = [i for x in before for i in flat(take(iter(x), 13))]
    state = before[0].state_dict()
    assert state == before[1].state_dict() and state["consumed"] == 13 * 2 * 100  # no rank in the state

    after, counts = [], []
    for r in range(3):
        workers = [ShardLoader(reuters_run, rank=r, world_size=3, num_workers=2, worker=w, batch_size=70, **common)
                   for w in range(2)]
        for x in workers:
            x.load_state_dict(state)
        got = list(itertools.islice(round_robin(workers), 5))
        counts.append(len(got))
        seen += flat(b.column("id").to_pylist() for b in got)
        after.append(merge_states([x.state_dict() for x in workers]))
    assert counts == [5, 5, 5] and after[0] == after[1] == after[2]
    assert after[0]["consumed"] == 2600 + 5 * 3 * 70

    last = ShardLoader(reuters_run, world_size=1, batch_size=1000, **common)
    last.load_state_dict(after[0])
    seen += flat(batches(last))
    assert len(seen) == len(ids) and Counter(seen) == Counter(ids)
    # And the documents after the first save are exactly the epoch order's positions 2600 on.
    order = ShardLoader(reuters_run, batch_size=10788, **common).order.sample_ids(2600)
    assert sorted(seen[2600:]) == sorted(ids[i] for i in order)


def test_state_of_another_run_or_seed_is_refused(reuters_run, crawl_run):
    state = ShardLoader(reuters_run, seed=1, **SHAPE).state_dict()
    with pytest.raises(ValueError, match="seed"):
        ShardLoader(reuters_run, seed=2, **SHAPE).load_state_dict(state)
    with pytest.raises(ValueError, match="another run"):
        ShardLoader(crawl_run, seed=1, **SHAPE).load_state_dict(state)
    with pytest.raises(ValueError, match="block_rows"):
        ShardLoader(reuters_run, seed=1, block_rows=512, window_blocks=8).load_state_dict(state)
    with pytest.raises(ValueError, match="older ylink-data whose epoch order differs"):
        ShardLoader(reuters_run, seed=1, **SHAPE).load_state_dict({**state, "version": 1})


def test_real_run_with_a_tail_smaller_than_the_world(crawl_run):
    """104 documents in 11 shards; world size 5, batches of 4: 5 full steps, then 4 documents for 5
    ranks: ranks 0-3 get one each, rank 4 an empty last batch; every rank yields 6 batches."""
    run = ylink_data.open_run(crawl_run)
    assert len(run.manifest["shards"]) >= 5 and run.stats["output_records"] == 104
    ids, got = all_ids(crawl_run), []
    for rank in range(5):
        loader = ShardLoader(crawl_run, rank=rank, world_size=5, batch_size=4, columns=["id", "text", "url"],
                             block_rows=8, window_blocks=4, seed=1)
        out = list(loader)
        assert len(out) == 6 and [b.num_rows for b in out[:5]] == [4] * 5
        assert out[-1].num_rows == (0 if rank == 4 else 1)
        assert all(b.schema.names == ["id", "text", "url"] for b in out)
        got += [i for b in out for i in b.column("id").to_pylist()]
    assert sorted(got) == sorted(ids)
    texts = dict(zip(ids, run.to_arrow(columns=["text"]).column("text").to_pylist()))
    batch = next(iter(ShardLoader(crawl_run, batch_size=10, columns=["id", "text"], block_rows=8)))
    assert batch.column("text").to_pylist() == [texts[i] for i in batch.column("id").to_pylist()]


def test_through_the_shard_cache_reads_the_same(reuters_run, tmp_path):
    pytest.importorskip("ylink_data.cache.store")
    kw = dict(rank=1, world_size=2, seed=4, batch_size=300, **SHAPE)
    plain = batches(ShardLoader(reuters_run, **kw))
    cached = ShardLoader(reuters_run, cache_dir=str(tmp_path / "cache"), **kw)
    needed = {s for j in cached.steps() for s in cached.order.shards_between(*cached.batch_positions(j))}
    assert batches(cached) == plain
    # Exactly the shards this rank reads were fetched (the empty shard never is).
    assert 4 <= len(needed) <= 7
    assert len(list((tmp_path / "cache" / "shards").glob("*.parquet"))) == len(needed)


# -- PyTorch -----------------------------------------------------------------------------------------

def test_importing_ylink_data_does_not_import_torch():
    code = "import sys, ylink_data, ylink_data.cache.loader; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          check=True)
    assert proc.stdout.strip() == "False"


def test_reading_a_batch_does_not_import_pandas(reuters_run, tmp_path):
    """pandas costs a fresh process 0.2 s, all of it before the first batch: the loader must not
    pull it in (pa.array(ndarray) does, to check for pandas objects)."""
    code = ("import sys; from ylink_data.cache import ShardLoader; "
            f"b = next(iter(ShardLoader({reuters_run!r}, cache_dir={str(tmp_path)!r}, batch_size=8))); "
            "print(b.num_rows, 'pandas' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          check=True)
    assert proc.stdout.strip() == "8 False"


def test_dataloader_workers_deliver_each_document_once_in_rank_order(reuters_run):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from ylink_data.torch import TextDataset

    got = []
    for rank in range(2):
        ds = TextDataset(reuters_run, rank=rank, world_size=2, seed=3, batch_size=100, columns=["id"],
                         block_rows=256, window_blocks=8)
        received = [b["id"] for b in DataLoader(ds, batch_size=None, num_workers=2)]
        single = batches(ShardLoader(reuters_run, rank=rank, world_size=2, seed=3, batch_size=100, **SHAPE))
        assert received == single  # the consumer sees the rank's sequence, as without workers
        got += flat(received)
    assert Counter(got) == Counter(all_ids(reuters_run))
    ds = TextDataset(reuters_run, seed=3, batch_size=5000, block_rows=256, window_blocks=8)
    first = next(iter(ds))
    assert set(first) == {"id", "text"} and isinstance(first["text"][0], str) and len(first["id"]) == 5000


def test_dataloader_workers_read_a_run_over_http(tmp_path):
    """The dataset checks the manifest once and hands it to its workers' loaders; each forked worker
    still reads through a filesystem of its own (fsspec's HTTP one is not usable after a fork)."""
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from ylink_data.torch import TextDataset

    write_run(tmp_path / "run", 3, 20)
    with FileServer(tmp_path) as server:
        ds = TextDataset(server.url("run"), seed=1, batch_size=7, columns=["id"])
        got = [i for b in DataLoader(ds, batch_size=None, num_workers=2) for i in b["id"]]
    assert sorted(got) == sorted(f"{s}-{j}" for s in range(3) for j in range(20))


def test_dataloader_resume_from_state_after_and_set_epoch(reuters_run):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from ylink_data.torch import TextDataset

    kw = dict(rank=0, world_size=2, seed=3, batch_size=100, columns=["id"], block_rows=256, window_blocks=8)
    full = [b["id"] for b in DataLoader(TextDataset(reuters_run, **kw), batch_size=None, num_workers=2)]
    ds = TextDataset(reuters_run, **kw)
    got = [b["id"] for b in itertools.islice(DataLoader(ds, batch_size=None, num_workers=2), 9)]
    state = ds.state_after(9)
    resumed = TextDataset(reuters_run, **kw)
    resumed.load_state_dict(state)
    got += [b["id"] for b in DataLoader(resumed, batch_size=None, num_workers=3)]
    assert got == full
    again = [b["id"] for b in DataLoader(TextDataset(reuters_run, **kw), batch_size=None, num_workers=2)]
    assert again == full  # the same epoch replays identically
    ds.set_epoch(1)
    assert [b["id"] for b in DataLoader(ds, batch_size=None, num_workers=2)] != full


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resume_equals_uninterrupted_also_twice(reuters_run, workers):
    pytest.importorskip("torch")
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from ylink_data.torch import TextDataset

    kw = dict(rank=1, world_size=2, seed=3, batch_size=100, columns=["id"], block_rows=256, window_blocks=8)
    make = lambda: stateful.StatefulDataLoader(TextDataset(reuters_run, **kw), batch_size=None,  # noqa: E731
                                               num_workers=workers)
    full = [b["id"] for b in make()]
    got, state = [], None
    for n in (7, 12, None):
        loader = make()
        if state is not None:
            loader.load_state_dict(state)
        for i, batch in enumerate(loader):
            got.append(batch["id"])
            if n is not None and i + 1 == n:
                break
        state = loader.state_dict()
    assert got == full and len(full) == 54


def test_stateful_dataloader_state_resumes_elastically(reuters_run):
    pytest.importorskip("torch")
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from ylink_data.torch import TextDataset, position

    common = dict(seed=3, columns=["id"], block_rows=256, window_blocks=8)
    seen, state = [], None
    for rank in range(2):
        loader = stateful.StatefulDataLoader(TextDataset(reuters_run, rank=rank, world_size=2, batch_size=100,
                                                         **common), batch_size=None, num_workers=2)
        seen += flat(b["id"] for b in itertools.islice(loader, 10))
        state = loader.state_dict()
    pos = position(state)
    assert pos["consumed"] == 10 * 2 * 100 and pos["partition"] is None
    for rank in range(3):
        ds = TextDataset(reuters_run, rank=rank, world_size=3, batch_size=64, **common)
        ds.load_state_dict(pos)
        seen += flat(b["id"] for b in stateful.StatefulDataLoader(ds, batch_size=None, num_workers=3))
    assert len(seen) == 10788 and Counter(seen) == Counter(all_ids(reuters_run))
