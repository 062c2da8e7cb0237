"""Parquet files (and finished runs' shards): one record per row, cut by row group."""
from __future__ import annotations

import math
from typing import IO, Any, Iterator

from ylink_data.core.storage import filesystem
from ylink_data.io.listing import InputFile
from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.registry import Planning, Reader, register_reader, whole_file


@register_reader
class ParquetReader(Reader):
    format = "parquet"
    extensions = (".parquet", ".pq")
    order = 30
    named_fields = True

    def plan(self, file: InputFile, compression: str | None, planning: Planning) -> list[Split]:
        size = file.size
        if not size or size <= planning.target:
            return [whole_file(file, self.format, compression)]
        from ylink_data.io.readers.parquet import row_group_count  # pyarrow, only for runs that read Parquet

        fs, path = filesystem(file.url, planning.storage_options_for(file.url))
        with fs.open(path, "rb") as f:
            groups = row_group_count(f)
        if groups is None:  # not readable Parquet: one split, whose reader quarantines the file
            return [whole_file(file, self.format, compression)]
        per = max(1, math.ceil(groups / planning.pieces(size)))
        return [Split(file.url, self.format, size, g, min(g + per, groups), run_shard=file.run_shard,
                      sha256=file.sha256) for g in range(0, groups, per)]

    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        from ylink_data.io.readers.parquet import read_parquet

        return read_parquet(split, f, cfg.text_field, cfg.url_field, cfg.chat, split.run_shard)
