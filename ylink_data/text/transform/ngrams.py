"""Hashed n-grams of normalised text, for finding benchmark text inside training text (decontamination).

Normalisation (the same for documents and benchmark items, so light edits do not hide a copy):
- Unicode NFKC (full-width "ＡＢＣ１２" is "ABC12"), then lowercase;
- every run of characters that is not a letter, digit or combining mark (punctuation, symbols,
  whitespace, "_") is one space: "Janet’s ducks," and "janets ducks" differ only in "’", which
  goes, so they read "janet s ducks" both;
- each Han, hiragana and katakana character is a token of its own (Chinese and Japanese are
  written without spaces: their units are characters); any other run of letters and digits is one
  token (a word, a number: digits are kept, a changed number is a changed word).

A text's tokens are hashed once (a stable 64-bit hash of each distinct token of a batch: a
polynomial over its UTF-8 bytes, then splitmix64's finaliser, so equal tokens hash equally in every
process, unlike Python's `hash`), and the hash of every run of L tokens comes from one prefix sum
over the whole batch: H(i, L) = (S[i+L] - S[i]) * P^(i+L-1), with S[k] = sum of t[j] * P^-j for
j < k, all modulo 2^64 (numpy's uint64 arithmetic wraps). So every n-gram of every document of a
batch, at any length, costs a few vectorised numpy operations, no Python loop per token. The
n-gram hash is finalised again with its length, and looked up in a sorted numpy array of the
benchmark's hashes (`ngram_index`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# RE2 (Arrow) patterns. CJK_CHAR: the characters that are tokens on their own.
CJK_CHAR = r"[\p{Han}\p{Hiragana}\p{Katakana}]"
NOT_WORD = r"[^\pL\pN\pM\s]"  # each such character becomes a space; whitespace splits

_P = np.uint64(0x9E3779B97F4A7C15 | 1)  # odd, so invertible modulo 2^64
_P_INV = np.uint64(pow(int(_P), -1, 1 << 64))
_MASK64 = (1 << 64) - 1


def normalise(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The normalised texts (module docstring): tokens separated by single spaces or runs of them."""
    texts = pc.fill_null(texts, "")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = pc.utf8_lower(pc.utf8_normalize(texts, "NFKC"))
    texts = pc.replace_substring_regex(texts, NOT_WORD, " ")
    texts = pc.replace_substring_regex(texts, "(" + CJK_CHAR + ")", r" \1 ")
    return pc.utf8_trim_whitespace(texts)


def tokenize(texts: pa.Array | pa.ChunkedArray) -> pa.ListArray:
    """The tokens of each text (a list per text), normalised. A text without any is an empty list
    (null: splitting "" would give one empty token)."""
    normalised = normalise(texts)
    empty = pc.equal(pc.binary_length(normalised), 0)
    return pc.utf8_split_whitespace(pc.if_else(empty, pa.scalar(None, normalised.type), normalised))


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that spreads every input bit over the output."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


_POWERS: dict[str, np.ndarray] = {"p": np.ones(1, np.uint64), "inv": np.ones(1, np.uint64)}


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P^k and P^-k for k < n (grown by doubling and kept: every batch needs them)."""
    have = len(_POWERS["p"])
    if have < n:
        size = max(n, 2 * have)
        for key, base in (("p", _P), ("inv", _P_INV)):
            powers = np.full(size, base, np.uint64)
            powers[0] = 1
            with np.errstate(over="ignore"):
                _POWERS[key] = np.cumprod(powers, dtype=np.uint64)
    return _POWERS["p"][:n], _POWERS["inv"][:n]


def string_parts(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, UTF-8 bytes) of a string array without nulls, as numpy views."""
    if strings.offset or strings.null_count:
        strings = pa.concat_arrays([strings])  # a fresh array starts its offsets at its own data
    int64 = pa.types.is_large_string(strings.type)
    _, offsets, data = strings.buffers()
    offsets = np.frombuffer(offsets, np.int64 if int64 else np.int32)[:len(strings) + 1].astype(np.int64)
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offsets, data


def string_hashes(strings: pa.Array) -> np.ndarray:
    """A stable 64-bit hash of each string (no nulls): sum of byte[k] * P^(len-1-k), finalised."""
    offsets, data = string_parts(strings)
    if len(strings) == 0:
        return np.zeros(0, np.uint64)
    data = data[offsets[0]:offsets[-1]]
    offsets = offsets - offsets[0]
    p, inv = _powers(len(data) + 1)
    with np.errstate(over="ignore"):
        prefix = np.zeros(len(data) + 1, np.uint64)
        np.cumsum(data.astype(np.uint64) * inv[:len(data)], out=prefix[1:])
        ends = offsets[1:]
        raw = (prefix[ends] - prefix[offsets[:-1]]) * p[np.maximum(ends - 1, 0)]
        return splitmix64(raw ^ (ends - offsets[:-1]).astype(np.uint64))


@dataclass
class Tokens:
    """The tokens of a batch of texts, flattened: `hashes[k]` of token k, texts' tokens from
    `offsets[d]` to `offsets[d + 1]`, and the tokens themselves (to show a matched n-gram)."""

    hashes: np.ndarray
    offsets: np.ndarray
    words: pa.Array

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def joined(self) -> pa.Array:
        """Each text's tokens joined by single spaces: the normalised text an n-gram index keeps of
        its items, where a run of tokens is a run of words between spaces (tokens hold none)."""
        lists = pa.LargeListArray.from_arrays(pa.array(self.offsets, pa.int64()), self.words)
        return pc.binary_join(lists, pa.scalar(" ", self.words.type))

    def text(self, start: int, length: int) -> str:
        """The normalised n-gram of `length` tokens at `start`: words joined by spaces, CJK
        characters written together."""
        joined = " ".join(self.words[start:start + length].to_pylist())
        return re.sub(r"(?<=[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]) (?=[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff])",
                      "", joined)


def token_hashes(texts: pa.Array | pa.ChunkedArray) -> Tokens:
    """Every text's tokens, hashed: each distinct token of the batch hashed once."""
    lists = tokenize(texts)
    offsets = lists.offsets.to_numpy().astype(np.int64)  # a null list starts and ends where the next starts
    offsets = offsets - offsets[0]
    words = lists.flatten()
    if len(words) == 0:
        return Tokens(np.zeros(0, np.uint64), offsets, words)
    encoded = pc.dictionary_encode(words)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    return Tokens(string_hashes(encoded.dictionary)[indices], offsets, words)


def ngram_hashes(tokens: Tokens, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, hashes) of every run of `length` tokens that lies inside one text: `starts` are
    positions in the flattened tokens. Texts shorter than `length` give none."""
    t = tokens.hashes
    n = len(t)
    if n < length:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    # A run is valid when it ends inside the text it starts in.
    doc_end = np.repeat(tokens.offsets[1:], tokens.lengths())
    starts = np.flatnonzero(np.arange(n) + length <= doc_end)
    return starts, window_hashes(t, starts, length)


def window_hashes(t: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """Hashes of the runs t[s:s + length] for each s of `starts` (all inside t)."""
    p, inv = _powers(len(t) + 1)
    with np.errstate(over="ignore"):
        prefix = np.zeros(len(t) + 1, np.uint64)
        np.cumsum(t * inv[:len(t)], out=prefix[1:])
        ends = starts + length
        raw = (prefix[ends] - prefix[starts]) * p[ends - 1]
        return splitmix64(raw ^ np.uint64(length))


def hash_ngram(words: list[str]) -> int:
    """The hash `ngram_hashes` gives the run of these (already normalised) tokens, computed
    independently of the batch machinery: tests use it to check the vectorised path."""
    def token_hash(word: str) -> int:
        h = 0
        for b in word.encode():
            h = (h * int(_P) + b) & _MASK64
        return int(splitmix64(np.array([h ^ len(word.encode())], np.uint64))[0])

    h = 0
    for word in words:
        h = (h * int(_P) + token_hash(word)) & _MASK64
    return int(splitmix64(np.array([h ^ len(words)], np.uint64))[0])
