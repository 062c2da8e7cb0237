"""Megatron-LM's indexed dataset (`MMapIndexedDataset`, megatron-core's `IndexedDataset`): a `.bin`
file of token ids end to end and an `.idx` file that says where each document starts.

.idx layout (little-endian, as megatron/core/datasets/indexed_dataset.py writes it):
  b"MMIDIDX\\x00\\x00"  version <Q = 1  dtype code <B  sequence count <Q  document count <Q
  sequence lengths   int32[sequence count]    (tokens per sequence)
  sequence pointers  int64[sequence count]    (byte offset of each sequence in .bin)
  document indices   int64[document count]    (0, then the sequence index after each document)
Every document here is one sequence, so document indices are 0..N.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO

import numpy as np

HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
# megatron.core.datasets.indexed_dataset.DType
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}
DTYPES = {code: name for name, code in DTYPE_CODES.items()}


@dataclass
class Index:
    """A parsed .idx: one entry per sequence (= document)."""

    dtype: np.dtype
    lengths: np.ndarray    # int32, tokens per sequence
    pointers: np.ndarray   # int64, byte offset of each sequence in .bin
    documents: np.ndarray  # int64, 0..N

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum(dtype=np.int64))


def index_bytes(lengths: np.ndarray, dtype: str) -> bytes:
    """The .idx file of documents with these token counts, stored back to back as `dtype`."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
        raise ValueError("a document's token count must fit in int32")
    pointers = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1] * np.dtype(dtype).itemsize, out=pointers[1:])
    documents = np.arange(len(lengths) + 1, dtype=np.int64)
    head = HEADER + struct.pack("<QBQQ", VERSION, DTYPE_CODES[dtype], len(lengths), len(documents))
    return b"".join((head, lengths.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(),
                     documents.astype("<i8").tobytes()))


def parse_index(data: bytes | memoryview, where: str = ".idx") -> Index:
    """An .idx file's contents; ValueError naming `where` if it is not one."""
    data = memoryview(data)
    fixed = len(HEADER) + struct.calcsize("<QBQQ")
    if len(data) < fixed or bytes(data[:len(HEADER)]) != HEADER:
        raise ValueError(f"{where} is not a Megatron .idx file (no MMIDIDX header)")
    version, code, sequences, documents = struct.unpack_from("<QBQQ", data, len(HEADER))
    if version != VERSION or code not in DTYPES:
        raise ValueError(f"{where}: version {version} / dtype code {code} is not one this ylink reads")
    need = fixed + sequences * (4 + 8) + documents * 8
    if len(data) != need:
        raise ValueError(f"{where}: {len(data)} bytes where {sequences} sequences and {documents} documents need {need}")
    lengths = np.frombuffer(data, "<i4", sequences, fixed)
    pointers = np.frombuffer(data, "<i8", sequences, fixed + 4 * sequences)
    docs = np.frombuffer(data, "<i8", documents, fixed + 12 * sequences)
    return Index(np.dtype(DTYPES[code]), lengths, pointers, docs)


def write_bin(out: IO[bytes], ids: np.ndarray, dtype: str) -> None:
    """Ids end to end as `dtype` (little-endian), the .bin file's contents for these documents."""
    out.write(np.ascontiguousarray(ids, dtype=np.dtype(dtype).newbyteorder("<")).tobytes())
