"""The n-grams of evaluation sets, hashed into one sorted array in one file, and the search for them in
batches of training text (`ngrams` says how text is normalised and hashed).

An item's n-grams are the runs of `n` tokens of its text (its chosen fields one after another, so
runs that cross from one field into the next count too): n = 13 words for text written with spaces
(GPT-3's contamination analysis, Brown et al. 2020, appendix C, used 13-grams), and 13 characters for
Chinese and Japanese (`script.written_unspaced` of the item). Thirteen characters is about seven to
nine Chinese words, shorter than 13 English words, but Chinese benchmark items are short (exam
questions of 20 to 40 characters): a 13-gram still leaves a one-word edit in the middle of a
30-character question with a run of 13 untouched characters on either side, where 16 or 20 would
not. The cost, measured on real news (282 sentences of 20-80 characters from THUCNews articles
900-999 as items, against the other 900 articles and 120 ChineseWebText pages): 41 documents share
a 13-character run with an item, 24 a 16-character one, 22 a 20-character one; the 17 that only 13
finds share a formula, such as the dateline "新浪体育讯北京时间4月12日", and the 22 at 20 share real
repeated sentences (Sina's boilerplate). For benchmarks of news-like passages, raise `ngram_zh`.

Items shorter than n tokens are matched on their whole text (GPT-3 does the same for short items)
when they have at least `min_tokens` tokens (8: GPT-3's smallest n); shorter items are too generic
to search for (a 5-word answer "the answer is 18 dollars") and are left out, counted in `skipped`.

The index is one file of flat arrays (`IndexWriter` writes it, `NgramIndex.open` maps it): the
sorted n-gram hashes (uint64) with the first item holding each (int32), a look-up bitmap, and each
item's normalised text and id as bytes with offsets. Nothing in it is a Python object, so a process
that maps it holds only the pages it reads, and the processes of one machine share them (the page
cache): a million items of 30 words are 22 million hashes, a 510 MB file, where keeping every word
as a Python string held 3.6 GB in each worker (bench/RESULTS.md, "Decontaminate index at 1M items").
Items are written a chunk at a time as the benchmark file is read, so building it holds the hashes
and one chunk, never the items as Python objects (a builder's peak RSS for that million: 660-700 MB).

Look-up: a bitmap of 2^24 bits (2 MB) says which 24-bit hash prefixes the index has, so most of a
document's n-grams are ruled out by one array read each, and only the few left (0.35% of the
n-grams of Reuters news against GSM8K questions and HumanEval prompts: 56,051 hashes) are
searched for in the sorted array (`np.searchsorted`). For the 254,000 13-grams of 2,048 Reuters
articles: 1.3 ms, where `np.searchsorted` of every n-gram takes 24 ms and a Python set of the
hashes 30 ms (CPU time, bench machine of bench/RESULTS.md). The bitmap grows with the index, 8 bits
or more per hash (`prefix_bits`): at 22 million hashes 2^24 bits would pass 74% of the n-grams of
news to the search, 2^28 (34 MB) pass 10%, and checking 20,000 documents took 0.9 s instead of 2.6.

A hash found in a document is checked against the item's normalised text before it counts (its
tokens, joined by spaces, must hold the document's run of tokens between spaces), so a 64-bit hash
collision can never drop a document. What a match reports comes from the document (the n-gram, as
the document's tokens) and from the hash's entry (the item: the first in file order, benchmarks in
config order, that holds the n-gram), so it is the same as when the items' words were kept.
"""
from __future__ import annotations

import copy
import json
import mmap
import os
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable

import numpy as np
import pyarrow as pa

from ylink_data.core.digest import file_digest, new_digest
from ylink_data.text.transform.ngrams import Tokens, string_parts, ngram_hashes, token_hashes
from ylink_data.text.transform.script import written_unspaced

WORD_NGRAM = 13  # GPT-3's n (Brown et al. 2020, appendix C)
CHAR_NGRAM = 13  # characters, for items written without spaces (module docstring)
MIN_TOKENS = 8  # GPT-3's smallest n: shorter items are not searched for
_PREFIX_BITS = 24  # the look-up bitmap's smallest size: 2^24 bits (2 MB)
_MAX_PREFIX_BITS = 32  # and its largest: 2^32 bits (512 MB), for a billion n-grams
_BUCKET_BITS = 4  # the hashes wait for sorting in 2^4 lists by their top bits, sorted one list at a time
# The file: sections of flat arrays, then a JSON footer that says where each lies, its length (8
# bytes, little-endian) and MAGIC. A change of layout changes MAGIC, so an old file is not misread.
MAGIC = b"YLNGRAM1"
_ALIGN = 64  # each section starts at a multiple of this (numpy reads any dtype from there)
_SECTIONS = ("item_text", "item_text_offsets", "item_id_offsets", "item_ids", "item_benchmark", "hashes",
             "hash_items", "bitmap")
_OFFSETS = ("item_text_offsets", "item_id_offsets")


@dataclass
class Match:
    """What a document shares with an evaluation set: the first matching n-gram in the document."""

    benchmark: str
    item: str
    ngram: str


class NotAnIndex(ValueError):
    """The bytes are not a whole index file of this layout (truncated, another version, not one)."""


def prefix_bits(count: int) -> int:
    """The look-up bitmap's prefix length for `count` hashes: at least 8 bits per hash, so that about
    one prefix in eight is set and most of a document's n-grams are ruled out by the bitmap alone
    (2^24 bits at the 22 million hashes of a million items would have 73% of its bits set, leaving
    nearly every n-gram to the sorted array)."""
    return min(_MAX_PREFIX_BITS, max(_PREFIX_BITS, (8 * max(count, 1) - 1).bit_length()))


def bitmap_of(hashes: np.ndarray, bits: int = _PREFIX_BITS, out: np.ndarray | None = None) -> np.ndarray:
    """The look-up bitmap of sorted hashes (OR-ed into `out` when given): uint64 words, bit k set when
    a hash starts with the `bits` bits k. Sorted input lets each word be OR-ed once (`reduceat`), 6x
    faster than `bitwise_or.at`."""
    words = np.zeros(1 << (bits - 6), np.uint64) if out is None else out
    if len(hashes):
        key = hashes >> np.uint64(64 - bits)
        word = key >> np.uint64(6)
        starts = np.flatnonzero(np.r_[True, word[1:] != word[:-1]])
        words[word[starts]] |= np.bitwise_or.reduceat(np.uint64(1) << (key & np.uint64(63)), starts)
    return words


class IndexWriter:
    """Writes an index file to `out` (a binary file, written straight through, never sought): `add`
    each benchmark's chunks of (texts, ids) in config order, then `finish`. Item texts go to the file
    as they come; the hashes wait in memory to be sorted (12 bytes an n-gram, in 16 lists by their
    top 4 bits, so that sorting them holds one list's copies at a time, not all the hashes' twice)."""

    def __init__(self, out: BinaryIO, *, word_ngram: int = WORD_NGRAM, char_ngram: int = CHAR_NGRAM,
                 min_tokens: int = MIN_TOKENS):
        self.out, self.pos = out, 0
        self.digest = new_digest()  # of every byte before the footer: checked when the file is read back
        self.word_ngram, self.char_ngram, self.min_tokens = word_ngram, char_ngram, min_tokens
        self.sections: dict[str, list[Any]] = {}  # name -> [offset, dtype, count]
        self.benchmarks: list[str] = []
        self.benchmark_items: list[int] = []
        self.items = 0
        self.text_bytes = 0
        self.text_offsets: list[np.ndarray] = [np.zeros(1, np.int64)]
        self.ids: list[pa.Array] = []
        self.buckets: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(1 << _BUCKET_BITS)]
        self.entries = 0
        self.lengths: set[int] = set()
        self.skipped = 0
        self._begin("item_text", np.uint8)

    def add(self, name: str, chunks: Iterable[tuple[list[str], list[str]]]) -> None:
        """One benchmark's items, as chunks of (texts, ids) in file order."""
        first = self.items
        for texts, ids in chunks:
            self._add_chunk(texts, ids)
        self.benchmarks.append(name)
        self.benchmark_items.append(self.items - first)

    def _add_chunk(self, texts: list[str], ids: list[str]) -> None:
        array = pa.array(texts, pa.large_string())
        tokens = token_hashes(array)
        counts = tokens.lengths()
        n = np.where(written_unspaced(array), self.char_ngram, self.word_ngram) if texts else np.zeros(0, np.int64)
        length = np.where(counts >= n, n, np.where(counts >= self.min_tokens, counts, 0))  # 0: not searched
        found_hashes, found_items = [], []
        for size in sorted(set(length.tolist()) - {0}, reverse=True):
            starts, hashes = ngram_hashes(tokens, size)
            item = np.searchsorted(tokens.offsets, starts, side="right") - 1
            keep = length[item] == size
            found_hashes.append(hashes[keep])
            found_items.append(item[keep])
        if found_hashes:
            items = np.concatenate(found_items)
            order = np.argsort(items, kind="stable")  # item order, so a stable sort by hash keeps the first item first
            hashes, items = np.concatenate(found_hashes)[order], (items[order] + self.items).astype(np.int32)
            bucket = (hashes >> np.uint64(64 - _BUCKET_BITS)).astype(np.uint8)
            order = np.argsort(bucket, kind="stable")  # (a radix sort: stable, so still in item order)
            ends = np.cumsum(np.bincount(bucket, minlength=len(self.buckets)))
            for k, (start, end) in enumerate(zip(np.r_[0, ends[:-1]], ends)):
                if end > start:
                    self.buckets[k].append((hashes[order[start:end]], items[order[start:end]]))
            self.entries += len(hashes)
        self.lengths |= set(length.tolist()) - {0}
        self.skipped += int((length == 0).sum())
        offsets, data = string_parts(tokens.joined())
        self._write(data[offsets[0]:offsets[-1]])
        self.text_offsets.append(offsets[1:] - offsets[0] + self.text_bytes)
        self.text_bytes += int(offsets[-1] - offsets[0])
        self.ids.append(pa.array(ids, pa.large_string()))
        self.items += len(texts)
        if self.items >= 2 ** 31:
            raise ValueError("an n-gram index holds at most 2^31 items")

    def finish(self, meta: dict[str, Any] | None = None) -> None:
        """Writes the rest: offsets, ids, the sorted hashes, the bitmap, the footer."""
        self._end("item_text", self.text_bytes)
        self._array("item_text_offsets", np.concatenate(self.text_offsets))
        self.text_offsets = []
        ids = pa.concat_arrays(self.ids) if self.ids else pa.array([], pa.large_string())
        self.ids = []
        offsets, data = string_parts(ids)
        self._array("item_id_offsets", offsets - offsets[0])
        self._array("item_ids", data[offsets[0]:offsets[-1]])
        del ids, offsets, data
        self._array("item_benchmark", np.repeat(np.arange(len(self.benchmarks), dtype=np.int32),
                                                self.benchmark_items))
        # One entry per hash, the first item's: a stable sort of each bucket's hashes (in item order)
        # puts it first among equals. The buckets follow one another in hash order.
        bits_len = prefix_bits(self.entries)
        bits = np.zeros(1 << (bits_len - 6), np.uint64)
        unique_items: list[np.ndarray] = []
        self._begin("hashes", np.uint64)
        count = 0
        for k, parts in enumerate(self.buckets):
            self.buckets[k] = []
            if not parts:
                continue
            hashes = np.concatenate([h for h, _ in parts])
            items = np.concatenate([i for _, i in parts])
            del parts
            order = np.argsort(hashes, kind="stable")
            hashes, items = hashes[order], items[order]
            keep = np.r_[True, hashes[1:] != hashes[:-1]]
            hashes = hashes[keep]
            self._write(hashes)
            bitmap_of(hashes, bits_len, bits)
            unique_items.append(items[keep])
            count += len(hashes)
            del hashes, items, order, keep
        self._end("hashes", count)
        self._begin("hash_items", np.int32)
        for items in unique_items:
            self._write(items)
        self._end("hash_items", count)
        del unique_items
        self._array("bitmap", bits)
        footer = json.dumps({"sections": self.sections, "benchmarks": self.benchmarks, "items": self.items,
                             "lengths": sorted(self.lengths, reverse=True), "skipped": self.skipped,
                             "prefix_bits": bits_len, "meta": meta or {},
                             "checksum": self.digest.hexdigest()}).encode()
        self._write(np.frombuffer(footer, np.uint8))
        self._write(np.frombuffer(len(footer).to_bytes(8, "little") + MAGIC, np.uint8))

    def _write(self, array: np.ndarray) -> None:
        view = memoryview(np.ascontiguousarray(array)).cast("B")
        self.out.write(view)
        self.digest.update(view)
        self.pos += len(view)

    def _begin(self, name: str, dtype: Any) -> None:
        pad = -self.pos % _ALIGN
        if pad:
            self._write(np.zeros(pad, np.uint8))
        self.sections[name] = [self.pos, np.dtype(dtype).str, None]

    def _end(self, name: str, count: int) -> None:
        self.sections[name][2] = int(count)

    def _array(self, name: str, array: np.ndarray) -> None:
        self._begin(name, array.dtype)
        self._write(array)
        self._end(name, len(array))


class NgramIndex:
    """An index file's arrays, read in place from `buffer` (a memory map, or bytes for an index built
    in memory): no copy is made, so what a process holds is the pages it has read."""

    def __init__(self, buffer: Any, path: str | None = None):
        self.buffer, self.path = buffer, path
        size = len(buffer)
        if size < 16 or bytes(buffer[size - 8:size]) != MAGIC:
            raise NotAnIndex("no n-gram index footer")
        footer_len = int.from_bytes(buffer[size - 16:size - 8], "little")
        if footer_len > size - 16:
            raise NotAnIndex("footer length out of bounds")
        end = size - 16 - footer_len
        self.body_bytes = end  # what the footer's checksum covers (`open` checks it)
        try:
            footer = json.loads(bytes(buffer[end:size - 16]))
            self.checksum: str | None = footer.get("checksum")
            self.meta: dict[str, Any] = footer["meta"]
            self.benchmarks: list[str] = footer["benchmarks"]
            self.items: int = footer["items"]
            self.lengths: tuple[int, ...] = tuple(footer["lengths"])  # longest first
            self.skipped: int = footer["skipped"]  # items too short to search for
            self.prefix_bits: int = footer["prefix_bits"]  # the look-up bitmap's
            arrays = {}
            for name, (offset, dtype, count) in footer["sections"].items():
                dtype = np.dtype(dtype)
                if count is None or offset < 0 or offset + count * dtype.itemsize > end:
                    raise NotAnIndex(f"section {name} out of bounds")
                arrays[name] = np.frombuffer(buffer, dtype, count, offset)
        except (KeyError, TypeError, ValueError) as exc:  # NotAnIndex is a ValueError
            raise NotAnIndex(f"not an n-gram index footer: {exc}") from None
        if set(arrays) != set(_SECTIONS) or any(len(arrays[name]) != self.items + 1 for name in _OFFSETS):
            raise NotAnIndex("sections missing, or item offsets that do not match the item count")
        self.hashes: np.ndarray = arrays["hashes"]  # sorted uint64
        self.hash_items: np.ndarray = arrays["hash_items"]  # int32: the first item each hash came from
        self.bitmap: np.ndarray = arrays["bitmap"]
        self.item_benchmark: np.ndarray = arrays["item_benchmark"]  # int32: each item's benchmark
        self._text, self._text_offsets = arrays["item_text"], arrays["item_text_offsets"]
        self._ids, self._id_offsets = arrays["item_ids"], arrays["item_id_offsets"]

    @classmethod
    def build(cls, benchmarks: list[tuple[str, list[str], list[str]]], *, word_ngram: int = WORD_NGRAM,
              char_ngram: int = CHAR_NGRAM, min_tokens: int = MIN_TOKENS) -> "NgramIndex":
        """From (name, item texts, item ids) per evaluation set, in memory (the same bytes as a file)."""
        import io

        out = io.BytesIO()
        writer = IndexWriter(out, word_ngram=word_ngram, char_ngram=char_ngram, min_tokens=min_tokens)
        for name, texts, ids in benchmarks:
            writer.add(name, [(texts, ids)])
        writer.finish()
        return cls(out.getvalue())

    @classmethod
    def open(cls, path: str | os.PathLike) -> "NgramIndex":
        """The index file at `path`, memory-mapped read-only (the map outlives the file's removal),
        once its content matches the checksum its footer holds: a file damaged in place (its body
        zeroed, header and size intact) would otherwise find nothing and drop nothing, without a word."""
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise NotAnIndex("empty file")
            buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        index = cls(buffer, str(path))
        if index.checksum is None or file_digest(path, index.body_bytes) != index.checksum:
            raise NotAnIndex(f"{path}: its content does not match the checksum in its footer (damaged)")
        if hasattr(buffer, "madvise"):
            # Reads land at random: read each page alone, not the kernel's read-ahead around it (8 MB
            # on the bench machine). Checking 20,000 documents against a million items then brought
            # 6 MB of the items' text into memory instead of 93 MB (bench/RESULTS.md).
            buffer.madvise(mmap.MADV_RANDOM)
        return index

    def with_hashes(self, hashes: np.ndarray, hash_items: np.ndarray) -> "NgramIndex":
        """A copy whose hash entries are these (sorted hashes, int32 items): for tests that plant a
        collision."""
        other = copy.copy(self)
        other.hashes, other.hash_items = hashes, hash_items
        other.bitmap = bitmap_of(hashes, other.prefix_bits)
        return other

    @property
    def size(self) -> int:
        return len(self.hashes)

    def item_id(self, item: int) -> str:
        return bytes(self._ids[self._id_offsets[item]:self._id_offsets[item + 1]]).decode()

    def item_text(self, item: int) -> str:
        """The item's normalised text: its tokens joined by single spaces."""
        return bytes(self._text[self._text_offsets[item]:self._text_offsets[item + 1]]).decode()

    def maybe(self, hashes: np.ndarray) -> np.ndarray:
        """Whether each hash may be in the index (False: surely not)."""
        key = hashes >> np.uint64(64 - self.prefix_bits)
        return ((self.bitmap[key >> np.uint64(6)] >> (key & np.uint64(63))) & np.uint64(1)).astype(bool)

    def find(self, texts: pa.Array | pa.ChunkedArray) -> list[Match | None]:
        """The first n-gram of each text that an item has (None for a clean text)."""
        tokens = token_hashes(texts)
        candidates: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (start, length, item) of hits
        for size in self.lengths:
            starts, hashes = ngram_hashes(tokens, size)
            if not len(hashes) or not self.size:
                continue
            maybe = np.flatnonzero(self.maybe(hashes))
            at = np.minimum(np.searchsorted(self.hashes, hashes[maybe]), self.size - 1)
            hit = self.hashes[at] == hashes[maybe]
            if hit.any():
                candidates.append((starts[maybe[hit]], np.full(int(hit.sum()), size), self.hash_items[at[hit]]))
        matches: list[Match | None] = [None] * len(texts)
        if not candidates:
            return matches
        starts, sizes, items = (np.concatenate(parts) for parts in zip(*candidates))
        order = np.lexsort((-sizes, starts))  # in document order, the longer n-gram first
        docs = np.searchsorted(tokens.offsets, starts, side="right") - 1
        for k in order:
            doc = int(docs[k])
            if matches[doc] is None:
                matches[doc] = self._confirmed(tokens, int(starts[k]), int(sizes[k]), int(items[k]))
        return matches

    def _confirmed(self, tokens: Tokens, start: int, size: int, item: int) -> Match | None:
        """The match, when the document's tokens really are a run of the item's (not a hash collision).
        Tokens hold no spaces, so the run, spaced, lies inside the item's spaced text exactly when its
        tokens are consecutive tokens of the item."""
        run = " ".join(tokens.words[start:start + size].to_pylist())
        if f" {run} " not in f" {self.item_text(item)} ":
            return None
        return Match(self.benchmarks[int(self.item_benchmark[item])], self.item_id(item), tokens.text(start, size))
