"""Token ids as Arrow columns: `token_ids` (list<uint16> when the tokenizer's largest id fits, else list<uint32>)
and `num_tokens` (int32), each document's ids exactly `Tokenizer.encode(text).ids`, followed by the
end-of-document id when one is given."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ylink_data.text.tokens.load import LoadedTokenizer

TOKEN_IDS = "token_ids"
NUM_TOKENS = "num_tokens"


def encode_texts(tok: LoadedTokenizer, texts: list[str], append_eod: bool = True) -> tuple[pa.Array, pa.Array]:
    """(`token_ids`, `num_tokens`) of `texts`, one row each. The ids come from `encode_batch_fast`
    (the same ids as `encode`, without offsets; threads per the tokenizers library's own
    RAYON_NUM_THREADS) and go into one flat NumPy array: no Python list per document."""
    eod = tok.eod_id if append_eod else None
    encodings = tok.tokenizer.encode_batch_fast(texts) if texts else []
    return ids_to_arrow([e.ids for e in encodings], tok.dtype, eod)


def ids_to_arrow(ids: list[list[int]], dtype: str, eod: int | None = None) -> tuple[pa.Array, pa.Array]:
    """Lists of ids as (`token_ids`, `num_tokens`) arrays; `eod`, when given, ends every list."""
    extra = 0 if eod is None else 1
    counts = np.fromiter((len(x) + extra for x in ids), dtype=np.int32, count=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=dtype)
    for i, x in enumerate(ids):
        start = offsets[i]
        flat[start:start + len(x)] = x
    if eod is not None:
        flat[offsets[1:] - 1] = eod
    if offsets[-1] > np.iinfo(np.int32).max:  # past a list array's 32-bit offsets
        token_ids = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat))
    else:
        token_ids = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat))
    return token_ids, pa.array(counts)


def flat_ids(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A `token_ids` column as (all ids in one array, per-row counts), without copying per row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise ValueError("token_ids has nulls: every row must be tokenized")
    offsets = column.offsets.to_numpy()
    values = column.values.to_numpy(zero_copy_only=False)[offsets[0]:offsets[-1]] if len(column) else np.empty(0, np.uint32)
    return values, np.diff(offsets).astype(np.int64)
