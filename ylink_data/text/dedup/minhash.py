"""MinHash signatures for near-duplicate detection, vectorised over batches of documents with NumPy.

**Shingles.** A document's text is normalised (below), then cut into shingles:

- *word* shingles (default for every language but Chinese and Japanese): the normalised text's
  words (runs of letters, marks and digits) in overlapping n-grams of `WORD_NGRAM = 5` words,
  written as the words joined by one space. Five words is FineWeb's choice (datatrove's
  `MinhashConfig.n_grams = 5`).
- *character* shingles (languages `zh*` and `ja*`, which do not separate words by spaces): the
  normalised text with every separator removed, in overlapping n-grams of `CHAR_NGRAM = 5`
  characters. A Chinese word averages about 1.5-1.7 characters, so 5 characters cover about 3 words,
  and one edited character changes at most 5 shingles, as one edited word does in English. Measured
  on THUCNews (498 pairs of different articles of the same category, exact Jaccard of shingle sets):
  n=3 gives median 0.004 and 99th percentile 0.044 between unrelated articles, n=5 gives 0.000 and
  0.017, n=8 0.000 and 0.010; the one real near-duplicate pair among them scores 0.81, 0.77 and 0.74.
  Five is where background similarity has all but vanished while near-duplicates keep most of theirs.
  Segmenting into words (jieba) first would cost far more than the whole signature (and its output
  differs between jieba versions).

  `unit="word"` or `unit="char"` forces one kind for every document, whatever its language.
- A document with fewer words (characters) than the n-gram size but at least one gets a single
  shingle, all of it, so short documents are still compared (as text-dedup's `ngrams` does);
  a document with none (empty, or punctuation only) gets no shingle and an *empty* signature: every
  value is the maximum (2**32 - 1), the value datasketch's `MinHash.is_empty` tests for. `is_empty`
  flags them; two empty documents must not be called duplicates.

**Normalisation** (close to datatrove's `simplify_text`, character by character so that it can be
done with one table lookup): each character that is a Unicode letter (L*), mark (M*) or number (N*)
is kept and lowercased (`str.lower` of the character, kept as it is when that gives more than one
character, e.g. "İ"); every other character (punctuation, symbols, whitespace, controls) is a
separator; runs of separators become one space and the ends are stripped. Unlike `simplify_text`,
digits, weekdays and months are not replaced and diacritics are kept. `normalize(text)` returns it.

**Shingle hashes.** Each shingle, as a string, is hashed to 32 bits by `hash32`:
``fmix64(sum(ord(s[k]) * B**k) mod 2**64) >> 32``, a polynomial hash of its code points with the
fixed odd base `B = 0x9E3779B97F4A7C15` followed by MurmurHash3's 64-bit finalizer, keeping the high
32 bits. It is seeded by constants, never by Python's `hash()`, so it is the same in every process
and on every machine. Because a polynomial hash of a substring is a difference of prefix sums, all
shingle hashes of a batch are computed with a few array operations (a cumulative sum over the
batch's code points, then one subtraction and one multiplication per shingle), without building any
shingle string. `hashfunc="sha1"` uses datasketch's default 32-bit hash instead (SHA-1 of the
shingle's UTF-8 bytes, first 4 bytes little-endian): slower (one Python call per shingle), but the
signatures then equal datasketch's with its default `hashfunc`.

A polynomial hash modulo 2**64 is not a universal hash (adversarial inputs such as Thue-Morse
strings collide for every base); on natural text its collisions are rarer than the unavoidable
birthday collisions of any 32-bit shingle hash, which is what datasketch's 32-bit schemes use too.

**Permutations and compatibility.** Signatures use datasketch's permutation schemes, bit for bit:

- ``scheme="affine32"`` (default; datasketch's default since 2.0): ``a * fmix32(h) + b mod 2**32``
  with ``a`` odd, ``a`` and ``b`` drawn from ``np.random.RandomState(seed)`` as datasketch draws
  them; values are uint32.
- ``scheme="legacy"`` (datasketch before 2.0): ``((a * h + b) mod 2**64 mod (2**61 - 1)) & (2**32 -
  1)``, computed in uint64 exactly as datasketch computes it (``a * h`` wraps around 2**64 in
  datasketch too, so the same NumPy expression gives the same bits); values are uint64.

The property, tested in ``tests/test_minhash_signatures.py``: for every document,
``signatures([text], [lang], num_perm=P, seed=S, scheme=X)[0]`` equals the ``hashvalues`` of
``datasketch.MinHash(num_perm=P, seed=S, scheme=X, hashfunc=hash32)`` after
``update_batch(shingles(text, lang))`` (with ``hashfunc="sha1"``: the default ``hashfunc`` after
``update_batch([s.encode() for s in shingles(text, lang)])``). `to_datasketch` and
`from_datasketch` convert to and from `datasketch.LeanMinHash`, so signatures can go into a
`datasketch.MinHashLSH` or come from one. `lsh_params` is datasketch's `optimal_param`.
"""
from __future__ import annotations

import hashlib
import re
import struct
import threading
import unicodedata
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np

from ylink_data.text.transform.script import is_unspaced

__all__ = [
    "CHAR_NGRAM", "DEFAULT_NUM_PERM", "DEFAULT_SEED", "DEFAULT_THRESHOLD", "WORD_NGRAM",
    "estimate_jaccard", "from_datasketch", "hash32", "is_empty", "lsh_params", "normalize",
    "permutations", "sha1_hash32", "shingle_hashes", "shingle_unit", "shingles", "signatures",
    "signatures_from_hashes", "to_datasketch",
]

WORD_NGRAM = 5
CHAR_NGRAM = 5
DEFAULT_NUM_PERM = 128
DEFAULT_SEED = 1
DEFAULT_THRESHOLD = 0.8
SCHEMES = ("affine32", "legacy")
HASHFUNCS = ("poly", "sha1")


_M64 = (1 << 64) - 1
_BASE = 0x9E3779B97F4A7C15                      # odd, so invertible modulo 2**64
_BASE_INV = pow(_BASE, -1, 1 << 64)
_MERSENNE = np.uint64((1 << 61) - 1)
_MAX32 = np.uint32(0xFFFFFFFF)
_SPACE = 32

# Shingles per block when applying the permutations: a (num_perm x block) uint32 matrix of 4 MB at
# 128 permutations. Measured on 1,336-shingle documents (2 MB L2, 32 MB L3): 8,192 is 2.4x faster
# than 1,024 (fewer, longer NumPy loops) and 2.8x faster than 65,536 (out of cache).
_BLOCK_SHINGLES = 8192
# Code points normalised and hashed at once. Measured: 65,536 (about 20 English or 40 Chinese
# documents) is 2.1x faster than 2**20, whose temporaries fall out of cache.
_GROUP_CODEPOINTS = 1 << 16


# ----------------------------------------------------------------------------- normalisation


def _norm_char(ch: str) -> str:
    """One character, normalised: itself lowercased if it is a letter, mark or number, else " "."""
    if unicodedata.category(ch)[0] not in "LMN":
        return " "
    low = ch.lower()
    return low if len(low) == 1 else ch


@lru_cache(maxsize=1)
def _bmp_table() -> np.ndarray:
    """`_norm_char` as a table over the Basic Multilingual Plane: code point -> normalised code
    point, 0 for a separator."""
    table = np.zeros(0x10000, dtype=np.uint32)
    for cp in range(0x10000):
        if 0xD800 <= cp <= 0xDFFF:      # surrogates: not characters
            continue
        out = _norm_char(chr(cp))
        table[cp] = 0 if out == " " else ord(out)
    return table


def _normalise_codepoints(cps: np.ndarray) -> np.ndarray:
    """Code points (uint32) -> normalised code points, 0 where a separator is."""
    table = _bmp_table()
    astral = cps > 0xFFFF
    out = table[np.minimum(cps, 0xFFFF)]
    if astral.any():                # rare (emoji, CJK extension B...): each distinct one in Python
        uniq, inverse = np.unique(cps[astral], return_inverse=True)
        mapped = np.array([0 if (c := _norm_char(chr(int(u)))) == " " else ord(c) for u in uniq],
                          dtype=np.uint32)
        out[astral] = mapped[inverse]
    return out


def _codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def normalize(text: str) -> str:
    """The text shingles are cut from: letters, marks and numbers lowercased, every run of other
    characters one space, no space at either end."""
    mapped = _normalise_codepoints(_codepoints(text))
    mapped[mapped == 0] = _SPACE
    return _SPACES.sub(" ", mapped.tobytes().decode("utf-32-le", "surrogatepass")).strip(" ")


_SPACES = re.compile(" +")


# ----------------------------------------------------------------------------- shingles


def shingle_unit(lang: str | None, unit: str | None = None) -> str:
    """"char" for the languages written without spaces between words (`zh`, `zh-Hant`, `ja_JP`, `jpn`,
    `yue`...: `transform.script.is_unspaced`, the quality rules' mapping too), "word" for any other
    language or none; `unit` ("word" or "char"), when given, wins."""
    if unit is not None:
        if unit not in ("word", "char"):
            raise ValueError(f"unit must be 'word' or 'char', not {unit!r}")
        return unit
    return "char" if is_unspaced(lang) else "word"


def _ngram(unit: str, ngram: int | None) -> int:
    n = (WORD_NGRAM if unit == "word" else CHAR_NGRAM) if ngram is None else int(ngram)
    if n < 1:
        raise ValueError(f"ngram must be at least 1, not {n}")
    return n


def shingles(text: str, lang: str | None = None, *, unit: str | None = None,
             ngram: int | None = None) -> list[str]:
    """The document's shingles as strings, in order, repeats included (a signature is over their
    set). Word shingles are `ngram` words joined by one space; character shingles are `ngram`
    consecutive characters of the normalised text without its spaces. A document shorter than
    `ngram` units gives one shingle, all of it; one with no letters or digits gives none.
    This is the reference that `signatures` computes without building any string."""
    u = shingle_unit(lang, unit)
    n = _ngram(u, ngram)
    norm = normalize(text)
    if u == "word":
        words = norm.split(" ") if norm else []
        if 0 < len(words) < n:
            return [" ".join(words)]
        return [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    chars = norm.replace(" ", "")
    if 0 < len(chars) < n:
        return [chars]
    return [chars[i:i + n] for i in range(len(chars) - n + 1)]


# ----------------------------------------------------------------------------- shingle hashing


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


def _fmix64_int(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M64
    return h ^ (h >> 33)


def hash32(shingle: str | bytes) -> int:
    """The 32-bit hash of one shingle string (pure Python; `signatures` computes the same values
    vectorised). Pass it as `hashfunc` to `datasketch.MinHash` to get our signatures from datasketch.
    Bytes are taken as UTF-8."""
    if isinstance(shingle, (bytes, bytearray, memoryview)):
        shingle = bytes(shingle).decode("utf-8", "surrogatepass")
    acc, power = 0, 1
    for ch in shingle:
        acc = (acc + ord(ch) * power) & _M64
        power = (power * _BASE) & _M64
    return _fmix64_int(acc) >> 32


def sha1_hash32(shingle: str | bytes) -> int:
    """datasketch's default 32-bit hash (`datasketch.hashfunc.sha1_hash32`) of the UTF-8 bytes."""
    if isinstance(shingle, str):
        shingle = shingle.encode("utf-8", "surrogatepass")
    return struct.unpack("<I", hashlib.sha1(shingle).digest()[:4])[0]


class _Powers:
    """B**k and B**-k modulo 2**64 for k < size, grown on demand, shared by the threads of a process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pow = np.ones(1, dtype=np.uint64)
        self.inv = np.ones(1, dtype=np.uint64)

    def get(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        if size > len(self.pow):
            with self.lock:
                if size > len(self.pow):
                    n = max(size, 2 * len(self.pow), 1 << 16)
                    pw = np.full(n, _BASE, dtype=np.uint64)
                    pw[0] = 1
                    inv = np.full(n, _BASE_INV, dtype=np.uint64)
                    inv[0] = 1
                    # Integer multiplication wraps modulo 2**64, which is the arithmetic wanted.
                    self.pow, self.inv = np.multiply.accumulate(pw), np.multiply.accumulate(inv)
        return self.pow, self.inv


_POWERS = _Powers()


def _group_shingle_hashes(texts: Sequence[str], unit: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Polynomial shingle hashes (uint32) of a group of texts of one unit, and per-document counts."""
    ndocs = len(texts)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=ndocs)
    # Documents joined with one separator between them, so no word runs across two documents.
    starts = np.zeros(ndocs, dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    mapped = _normalise_codepoints(_codepoints(" ".join(texts)))
    if not len(mapped):
        return np.empty(0, dtype=np.uint32), np.zeros(ndocs, dtype=np.int64)
    keep_char = mapped != 0
    if unit == "word":
        prev = np.empty_like(keep_char)
        prev[0] = False
        prev[1:] = keep_char[:-1]
        tok_start = np.flatnonzero(keep_char & ~prev)
        nxt = np.empty_like(keep_char)
        nxt[-1:] = False
        nxt[:-1] = keep_char[1:]
        tok_end = np.flatnonzero(keep_char & ~nxt) + 1
        # Collapse every run of separators to one space: keep a separator only right after a word.
        keep = keep_char | prev
        stream = mapped[keep]
        np.maximum(stream, _SPACE, out=stream)  # separators (0) become spaces: every kept code point is >= 48
        newpos = np.cumsum(keep) - 1            # original index -> index in `stream`
        u_start = newpos[tok_start]
        u_end = newpos[tok_end - 1] + 1
        unit_doc = np.searchsorted(starts, tok_start, side="right") - 1
    else:
        stream = mapped[keep_char]
        u_start = np.arange(len(stream), dtype=np.int64)
        u_end = u_start + 1
        unit_doc = np.searchsorted(starts, np.flatnonzero(keep_char), side="right") - 1
    units_per_doc = np.bincount(unit_doc, minlength=ndocs)
    first_unit = np.zeros(ndocs, dtype=np.int64)
    np.cumsum(units_per_doc[:-1], out=first_unit[1:])
    last_unit = first_unit + units_per_doc - 1
    # A shingle starts at every unit whose n-gram ends inside its document, and at the first unit
    # of a document shorter than n (that shingle is the whole document).
    g = np.arange(len(unit_doc), dtype=np.int64)
    last_of = last_unit[unit_doc]
    ok = g + (n - 1) <= last_of
    short = units_per_doc < n
    ok[first_unit[short & (units_per_doc > 0)]] = True
    s_unit = g[ok]
    e_unit = np.minimum(s_unit + (n - 1), last_of[ok])
    counts = np.bincount(unit_doc[ok], minlength=ndocs).astype(np.int64)
    span_start = u_start[s_unit]
    span_end = u_end[e_unit]
    # Prefix sums of c_k * B**k; the hash of stream[s:e] is (Q[e] - Q[s]) * B**-s.
    pw, inv = _POWERS.get(len(stream) + 1)
    prefix = np.zeros(len(stream) + 1, dtype=np.uint64)
    np.multiply(stream, pw[:len(stream)], out=prefix[1:], casting="unsafe")
    np.cumsum(prefix[1:], out=prefix[1:])
    h = prefix[span_end] - prefix[span_start]
    h *= inv[span_start]
    h = _fmix64(h)
    return (h >> np.uint64(32)).astype(np.uint32), counts


def _groups(lengths: np.ndarray, budget: int) -> Iterable[tuple[int, int]]:
    """Consecutive [start, end) runs of documents of about `budget` code points (at least one each)."""
    ends = np.cumsum(lengths + 1)
    start = 0
    total = len(lengths)
    while start < total:
        base = ends[start - 1] if start else 0
        end = int(np.searchsorted(ends, base + budget, side="right"))
        end = min(max(end, start + 1), total)
        yield start, end
        start = end


def _units(texts: Sequence[str], langs, unit: str | None) -> list[str]:
    if langs is None or isinstance(langs, str):
        return [shingle_unit(langs, unit)] * len(texts)
    if len(langs) != len(texts):
        raise ValueError(f"{len(langs)} languages for {len(texts)} texts")
    cache: dict = {}
    return [cache[l] if l in cache else cache.setdefault(l, shingle_unit(l, unit)) for l in langs]


def shingle_hashes(texts: Sequence[str], langs: Sequence[str | None] | str | None = None, *,
                   unit: str | None = None, word_ngram: int | None = None, char_ngram: int | None = None,
                   hashfunc: str = "poly") -> tuple[np.ndarray, np.ndarray]:
    """The 32-bit hashes of every document's shingles, concatenated in document order (uint32),
    and offsets (int64, length n_docs + 1): document i's are `hashes[offsets[i]:offsets[i+1]]`,
    in the order `shingles` lists them, repeats included. `langs`: one code per text, or one for all."""
    if hashfunc not in HASHFUNCS:
        raise ValueError(f"hashfunc must be one of {HASHFUNCS}, not {hashfunc!r}")
    texts = list(texts)
    units = _units(texts, langs, unit)
    ngrams = {"word": _ngram("word", word_ngram), "char": _ngram("char", char_ngram)}
    ndocs = len(texts)
    counts = np.zeros(ndocs, dtype=np.int64)
    parts: list[tuple[np.ndarray, np.ndarray]] = []     # (doc indices, hashes in their order)
    for u in ("word", "char"):
        idx = np.array([i for i, x in enumerate(units) if x == u], dtype=np.int64)
        if not len(idx):
            continue
        sub = [texts[i] for i in idx] if len(idx) < ndocs else texts
        if hashfunc == "sha1":
            for i, t in zip(idx, sub):
                hs = np.fromiter((sha1_hash32(s) for s in shingles(t, unit=u, ngram=ngrams[u])),
                                 dtype=np.uint32)
                counts[i] = len(hs)
                parts.append((np.array([i]), hs))
            continue
        lengths = np.fromiter((len(t) for t in sub), dtype=np.int64, count=len(sub))
        for s, e in _groups(lengths, _GROUP_CODEPOINTS):
            hs, c = _group_shingle_hashes(sub[s:e], u, ngrams[u])
            counts[idx[s:e]] = c
            parts.append((idx[s:e], hs))
    offsets = np.zeros(ndocs + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint32)
    for idx, hs in parts:
        # Each part covers documents in increasing order, and its hashes are in that order.
        if len(idx) == 1:
            out[offsets[idx[0]]:offsets[idx[0] + 1]] = hs
            continue
        if len(idx) and (idx[-1] - idx[0] + 1 == len(idx)):       # a contiguous run of documents
            out[offsets[idx[0]]:offsets[idx[-1] + 1]] = hs
            continue
        pos = np.repeat(offsets[idx] - np.concatenate(([0], np.cumsum(counts[idx])[:-1])), counts[idx])
        out[pos + np.arange(len(hs))] = hs
    return out, offsets


# ----------------------------------------------------------------------------- permutations


@lru_cache(maxsize=32)
def permutations(num_perm: int = DEFAULT_NUM_PERM, seed: int = DEFAULT_SEED,
                 scheme: str = "affine32") -> tuple[np.ndarray, np.ndarray]:
    """The permutation parameters (a, b) datasketch's `MinHash(num_perm, seed, scheme=...)` draws:
    the same calls on `np.random.RandomState(seed)` in the same order."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, not {scheme!r}")
    if num_perm < 1:
        raise ValueError("num_perm must be positive")
    gen = np.random.RandomState(seed)
    if scheme == "legacy":
        ab = np.array([(gen.randint(1, _MERSENNE, dtype=np.uint64), gen.randint(0, _MERSENNE, dtype=np.uint64))
                       for _ in range(num_perm)], dtype=np.uint64).T
        a, b = ab[0].copy(), ab[1].copy()
    else:
        a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    a.flags.writeable = False
    b.flags.writeable = False
    return a, b


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def signatures_from_hashes(hashes: np.ndarray, offsets: np.ndarray, num_perm: int = DEFAULT_NUM_PERM,
                           seed: int = DEFAULT_SEED, scheme: str = "affine32") -> np.ndarray:
    """MinHash signatures from 32-bit shingle hashes laid out as `shingle_hashes` returns them:
    (n_docs, num_perm), uint32 for "affine32", uint64 for "legacy"; a document without shingles
    gets the empty signature (every value 2**32 - 1)."""
    a, b = permutations(num_perm, seed, scheme)
    hashes = np.asarray(hashes, dtype=np.uint32)
    offsets = np.asarray(offsets, dtype=np.int64)
    ndocs = len(offsets) - 1
    legacy = scheme == "legacy"
    dtype = np.uint64 if legacy else np.uint32
    sig = np.full((ndocs, num_perm), 0xFFFFFFFF, dtype=dtype)
    counts = np.diff(offsets)
    nonempty = counts > 0
    block = max(1, _BLOCK_SHINGLES * 128 // num_perm)
    if legacy:
        block = max(1, block // 2)
    hv_all = hashes.astype(np.uint64) if legacy else _fmix32(hashes)
    # Permutations down the rows, shingles along them: every NumPy inner loop runs over a long
    # contiguous row (one permutation applied to a block of shingles), which is 5-7x faster than
    # the (shingles x permutations) layout whose inner loops are only num_perm long.
    a_col, b_col = a[:, None], b[:, None]
    buf = np.empty(block * num_perm, dtype=dtype)
    doc = 0
    while doc < ndocs:
        end = int(np.searchsorted(offsets, offsets[doc] + block, side="right")) - 1
        end = min(max(end, doc + 1), ndocs)
        lo, hi = int(offsets[doc]), int(offsets[end])
        if hi > lo:
            m = buf[:num_perm * (hi - lo)].reshape(num_perm, hi - lo) if hi - lo <= block \
                else np.empty((num_perm, hi - lo), dtype=dtype)
            np.multiply(a_col, hv_all[None, lo:hi], out=m)
            m += b_col
            if legacy:
                np.remainder(m, _MERSENNE, out=m)
                m &= np.uint64(0xFFFFFFFF)
            sel = nonempty[doc:end]
            firsts = offsets[doc:end][sel] - lo
            sig[doc:end][sel] = np.minimum.reduceat(m, firsts, axis=1).T
        doc = end
    return sig


def signatures(texts: Sequence[str], langs: Sequence[str | None] | str | None = None, *,
               num_perm: int = DEFAULT_NUM_PERM, seed: int = DEFAULT_SEED, scheme: str = "affine32",
               unit: str | None = None, word_ngram: int | None = None, char_ngram: int | None = None,
               hashfunc: str = "poly") -> np.ndarray:
    """MinHash signatures of a batch of texts: (len(texts), num_perm), uint32 for the default
    "affine32" scheme (uint64 for "legacy"), row i equal to datasketch's `MinHash(num_perm, seed,
    scheme=scheme, hashfunc=hash32)` updated with `shingles(texts[i], langs[i])` (module docstring).

    `langs`: one language code per text (None: word shingles), or one code for all; `unit` forces
    "word" or "char" shingles; `word_ngram`/`char_ngram` override the n-gram sizes (5 and 5);
    `hashfunc="sha1"` hashes shingles as datasketch does by default (slow). Documents without any
    shingle get the empty signature (`is_empty`)."""
    hashes, offsets = shingle_hashes(texts, langs, unit=unit, word_ngram=word_ngram,
                                     char_ngram=char_ngram, hashfunc=hashfunc)
    return signatures_from_hashes(hashes, offsets, num_perm=num_perm, seed=seed, scheme=scheme)


# ----------------------------------------------------------------------------- using signatures


def is_empty(sigs: np.ndarray) -> np.ndarray | bool:
    """True where a signature is the empty one (a document without shingles): every value the
    maximum, as datasketch's `MinHash.is_empty` tests. One signature -> bool; a matrix -> a row mask."""
    sigs = np.asarray(sigs)
    full = sigs == 0xFFFFFFFF
    return bool(full.all()) if sigs.ndim == 1 else full.all(axis=-1)


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray | float:
    """The fraction of positions where two signatures agree: the MinHash estimate of the Jaccard
    similarity of their shingle sets (its standard error is sqrt(J(1-J)/num_perm)). Works row by row
    on matrices of the same shape. Two empty signatures agree everywhere (1.0), as in datasketch;
    check `is_empty` first."""
    sig_a, sig_b = np.asarray(sig_a), np.asarray(sig_b)
    if sig_a.shape[-1] != sig_b.shape[-1]:
        raise ValueError(f"signatures of different lengths: {sig_a.shape[-1]} and {sig_b.shape[-1]}")
    agree = np.count_nonzero(sig_a == sig_b, axis=-1) / sig_a.shape[-1]
    return float(agree) if np.ndim(agree) == 0 else agree


def lsh_params(threshold: float = DEFAULT_THRESHOLD, num_perm: int = DEFAULT_NUM_PERM,
               false_positive_weight: float = 0.5, false_negative_weight: float = 0.5, *,
               bands: int | None = None, rows: int | None = None) -> tuple[int, int]:
    """(bands, rows) for LSH banding of `num_perm`-value signatures at a Jaccard `threshold`: the
    pair that minimises the weighted false-positive and false-negative probabilities, computed by
    datasketch's `optimal_param` (so equal to what `MinHashLSH(threshold, num_perm, weights)` uses).
    `bands` and `rows`, when both given, override it (checked: bands * rows <= num_perm)."""
    if bands is not None or rows is not None:
        if bands is None or rows is None:
            raise ValueError("give both bands and rows, or neither")
        if bands < 1 or rows < 1 or bands * rows > num_perm:
            raise ValueError(f"bands x rows = {bands} x {rows} does not fit {num_perm} permutations")
        return int(bands), int(rows)
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], not {threshold}")
    if abs(false_positive_weight + false_negative_weight - 1.0) > 1e-9:
        raise ValueError("false_positive_weight + false_negative_weight must be 1 (as in datasketch)")
    return _optimal_param(float(threshold), int(num_perm), float(false_positive_weight),
                          float(false_negative_weight))


@lru_cache(maxsize=64)
def _optimal_param(threshold: float, num_perm: int, fp_weight: float, fn_weight: float) -> tuple[int, int]:
    """datasketch's `lsh._optimal_param`, the same search in the same order, with its integrals
    computed exactly: P(candidate | s) = 1 - (1 - s**r)**b is a polynomial of degree b*r <= num_perm,
    which Gauss-Legendre quadrature with num_perm // 2 + 1 nodes integrates without error (where
    datasketch calls scipy's adaptive `quad` once per (b, r): 0.5 s at 128 permutations, plus 0.3 s
    to import scipy.integrate, in every process that builds the op). Equal to datasketch's choice
    for every threshold, weight and size tested (tests/test_minhash_lsh_params.py)."""
    nodes, weights = np.polynomial.legendre.leggauss(num_perm // 2 + 1)
    # The nodes mapped onto [0, threshold] and [threshold, 1], with the interval's half-length.
    below, half_below = (nodes + 1) * threshold / 2, threshold / 2
    above, half_above = threshold + (nodes + 1) * (1 - threshold) / 2, (1 - threshold) / 2
    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        r = np.arange(1, num_perm // b + 1, dtype=np.float64)[:, None]
        fp = half_below * ((1 - (1 - below ** r) ** b) @ weights)
        fn = half_above * (((1 - above ** r) ** b) @ weights)
        error = fp * fp_weight + fn * fn_weight
        i = int(np.argmin(error))  # the first of equal minima, as datasketch's strict `<` keeps
        if error[i] < best:
            best, opt = float(error[i]), (b, i + 1)
    return opt


def to_datasketch(sig: np.ndarray, seed: int = DEFAULT_SEED, scheme: str = "affine32"):
    """A `datasketch.LeanMinHash` with these hash values (a list of them for a matrix), usable in a
    `datasketch.MinHashLSH` next to datasketch's own MinHash of the same seed and scheme."""
    from datasketch import LeanMinHash

    sig = np.asarray(sig)
    if sig.ndim == 2:
        return [LeanMinHash(seed=seed, hashvalues=row, scheme=scheme) for row in sig]
    return LeanMinHash(seed=seed, hashvalues=sig, scheme=scheme)


def from_datasketch(m) -> np.ndarray:
    """The hash values of a `datasketch.MinHash` or `LeanMinHash` (of either scheme) as an array,
    or a (len, num_perm) matrix for a list of them."""
    if isinstance(m, (list, tuple)):
        return np.stack([from_datasketch(x) for x in m]) if m else np.empty((0, 0), dtype=np.uint32)
    return np.array(m.hashvalues, dtype=np.uint64 if m.scheme == "legacy" else np.uint32)
