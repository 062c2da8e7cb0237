"""Packing tokenized conversations (`sft_tokenize`'s `token_ids` and `loss_mask`) into fixed-length
training sequences, whole conversations only, with their boundaries.

Each packed sequence of `seq_len` tokens holds whole conversations one after another, then padding:
- `input_ids`: the conversations' ids, then `pad_id`;
- `labels`: the id where the loss mask is 1, else -100 (`IGNORE_INDEX`, what PyTorch's cross
  entropy and Hugging Face models ignore); aligned with `input_ids` (the model shifts them, as HF
  causal LMs do: the first token of a conversation is never an answer token, so no label is
  predicted across a boundary);
- `position_ids`: 0, 1, 2... restarting at every conversation (and at the padding);
- `cu_seqlens`: int32 boundaries [0, end of conversation 1, ..., seq_len], flash-attention's
  varlen layout; the padding, when there is some, is a last segment of its own, so attention
  never crosses a conversation's edge.

Which conversations share a sequence is decided greedily and deterministically (`plan_bins`):
`ffd` (first-fit decreasing: longest first, each into the first sequence with room; fewest
sequences) or `in_order` (next-fit: conversations in their order, a new sequence when the next one
does not fit). A conversation longer than `seq_len` is an error: drop or truncate it upstream with
`sft_tokenize`'s `max_tokens`.

`ylink_data.cache.packed.PackedBatches` packs a run's conversations as a training job reads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np
import pyarrow as pa

from ylink_data.text.tokens.encode import TOKEN_IDS

IGNORE_INDEX = -100
LOSS_MASK = "loss_mask"
Strategy = Literal["ffd", "in_order"]


@dataclass
class PackedSequence:
    input_ids: np.ndarray     # (seq_len,) int64
    labels: np.ndarray        # (seq_len,) int64, IGNORE_INDEX outside answer tokens
    position_ids: np.ndarray  # (seq_len,) int64, restarting per conversation
    cu_seqlens: np.ndarray    # int32 segment boundaries, 0 ... seq_len
    members: list[int]        # the packed conversations' indices in the input, in sequence order


def plan_bins(lengths: Sequence[int], seq_len: int, strategy: Strategy = "ffd") -> list[list[int]]:
    """Indices of `lengths` grouped into sequences of at most `seq_len` tokens, each index once;
    members in input order within a sequence, sequences ordered by their first member."""
    for i, n in enumerate(lengths):
        if not 0 < n <= seq_len:
            raise ValueError(f"conversation {i} has {n} tokens, outside 1..seq_len ({seq_len}): set sft_tokenize's "
                             f"max_tokens to at most seq_len")
    if strategy == "in_order":
        bins, used = [], seq_len + 1
        for i, n in enumerate(lengths):
            if used + n > seq_len:
                bins.append([])
                used = 0
            bins[-1].append(i)
            used += n
        return bins
    if strategy != "ffd":
        raise ValueError(f"unknown packing strategy {strategy!r}: ffd or in_order")
    free = np.empty(len(lengths), dtype=np.int64)  # room left in each open sequence
    bins: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fits = np.flatnonzero(free[:len(bins)] >= lengths[i])
        if len(fits):
            b = int(fits[0])
        else:
            b = len(bins)
            bins.append([])
            free[b] = seq_len
        bins[b].append(i)
        free[b] -= lengths[i]
    return sorted((sorted(b) for b in bins), key=lambda b: b[0])


def pack(token_ids: Sequence[np.ndarray], loss_masks: Sequence[np.ndarray], seq_len: int, *,
         strategy: Strategy = "ffd", pad_id: int = 0) -> list[PackedSequence]:
    """Conversations (ids and loss mask of each, same lengths) packed into sequences of `seq_len`."""
    if len(token_ids) != len(loss_masks):
        raise ValueError(f"{len(token_ids)} token lists but {len(loss_masks)} loss masks")
    lengths = [len(x) for x in token_ids]
    for i, (n, m) in enumerate(zip(lengths, loss_masks)):
        if len(m) != n:
            raise ValueError(f"conversation {i}: {n} tokens but a loss mask of {len(m)}")
    return [_sequence(members, token_ids, loss_masks, seq_len, pad_id)
            for members in plan_bins(lengths, seq_len, strategy)]


def _sequence(members: list[int], token_ids, loss_masks, seq_len: int, pad_id: int) -> PackedSequence:
    input_ids = np.full(seq_len, pad_id, dtype=np.int64)
    labels = np.full(seq_len, IGNORE_INDEX, dtype=np.int64)
    position_ids = np.empty(seq_len, dtype=np.int64)
    bounds, at = [0], 0
    for i in members:
        ids, mask = np.asarray(token_ids[i]), np.asarray(loss_masks[i]).astype(bool)
        end = at + len(ids)
        input_ids[at:end] = ids
        labels[at:end][mask] = ids[mask]
        position_ids[at:end] = np.arange(len(ids))
        bounds.append(end)
        at = end
    position_ids[at:] = np.arange(seq_len - at)
    if at < seq_len:
        bounds.append(seq_len)
    return PackedSequence(input_ids, labels, position_ids, np.asarray(bounds, dtype=np.int32), list(members))


def collate(sequences: Sequence[PackedSequence]) -> dict[str, Any]:
    """A batch: `input_ids`, `labels`, `position_ids` as (batch, seq_len) int64; `cu_seqlens` int32
    over the batch flattened to one row (flash-attention's varlen input), `max_seqlen` its longest
    segment."""
    seq_len = len(sequences[0].input_ids)
    cu = [np.zeros(1, np.int32)] + [s.cu_seqlens[1:] + b * seq_len for b, s in enumerate(sequences)]
    cu_seqlens = np.concatenate(cu).astype(np.int32)
    return {"input_ids": np.stack([s.input_ids for s in sequences]),
            "labels": np.stack([s.labels for s in sequences]),
            "position_ids": np.stack([s.position_ids for s in sequences]),
            "cu_seqlens": cu_seqlens, "max_seqlen": int(np.diff(cu_seqlens).max())}


def rows_of(batch: pa.RecordBatch | pa.Table) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The `token_ids` and `loss_mask` of each row of a batch, as NumPy views (no copy per row)."""
    out = []
    for name in (TOKEN_IDS, LOSS_MASK):
        column = batch.column(name)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.null_count:
            raise ValueError(f"{name} has nulls: read a run written by sft_tokenize")
        offsets = column.offsets.to_numpy()
        values = column.values.to_numpy(zero_copy_only=False)
        out.append([values[offsets[i]:offsets[i + 1]] for i in range(len(column))])
    return out[0], out[1]
