"""ROUGE-L F between short texts (instructions), equal to `rouge_score`'s, and a pool that answers
"is this new text within `threshold` of any text already kept?" fast at tens of thousands of texts.

Tokens: `rouge_score`'s default tokenizer (lowercase, then the runs of [a-z0-9]; no stemming, as
Self-Instruct's `RougeScorer(["rougeL"], use_stemmer=False)`), plus every Han character as a token
of its own, since that tokenizer drops Chinese entirely (two Chinese texts would always score 0).
For text without Han characters the tokens, and so the scores, are `rouge_score`'s exactly.

F is computed as `rouge_score` computes it (`p = lcs/len(b)`, `r = lcs/len(a)`, `2pr/(p+r)`, 0 when
either side has no token), so the floats are identical, not only close (tests/test_instruct_generate.py).

The pool (`RougePool`) keeps an inverted index token -> (item, count). For a query it first bounds
every item's LCS from above by the token-multiset overlap (an LCS is a common sub-multiset), which
rules out nearly all of the pool in a few numpy additions over the query's tokens' postings; only the
items whose bound could beat the best score found so far get an exact LCS, computed bit-parallel
(Hyyrö 2004: one add, one subtract and three bit operations per token of the other text) for many
items at once in numpy uint64 when the query has at most 64 tokens, with Python integers otherwise.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SLACK = 1e-9  # the bound is compared with this margin: float rounding never prunes a real match
_CHUNK = 512  # items whose exact LCS is computed together


def tokens(text: str) -> list[str]:
    """`rouge_score.tokenize.tokenize(text, None)` for English; Han characters one token each."""
    return _TOKEN.findall(text.lower())


def fmeasure(lcs: int, len_a: int, len_b: int) -> float:
    """`rouge_score`'s F of an LCS between texts of len_a and len_b tokens (same float operations)."""
    if not len_a or not len_b:
        return 0.0
    precision, recall = lcs / len_b, lcs / len_a
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def lcs_length(a: list, b: list) -> int:
    """Length of the longest common subsequence of two token lists, bit-parallel in Python ints."""
    if len(a) > len(b):
        a, b = b, a
    masks: dict = {}
    for i, t in enumerate(a):
        masks[t] = masks.get(t, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for t in b:
        u = v & masks.get(t, 0)
        v = (v + u) | (v - u)  # bits above len(a) collect carries and never flow back down
    return len(a) - (v & full).bit_count()


def rouge_l(a: str, b: str) -> float:
    """ROUGE-L F of two texts (symmetric)."""
    ta, tb = tokens(a), tokens(b)
    return fmeasure(lcs_length(ta, tb), len(ta), len(tb))


class _Postings:
    """Items holding one token and how often, in growable numpy arrays (amortised O(1) appends)."""

    __slots__ = ("items", "counts", "size")

    def __init__(self) -> None:
        self.items = np.empty(4, np.int32)
        self.counts = np.empty(4, np.int16)
        self.size = 0

    def add(self, item: int, count: int) -> None:
        if self.size == len(self.items):
            self.items = np.resize(self.items, 2 * self.size)
            self.counts = np.resize(self.counts, 2 * self.size)
        self.items[self.size] = item
        self.counts[self.size] = min(count, 32767)
        self.size += 1


class RougePool:
    """Texts kept so far; `nearest(text)` is the highest ROUGE-L F of `text` to any of them."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {"": 0}  # token -> id; 0 pads sequences and matches nothing
        self._postings: dict[int, _Postings] = {}
        self._lengths = np.zeros(1024, np.int32)
        self._flat = np.zeros(16384, np.int32)  # every item's token ids, one after another
        self._start = np.zeros(1025, np.int64)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _encode(self, toks: list[str], grow: bool) -> list[int]:
        ids = self._ids
        if grow:
            return [ids.setdefault(t, len(ids)) for t in toks]
        return [ids.get(t, -1) for t in toks]  # -1: a token no item holds

    def add(self, text: str) -> int:
        """Adds a text; returns its index."""
        seq = self._encode(tokens(text), grow=True)
        i = self.size
        if i == len(self._lengths):
            self._lengths = np.resize(self._lengths, 2 * i)
            self._start = np.resize(self._start, 2 * i + 1)
        end = self._start[i] + len(seq)
        if end > len(self._flat):
            self._flat = np.resize(self._flat, max(2 * len(self._flat), int(end)))
        self._flat[self._start[i]:end] = seq
        self._start[i + 1] = end
        self._lengths[i] = len(seq)
        for t, c in Counter(seq).items():
            self._postings.setdefault(t, _Postings()).add(i, c)
        self.size += 1
        return i

    def nearest(self, text: str, above: float | None = None) -> tuple[float, int]:
        """(F, index) of the pool item most similar to `text`; (0.0, -1) for an empty pool or a
        text without tokens. With `above`, stops at the first item scoring more than `above` and
        returns it (enough to reject a candidate, as Self-Instruct does with `max(...) > 0.7`)."""
        query = self._encode(tokens(text), grow=False)
        m, n = len(query), self.size
        if not m or not n:
            return 0.0, -1
        lengths = self._lengths[:n]
        overlap = np.zeros(n, np.int32)
        for t, c in Counter(query).items():
            p = self._postings.get(t)
            if p is not None:
                ids = p.items[:p.size]
                overlap[ids] += np.minimum(p.counts[:p.size], c)
        with np.errstate(divide="ignore", invalid="ignore"):
            precision, recall = overlap / lengths, overlap / m
            bound = np.nan_to_num(2 * precision * recall / (precision + recall))
        best, best_i = 0.0, -1
        order = np.flatnonzero(bound > _SLACK)
        order = order[np.argsort(-bound[order], kind="stable")]
        for start in range(0, len(order), _CHUNK):
            chunk = order[start:start + _CHUNK]
            chunk = chunk[bound[chunk] > best - _SLACK] if best_i >= 0 else chunk
            if not len(chunk):
                break
            lcs = self._lcs_many(query, chunk)
            scores = [fmeasure(int(l), m, int(lengths[j])) for l, j in zip(lcs, chunk)]
            k = int(np.argmax(scores))
            if scores[k] > best:
                best, best_i = scores[k], int(chunk[k])
            if above is not None and best > above:
                break
        return best, best_i

    def _lcs_many(self, query: list[int], items: np.ndarray) -> np.ndarray:
        """Exact LCS of `query` with each of `items`."""
        m = len(query)
        if m > 64:
            return np.array([lcs_length(query, self._seq(int(j))) for j in items], np.int64)
        masks = np.zeros(len(self._ids), np.uint64)  # token id -> positions in the query
        for i, t in enumerate(query):
            if t >= 0:
                masks[t] |= np.uint64(1 << i)
        lens = self._lengths[items]
        width = int(lens.max())
        grid = np.zeros((len(items), width), np.int32)  # each item's tokens, padded with 0
        starts = self._start[items]
        for j in range(width):
            has = lens > j
            grid[has, j] = self._flat[starts[has] + j]
        full = np.uint64((1 << m) - 1) if m < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        v = np.full(len(items), full, np.uint64)
        for j in range(width):
            u = v & masks[grid[:, j]]
            v = (v + u) | (v - u)  # uint64 wraps: carries out of bit 63 only, which is beyond the query
        return m - np.bitwise_count(v & full).astype(np.int64)

    def _seq(self, i: int) -> list[int]:
        return self._flat[self._start[i]:self._start[i + 1]].tolist()
