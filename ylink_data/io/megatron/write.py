"""A run's token ids as Megatron-LM indexed datasets: one `.bin`/`.idx` pair per Parquet shard, and
the `megatron` section of the manifest that lists them (read back by `manifest.read_manifest`):

    "megatron": {"dtype": "uint16", "tokenizer": {...} or null,
                 "files": [{"prefix": "megatron/part-00000", "documents": N, "tokens": T,
                            "bin": {"path": "megatron/part-00000.bin", "bytes": B, "sha256": "..."},
                            "idx": {"path": "megatron/part-00000.idx", "bytes": B, "sha256": "..."}}]}
"""
from __future__ import annotations

from typing import Any

import fsspec
import numpy as np
import pyarrow as pa

from ylink_data.core.storage import HashingWriter, atomic_write, join
from ylink_data.text.tokens.encode import flat_ids
from ylink_data.io.megatron.indexed import index_bytes, write_bin


def write_pair(fs: fsspec.AbstractFileSystem, root: str, prefix: str, token_ids: pa.Array | pa.ChunkedArray,
               dtype: str) -> dict[str, Any]:
    """Write `root/prefix`.bin and .idx holding one document per row of `token_ids`; returns the
    pair's entry for the manifest's megatron files (paths relative to `root`)."""
    ids, counts = flat_ids(token_ids)
    if ids.size and int(ids.max()) > np.iinfo(dtype).max:
        raise ValueError(f"token id {int(ids.max())} does not fit {dtype}")
    entry: dict[str, Any] = {"prefix": prefix, "documents": int(len(counts)), "tokens": int(counts.sum())}
    for kind, write in (("bin", lambda out: write_bin(out, ids, dtype)),
                        ("idx", lambda out: out.write(index_bytes(counts, dtype)))):
        with atomic_write(fs, join(root, f"{prefix}.{kind}")) as raw:
            out = HashingWriter(raw)
            write(out)
        entry[kind] = {"path": f"{prefix}.{kind}", "bytes": out.bytes, "sha256": out.sha256.hexdigest()}
    return entry


def megatron_section(files: list[dict[str, Any]], dtype: str, tokenizer: dict | None = None) -> dict[str, Any]:
    """The manifest's `megatron` section for these pairs (`write_pair`'s entries)."""
    return {"dtype": dtype, "tokenizer": tokenizer, "tokens": sum(f["tokens"] for f in files),
            "documents": sum(f["documents"] for f in files), "files": files}


def data_path_args(files: list[dict[str, Any]], base: str = "") -> str:
    """Megatron-LM's weighted `--data-path` (for `--data-args-path`): "TOKENS PREFIX ..." per pair,
    prefixes under `base` (the run folder as training reads it); pairs without tokens left out."""
    return " ".join(f"{f['tokens']} {join(base, f['prefix']) if base else f['prefix']}"
                    for f in files if f["tokens"]) + "\n"


def megatron_dtype(choice: str, token_dtype: str, max_id: int | None = None) -> str:
    """The .bin dtype for `choice` ("auto", "uint16", "int32") of ids whose narrowest type is
    `token_dtype` (`LoadedTokenizer.dtype`, or a `token_ids` column's value type), the largest of them
    `max_id` where known (a tokenizer's). Megatron's .idx has no uint32
    (megatron.core.datasets.indexed_dataset.DType): wider ids are int32, as Megatron's own
    preprocessing writes them, and ids past int32 cannot be written at all."""
    if choice == "uint16" and token_dtype != "uint16":
        raise ValueError(f"dtype uint16 cannot hold these token ids ({token_dtype}): use auto or int32")
    chosen = ("uint16" if token_dtype == "uint16" else "int32") if choice == "auto" else choice
    if max_id is not None and max_id > np.iinfo(chosen).max:
        raise ValueError(f"token id {max_id:,} does not fit {chosen}, the widest id type of Megatron's .idx")
    return chosen
