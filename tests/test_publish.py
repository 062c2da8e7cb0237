"""Packing a run's parts into shards (engine/publish.py): small parts merged up to shard_bytes,
a part of LINKED_PART_BYTES or more a shard of its own (linked, never rewritten)."""
from __future__ import annotations

from ylink_data.engine.publish import LINKED_PART_BYTES, pack_shards

MIB = 1 << 20


def parts(*sizes: int) -> list[dict]:
    return [{"path": f"part-{k}", "rows": 1 if size else 0, "bytes": size} for k, size in enumerate(sizes)]


def names(groups: list[list[dict]]) -> list[list[str]]:
    return [[p["path"] for p in g] for g in groups]


def test_small_parts_are_merged_up_to_shard_bytes():
    assert names(pack_shards(parts(MIB, MIB, MIB, 2 * MIB), 3 * MIB)) == [["part-0", "part-1", "part-2"], ["part-3"]]


def test_a_large_part_is_a_shard_of_its_own():
    assert LINKED_PART_BYTES == 4 * MIB
    # 128 MiB shards: ten 6 MiB parts (the spine's parts of a 70 MB crawl) stay ten shards, and the
    # small parts on either side of a large one are not merged across it
    groups = pack_shards(parts(*[6 * MIB] * 10), 128 * MIB)
    assert names(groups) == [[f"part-{k}"] for k in range(10)]
    groups = pack_shards(parts(MIB, MIB, 5 * MIB, MIB, 0, MIB), 128 * MIB)
    assert names(groups) == [["part-0", "part-1"], ["part-2"], ["part-3", "part-5"]]


def test_below_linked_part_bytes_shard_bytes_decides():
    # shard_bytes smaller than LINKED_PART_BYTES: a part of shard_bytes or more is alone, as before
    groups = pack_shards(parts(10_000, 9_000, 25_000, 5_000, 5_000, 5_000, 5_000, 5_000), 20_000)
    assert names(groups) == [["part-0", "part-1"], ["part-2"], ["part-3", "part-4", "part-5", "part-6"], ["part-7"]]
