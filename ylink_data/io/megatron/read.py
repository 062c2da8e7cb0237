"""A run's Megatron pairs read back: each .idx checked against the manifest that lists it, and the
token ids of any document by position, from a memory-mapped .bin (a remote .bin is first fetched
to a local file, its sha256 verified on the way)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from typing import Any, Iterator

import numpy as np

from ylink_data.core.storage import is_local, join
from ylink_data.io.manifest import ManifestError, MegatronPair, RunFile, RunManifest
from ylink_data.io.megatron.indexed import Index, parse_index

CHUNK = 8 * 2 ** 20


def read_index(manifest: RunManifest, pair: MegatronPair) -> Index:
    """`pair`'s .idx, verified (size, sha256) and consistent with the manifest and its .bin's size;
    a ManifestError naming the file otherwise."""
    url = pair.idx.ref.url
    with _reading(url):
        data = bytes(manifest.fs.cat_file(join(manifest.root, pair.idx.path)))
    _verify(url, pair.idx, len(data), hashlib.sha256(data).hexdigest())
    try:
        index = parse_index(data, url)
    except ValueError as exc:
        raise ManifestError(f"{exc}; refusing the run") from None
    itemsize = index.dtype.itemsize
    if index.dtype.name != manifest.megatron_dtype:
        raise ManifestError(f"{url}: dtype {index.dtype.name}, the manifest says {manifest.megatron_dtype}")
    if len(index.lengths) != pair.documents or index.tokens != pair.tokens:
        raise ManifestError(f"{url}: {len(index.lengths)} documents of {index.tokens} tokens, the manifest says "
                            f"{pair.documents} of {pair.tokens}; refusing the run")
    starts = np.zeros(len(index.lengths), np.int64)
    np.cumsum(index.lengths[:-1], out=starts[1:])
    if not np.array_equal(index.pointers, starts * itemsize) or pair.bin.ref.size != index.tokens * itemsize:
        raise ManifestError(f"{url}: documents are not stored back to back in a .bin of "
                            f"{pair.bin.ref.size} bytes; refusing the run")
    return index


@contextlib.contextmanager
def _reading(url: str) -> Iterator[None]:
    """A file the manifest lists that cannot be read: one line naming it."""
    try:
        yield
    except FileNotFoundError:
        raise ManifestError(f"{url} is listed in the run's manifest but does not exist; refusing the run") from None
    except ManifestError:
        raise
    except Exception as exc:  # noqa: BLE001 -- fsspec backends raise their own types (auth, HTTP...)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ManifestError(f"cannot read {url}: {type(exc).__name__}: {first}") from None


def _verify(url: str, file: RunFile, size: int, sha256: str) -> None:
    if size != file.ref.size or sha256 != file.ref.sha256:
        raise ManifestError(f"{url}: {size} bytes with sha256 {sha256[:12]}..., the manifest says {file.ref.size} "
                            f"with {file.ref.sha256[:12]}...: the file changed since the run was written; "
                            "refusing it")


class BinReader:
    """Token ids of .bin files by (manifest, pair): local files memory-mapped in place (their sizes
    checked by `read_index`), remote ones fetched whole into a temporary folder, sha256 verified,
    then mapped. Close it (or use it as a context manager) to delete the fetched copies."""

    def __init__(self) -> None:
        self._maps: dict[tuple[int, str], np.ndarray] = {}
        self._tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> "BinReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._maps.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def tokens(self, manifest: RunManifest, pair: MegatronPair) -> np.ndarray:
        """The pair's .bin as a read-only array of its dtype."""
        key = (id(manifest), pair.prefix)
        if key not in self._maps:
            dtype = np.dtype(manifest.megatron_dtype).newbyteorder("<")
            path = join(manifest.root, pair.bin.path)
            if not is_local(manifest.fs):
                path = self._fetch(manifest, pair, path)
            # A plain ndarray over the map: slicing a np.memmap costs microseconds per document.
            self._maps[key] = (np.memmap(path, dtype=dtype, mode="r").view(np.ndarray) if pair.bin.ref.size
                               else np.empty(0, dtype))
        return self._maps[key]

    def _fetch(self, manifest: RunManifest, pair: MegatronPair, path: str) -> str:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="ylink-mix-")
        local = os.path.join(self._tmp.name, f"{len(self._maps)}.bin")
        digest, size = hashlib.sha256(), 0
        with _reading(pair.bin.ref.url), manifest.fs.open(path, "rb") as src, open(local, "wb") as out:
            while chunk := src.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        _verify(pair.bin.ref.url, pair.bin, size, digest.hexdigest())
        return local
