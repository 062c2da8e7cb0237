"""The n-grams of evaluation sets, hashed into one sorted array, and the search for them in batches
of training text (`ngrams` says how text is normalised and hashed).

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

Look-up: a bitmap of 2^24 bits (2 MB) says which 24-bit hash prefixes the index has, so most of a
document's n-grams are ruled out by one array read each, and only the few left (0.35% of the
n-grams of Reuters news against GSM8K questions and HumanEval prompts: 56,051 hashes) are
searched for in the sorted array (`np.searchsorted`). For the 254,000 13-grams of 2,048 Reuters
articles: 1.3 ms, where `np.searchsorted` of every n-gram takes 24 ms and a Python set of the
hashes 30 ms (CPU time, bench machine of bench/RESULTS.md).

A hash found in a document is checked against the item's tokens before it counts, so a 64-bit hash
collision can never drop a document.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .ngrams import Tokens, ngram_hashes, token_hashes
from .script import written_unspaced

WORD_NGRAM = 13  # GPT-3's n (Brown et al. 2020, appendix C)
CHAR_NGRAM = 13  # characters, for items written without spaces (module docstring)
MIN_TOKENS = 8  # GPT-3's smallest n: shorter items are not searched for
_PREFIX_BITS = 24  # the look-up bitmap's size: 2^24 bits


@dataclass
class Match:
    """What a document shares with an evaluation set: the first matching n-gram in the document."""

    benchmark: str
    item: str
    ngram: str


@dataclass
class NgramIndex:
    benchmarks: list[str]  # names
    item_benchmark: np.ndarray  # int32: each item's benchmark
    item_ids: list[str]
    item_tokens: list[tuple[str, ...]]  # normalised, to confirm a hash match
    hashes: np.ndarray  # sorted uint64
    hash_items: np.ndarray  # int32: the (first) item each hash came from
    lengths: tuple[int, ...]  # the n-gram lengths in the index, longest first
    skipped: int  # items too short to search for
    bitmap: np.ndarray | None = None  # uint64 words: bit k set when a hash starts with the 24 bits k

    def __post_init__(self) -> None:
        if self.bitmap is None:
            key = self.hashes >> np.uint64(64 - _PREFIX_BITS)
            bits = np.zeros(1 << (_PREFIX_BITS - 6), np.uint64)
            np.bitwise_or.at(bits, key >> np.uint64(6), np.uint64(1) << (key & np.uint64(63)))
            self.bitmap = bits

    def maybe(self, hashes: np.ndarray) -> np.ndarray:
        """Whether each hash may be in the index (False: surely not)."""
        key = hashes >> np.uint64(64 - _PREFIX_BITS)
        return ((self.bitmap[key >> np.uint64(6)] >> (key & np.uint64(63))) & np.uint64(1)).astype(bool)

    @classmethod
    def build(cls, benchmarks: list[tuple[str, list[str], list[str]]], *, word_ngram: int = WORD_NGRAM,
              char_ngram: int = CHAR_NGRAM, min_tokens: int = MIN_TOKENS) -> "NgramIndex":
        """From (name, item texts, item ids) per evaluation set."""
        names = [name for name, _, _ in benchmarks]
        texts = [t for _, ts, _ in benchmarks for t in ts]
        ids = [i for _, _, item_ids in benchmarks for i in item_ids]
        owner = np.repeat(np.arange(len(benchmarks), dtype=np.int32), [len(ts) for _, ts, _ in benchmarks])
        array = pa.array(texts, pa.large_string())
        tokens = token_hashes(array)
        counts = tokens.lengths()
        n = np.where(written_unspaced(array), char_ngram, word_ngram) if texts else np.zeros(0, np.int64)
        length = np.where(counts >= n, n, np.where(counts >= min_tokens, counts, 0))  # 0: not searched
        found_hashes, found_items = [], []
        for size in sorted(set(length.tolist()) - {0}, reverse=True):
            starts, hashes = ngram_hashes(tokens, size)
            item = np.searchsorted(tokens.offsets, starts, side="right") - 1
            keep = length[item] == size
            found_hashes.append(hashes[keep])
            found_items.append(item[keep].astype(np.int32))
        all_hashes = np.concatenate(found_hashes) if found_hashes else np.zeros(0, np.uint64)
        all_items = np.concatenate(found_items) if found_items else np.zeros(0, np.int32)
        # One entry per hash, the first item that has it (items in file order, benchmarks in config order).
        order = np.lexsort((all_items, all_hashes))
        all_hashes, all_items = all_hashes[order], all_items[order]
        first = np.ones(len(all_hashes), bool)
        first[1:] = all_hashes[1:] != all_hashes[:-1]
        words = tokens.words.to_pylist()
        item_tokens = [tuple(words[tokens.offsets[i]:tokens.offsets[i + 1]]) for i in range(len(texts))]
        return cls(names, owner, ids, item_tokens, all_hashes[first], all_items[first],
                   tuple(sorted(set(length.tolist()) - {0}, reverse=True)), int((length == 0).sum()))

    @property
    def size(self) -> int:
        return len(self.hashes)

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
        """The match, when the document's tokens really are a run of the item's (not a hash collision)."""
        run = tuple(tokens.words[start:start + size].to_pylist())
        have = self.item_tokens[item]
        if not any(have[i:i + size] == run for i in range(len(have) - size + 1)):
            return None
        return Match(self.benchmarks[int(self.item_benchmark[item])], self.item_ids[item], tokens.text(start, size))
