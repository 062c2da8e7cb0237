"""Small real runs for the cache's tests: pages of the bundled crawl cut into documents, written
into Parquet shards by ylink's own writer, with a version-1 manifest as a run writes it."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem
from warcio.archiveiterator import ArchiveIterator

from ylink_data.io.parquet import ParquetFileWriter

from .conftest import SAMPLES


@lru_cache(maxsize=1)
def crawl_documents() -> tuple[str, ...]:
    """The bundled crawl's HTML pages, cut into documents of 2,000 characters; ASCII ones only, so
    that shards of the same number of documents have almost the same size."""
    docs = []
    for path in sorted(SAMPLES.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    page = record.content_stream().read().decode("utf-8", "replace")
                    docs += [page[i:i + 2000] for i in range(0, len(page) - 1999, 2000) if page[i:i + 2000].isascii()]
    return tuple(docs)


def write_run(root: Path, shards: int, docs_per_shard: int, id_prefix: str = "") -> dict:
    """A run folder of `shards` shards of `docs_per_shard` documents each; returns its manifest."""
    docs = crawl_documents()
    assert len(docs) >= shards * docs_per_shard
    fs, entries = LocalFileSystem(), []
    for i in range(shards):
        chunk = docs[i * docs_per_shard:(i + 1) * docs_per_shard]
        table = pa.table({"id": [f"{id_prefix}{i}-{j}" for j in range(len(chunk))], "text": list(chunk)})
        writer = ParquetFileWriter(fs, str(root / "data" / f"part-{i:05d}.parquet"), compression="none")
        writer.write(table)
        entries.append({**writer.close().to_json(), "path": f"data/part-{i:05d}.parquet"})
    manifest = {"version": 1, "shards": entries}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest
