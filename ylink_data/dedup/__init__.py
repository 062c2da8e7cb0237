"""Near-duplicate detection: MinHash signatures over word or character shingles, vectorised over
batches with NumPy and bit-compatible with datasketch (see `minhash`)."""
from .minhash import (CHAR_NGRAM, DEFAULT_NUM_PERM, DEFAULT_SEED, DEFAULT_THRESHOLD, WORD_NGRAM,
                      estimate_jaccard, from_datasketch, hash32, is_empty, lsh_params, normalize,
                      permutations, shingle_hashes, shingle_unit, shingles, signatures,
                      signatures_from_hashes, to_datasketch)

__all__ = [
    "CHAR_NGRAM", "DEFAULT_NUM_PERM", "DEFAULT_SEED", "DEFAULT_THRESHOLD", "WORD_NGRAM",
    "estimate_jaccard", "from_datasketch", "hash32", "is_empty", "lsh_params", "normalize",
    "permutations", "shingle_hashes", "shingle_unit", "shingles", "signatures",
    "signatures_from_hashes", "to_datasketch",
]
