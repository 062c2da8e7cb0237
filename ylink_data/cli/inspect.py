"""`ylink inspect PATH [--limit N] [--chars C]`: documents of a run folder, of Parquet files (a run's
shards or rejected/ files, shown with every column) or of input files (JSONL, WARC, ...), readable
in a terminal. A run folder first gets a one-screen summary: the books, the stages and the main drop
reasons."""
from __future__ import annotations

import json
from typing import Any, Iterator

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ylink_data.io.input_config import InputConfig
from ylink_data.core.errors import InputError
from ylink_data.core.file_errors import file_problem
from ylink_data.core.storage import filesystem, join
from ylink_data.io.listing import expand_paths
from ylink_data.io.readers import Bad, Record, open_split, plan_splits, read_split
from ylink_data.core.redaction import redact_text, redact_url

# Columns shown in a document's header, not among its other facts.
_HEADER = ("id", "text", "url", "lang", "lang_score", "source", "metadata", "reason")


def inspect_path(path: str, limit: int = 5, chars: int = 400) -> None:
    console = Console(highlight=False)
    fs, root = filesystem(path)
    if fs.exists(join(root, "manifest.json")):
        from ylink_data.io.runs import open_run

        run = open_run(path)
        console.print(Text(redact_text(path), style="bold"), soft_wrap=True)
        console.print(run_summary(run))
        docs: Iterator[dict[str, Any] | str] = _run_documents(run, limit)
    elif fs.exists(join(root, "run.json")):
        from ylink_data.io.runs import open_run

        open_run(path)  # raises: the run is unfinished
        return
    elif not fs.exists(root) and not any(c in path for c in "*?["):
        try:  # exists() says False for a host that does not resolve too: the cause is in info()'s error
            fs.info(root)
        except Exception as exc:  # noqa: BLE001 -- fsspec backends raise their own types
            raise InputError(file_problem(exc, path)) from None
    else:
        docs = _documents_of_files(path)
    shown = 0
    for doc in docs:
        if isinstance(doc, str):  # a file or record that could not be read: one line, never a crash
            console.print(Text(doc, style="yellow"), soft_wrap=True)
            continue
        if shown >= limit:
            break
        shown += 1
        header, panel = document_panel(doc, shown, chars)
        # Ids, paths and URLs are never cut or folded, whatever the width: a reader copies them.
        console.print(header, soft_wrap=True)
        console.print(panel)
    if not shown and limit:
        console.print("no documents")


def run_summary(run: Any) -> Group:
    """The books of a run, its stages (in, out, dropped, main reason) and its top drop reasons."""
    stats, manifest = run.stats, run.manifest
    dropped = sum(sum(s["dropped"].values()) for s in stats["stages"])
    shard_bytes = sum(s.get("bytes", 0) for s in manifest["shards"])
    head = Text.assemble(
        (f"{manifest.get('name') or ''}\n", "bold"),
        (f"{stats['output_records']:,}", "bold green"), f" documents kept of {stats['input_records']:,} input records "
        f"({_pct(stats['output_records'], stats['input_records'])}): ",
        (f"{dropped:,}", "bold red"), " dropped, ", (f"{stats['quarantined']:,}", "bold yellow"),
        f" quarantined; {len(manifest['shards'])} shard(s), {_size(shard_bytes)}")
    if stats.get("created"):  # fan-out ops (chunk, qa_extract): rows made beyond one per document
        head.append(f"\n{stats['created']:,} rows created by ops that make several rows of one document "
                    f"(kept + dropped + quarantined = input records + created)")
    tiers = manifest.get("tiers")
    if tiers:
        head.append("\ntiers: " + ", ".join(f"{k} {v.get('rows', 0):,}" for k, v in tiers.items()))
    stages = Table(title=None, box=None, pad_edge=False, header_style="bold")
    # One column per term of a stage's books (in + created == out + dropped + quarantined): a
    # quarantined record is not a drop, and `created` only shows where a fan-out op made rows.
    created = any(s.get("created") for s in stats["stages"])
    columns = ["stage", "in", "out", "dropped", "quarantined", *(["created"] if created else []), "main reasons"]
    for name in columns:
        stages.add_column(name, justify="left" if name in ("stage", "main reasons") else "right",
                          no_wrap=name != "main reasons")
    for s in stats["stages"]:
        dropped = sum(s["dropped"].values())
        top = sorted(s["dropped"].items(), key=lambda kv: -kv[1])[:3]
        reasons = ", ".join(f"{r.split(':', 1)[-1] if ':' in r else r} {c:,}" for r, c in top)
        counts = [dropped, s.get("quarantined", 0), *([s.get("created", 0)] if created else [])]
        stages.add_row(s["name"], f"{s['in']:,}", f"{s['out']:,}", *(f"{n:,}" for n in counts), reasons)
    parts: list[Any] = [head, Text(""), stages]
    top_reasons = sorted(((r, c) for s in stats["stages"] for r, c in s["dropped"].items()), key=lambda kv: -kv[1])
    if top_reasons:
        line = Text("top drop reasons: ", style="bold")
        line.append(", ".join(f"{r} {c:,}" for r, c in top_reasons[:6]))
        parts += [Text(""), line]
    return Group(Panel(Group(*parts), title="run", title_align="left"))


def document_panel(doc: dict[str, Any], number: int, chars: int) -> tuple[Text, Panel]:
    """A header line (number, id, url: printed unwrapped, so never cut) and a panel of facts and text."""
    text = doc.get("text") or ""
    facts = Text()
    if doc.get("reason"):
        facts.append(f"reason={doc['reason']}  ", style="bold red")
    if doc.get("lang") is not None:
        facts.append(f"lang={doc['lang']}", style="bold")
        if doc.get("lang_score") is not None:
            facts.append(f" ({doc['lang_score']:.2f})")
        facts.append("  ")
    for key, value in doc.items():
        if key not in _HEADER and value is not None:
            facts.append(f"{key}={_short(value)}  ", style="cyan" if key.endswith("score") else "")
    facts.append(f"{len(text):,} chars", style="dim")
    if doc.get("source"):
        facts.append(f"  source={doc['source']}", style="dim")
    body = Text.assemble(facts, "\n", _preview(text, chars))
    header = Text.assemble((f"#{number} ", "dim"), (str(doc.get("id") or ""), "bold"),
                           ("  " + str(doc.get("url") or ""), "blue"))
    return header, Panel(body)


def _preview(text: str, chars: int) -> Text:
    """The text's non-blank lines, joined by a dim ⏎ so that menus of one-word lines stay short."""
    out = Text()
    used = 0
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if used >= chars:
            out.append(" …", style="dim")
            break
        if i:
            out.append(" ⏎ ", style="dim")
        piece = line[: chars - used]
        out.append(piece)
        used += len(piece)
        if len(piece) < len(line):
            out.append(" …", style="dim")
            break
    return out


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _size(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def _run_documents(run: Any, limit: int) -> Iterator[dict[str, Any]]:
    from ylink_data.report.sampling import iter_batches

    left = limit
    for path in run.shard_paths:
        for table in iter_batches(run, path, max_rows=left):
            left -= table.num_rows
            yield from table.to_pylist()
        if left <= 0:
            return


def _documents_of_files(path: str) -> Iterator[dict[str, Any] | str]:
    """Documents of input files, and a one-line note for each file or record that is unreadable."""
    files = expand_paths([path], lambda _: {})
    for file in files:
        if file.url.endswith(".parquet") and _has_documents(file.url):
            yield from _parquet_documents(file.url)
            continue
        cfg = InputConfig(paths=[file.url])
        source = redact_url(file.url)  # as a run's `source` column names it: without credentials
        for split in plan_splits([file], cfg, lambda _: {}):
            with open_split(split, {}) as f:
                for item in read_split(split, f, cfg):
                    if isinstance(item, Record):
                        yield {"id": f"{source}@{item.offset}", "url": item.url, "text": item.decoded(),
                               "source": source, "metadata": json.dumps(item.metadata)}
                    elif isinstance(item, Bad):
                        yield f"{source}: {item.reason} at offset {item.offset} (quarantined in a run): {item.error}"


def _has_documents(url: str) -> bool:
    """A Parquet file ylink wrote (a shard or a rejected/ file): shown as it is, every column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs, p = filesystem(url)
    try:
        with fs.open(p, "rb") as f:
            names = pq.ParquetFile(f).schema_arrow.names
    except (pa.ArrowException, OSError):  # not readable Parquet: the reader notes why
        return False
    return "id" in names and "text" in names


def _parquet_documents(url: str) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    fs, p = filesystem(url)
    with fs.open(p, "rb") as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=256):
            yield from batch.to_pylist()
