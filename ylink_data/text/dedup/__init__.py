"""Near-duplicate detection: MinHash signatures over word or character shingles, vectorised over
batches with NumPy and bit-compatible with datasketch (`minhash`); LSH bands and clusters in memory
(`lsh.near_duplicates`, for notebooks) and out of core (`components`, for the `minhash_dedup` op)."""
from ylink_data.text.dedup.lsh import band_keys, near_duplicates
from ylink_data.text.dedup.minhash import (CHAR_NGRAM, DEFAULT_NUM_PERM, DEFAULT_SEED, DEFAULT_THRESHOLD, WORD_NGRAM,
                      estimate_jaccard, from_datasketch, hash32, is_empty, lsh_params, normalize,
                      permutations, shingle_hashes, shingle_unit, shingles, signatures,
                      signatures_from_hashes, to_datasketch)

__all__ = [
    "band_keys", "near_duplicates",
    "CHAR_NGRAM", "DEFAULT_NUM_PERM", "DEFAULT_SEED", "DEFAULT_THRESHOLD", "WORD_NGRAM",
    "estimate_jaccard", "from_datasketch", "hash32", "is_empty", "lsh_params", "normalize",
    "permutations", "shingle_hashes", "shingle_unit", "shingles", "signatures",
    "signatures_from_hashes", "to_datasketch",
]
