"""The dataset card: RUN/README.md, written when a run is published (before manifest.json, which says
the run is complete), so that standard tools read a run folder as a dataset.

Its YAML front matter is Hugging Face's: `configs:` makes `datasets.load_dataset(RUN)` return
exactly the kept documents (the manifest's shards, `default`: at least one, a run that keeps nothing
has one without rows) and `rejected/` as a second config, with every column its rows have (publish
gives each kind of file one schema); `language`, `size_categories` and `license` come from the run. The body says what each column means
and how the data was made (the pipeline, the accounting), and how to read it with pandas, DuckDB and
pyarrow."""
from __future__ import annotations

import json
from typing import Any

import yaml

from ylink_data.core.storage import atomic_write
from ylink_data.core.schema import DOCUMENT_SCHEMA
from ylink_data.io.layout import CARD, RunLayout

# What the columns of every run mean (schema.DOCUMENT_SCHEMA); ops add their own (`ylink ops NAME`).
COLUMN_MEANINGS = {
    "id": "a stable id of the record: the same input gives the same id on every rerun",
    "text": "the document's text, after the pipeline's ops",
    "url": "the page's URL (WARC, JSONL url field) or the document file's path; null when unknown",
    "source": "the input file the record came from",
    "lang": "ISO 639-1 language code from `langid` (null when the pipeline has no langid)",
    "lang_score": "the language model's confidence, 0-1 (null without langid)",
    "metadata": "a JSON object as a string: format-specific facts (WARC headers, extra JSONL fields, a "
                "document's title and pages); read it with `json.loads`",
    "reason": "(rejected/ only) why the document was dropped: `<op>:<rule>`",
}

# Hugging Face's size categories, by number of rows.
_SIZES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
          (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"),
          (10_000_000_000, "1B<n<10B")]


def write_dataset_card(layout: RunLayout, cfg: Any, stats: dict[str, Any], shards: list[dict[str, Any]],
                       rejected_files: list[dict[str, Any]]) -> None:
    """RUN/README.md for the published `shards` and `rejected_files` (the manifest's lists) and the
    run's `stats`."""
    kept = [s["path"] for s in shards]
    rejected = [f["path"] for f in rejected_files]
    kept_columns, languages = _kept_columns_and_languages(layout, kept)
    configs = [_config("default", kept, default=True)]
    if rejected:
        configs.append(_config("rejected", rejected))
    front = {
        "pretty_name": cfg.name,
        "language": languages or None,
        "size_categories": [size_category(stats["output_records"])],
        # ylink adds no licence of its own: each document keeps its source's (url, source columns).
        "license": "other",
        "tags": ["ylink-data"],
        "configs": configs,
    }
    front = {k: v for k, v in front.items() if v is not None}
    body = _body(cfg, stats, kept_columns, _columns(layout, rejected[:1]))
    text = "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n" + body
    with atomic_write(layout.fs, layout.path(CARD)) as f:
        f.write(text.encode())


def size_category(rows: int) -> str:
    for limit, name in _SIZES:
        if rows < limit:
            return name
    return "n>10B"


def _config(name: str, files: list[str], default: bool = False) -> dict[str, Any]:
    """A config of `files`, all of one schema (publish.py): `datasets` reads every column."""
    config: dict[str, Any] = {"config_name": name}
    if default:
        config["default"] = True
    config["data_files"] = [{"split": "train", "path": files}]
    return config


def _columns(layout: RunLayout, files: list[str]) -> list[str]:
    """The columns of the files (of one schema), from the first one's footer; none without files."""
    import pyarrow.parquet as pq

    for rel in files:
        with layout.fs.open(layout.path(rel), "rb") as f:
            return pq.read_schema(f).names
    return []


def _kept_columns_and_languages(layout: RunLayout, kept: list[str]) -> tuple[list[str], list[str]]:
    """The kept shards' columns and the languages of their `lang` column (read one column, one row
    group at a time: memory is bounded by a row group's codes, not the run)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    columns: list[str] = []
    languages: set[str] = set()
    for rel in kept:
        with layout.fs.open(layout.path(rel), "rb") as f:
            parquet = pq.ParquetFile(f)
            columns += [c for c in parquet.schema_arrow.names if c not in columns]
            if "lang" not in parquet.schema_arrow.names:
                continue
            for i in range(parquet.num_row_groups):
                codes = pc.unique(parquet.read_row_group(i, columns=["lang"]).column("lang")).to_pylist()
                languages.update(c for c in codes if c)
    return columns, sorted(languages)


def _body(cfg: Any, stats: dict[str, Any], columns: list[str], rejected_columns: list[str]) -> str:
    own = set(DOCUMENT_SCHEMA.names)
    lines = [f"# {cfg.name}", "",
             f"{stats['output_records']:,} documents kept of {stats['input_records']:,} input records "
             f"({stats['quarantined']:,} quarantined), made with "
             "ylink-data from the pipeline below.", "",
             "## Loading", "", "```python",
             # Not the folder's own path: the card is the same wherever the run was written or copied
             # (tests/test_execution.py compares run folders byte for byte).
             'RUN = "path/to/this/folder"  # or its URL (s3://..., with storage_options)',
             "import datasets",
             # `datasets` refuses a split of no rows ("corresponds to no data", huggingface/datasets#8401),
             # but streams one: the card of a run that kept nothing says how to read its (empty) shard.
             "kept = datasets.load_dataset(RUN)  # the kept documents, split 'train'" if stats["output_records"] else
             "kept = datasets.load_dataset(RUN, streaming=True)  # no document kept: an empty split, with its columns"]
    if rejected_columns:
        lines.append("dropped = datasets.load_dataset(RUN, 'rejected')  # dropped documents with their reason")
    lines += ["", "import pandas", "df = pandas.read_parquet(f'{RUN}/data')", "",
              "import duckdb", "duckdb.sql(f\"SELECT lang, count(*) FROM '{RUN}/data/*.parquet' GROUP BY lang\")", "",
              "import pyarrow.dataset", "table = pyarrow.dataset.dataset(f'{RUN}/data').to_table()", "```", "",
              "`manifest.json` lists every shard with its sha256; `stats.json` holds the accounting below.", "",
              "## Columns", "", "| column | meaning |", "| --- | --- |"]
    for column in columns + [c for c in rejected_columns if c not in columns]:
        meaning = COLUMN_MEANINGS.get(column) if column in own or column == "reason" else None
        if meaning is None and column not in columns:
            meaning = "(rejected/ only) evidence an op gives for a drop (`ylink ops NAME` says what it writes)"
        lines.append(f"| `{column}` | {meaning or 'added by an op of the pipeline (`ylink ops NAME` says what it writes)'} |")
    # Through JSON: parameters may be tuples or models, which YAML's safe dumper refuses.
    stages = cfg.redact(json.loads(json.dumps([{name: params} for name, params in cfg.ops], default=str)))
    lines += ["", "## How it was made", "", "The pipeline's stages, in order, with every parameter:", "",
              "```yaml", yaml.safe_dump(stages, sort_keys=False, allow_unicode=True).rstrip(), "```", "",
              "| stage | in | out | dropped |", "| --- | ---: | ---: | --- |"]
    for stage in stats["stages"]:
        dropped = ", ".join(f"{reason} {n:,}" for reason, n in sorted(stage.get("dropped", {}).items(),
                                                                      key=lambda kv: -kv[1]))
        lines.append(f"| {stage['name']} | {stage['in']:,} | {stage['out']:,} | {dropped or '-'} |")
    lines += ["", "## Licence", "",
              "ylink-data adds no licence: each document keeps the licence of its source (see its `url` and "
              "`source`). Check your sources' terms before you publish this data set.", ""]
    return "\n".join(lines)
