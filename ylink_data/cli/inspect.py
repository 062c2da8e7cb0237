"""`ylink inspect`: documents of a run folder, or of input files, readable in a terminal."""
from __future__ import annotations

import itertools
import json
from typing import Any, Iterator

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from ..config import InputConfig
from ..io.fs import expand_paths, filesystem, join
from ..io.readers import Record, open_split, plan_splits, read_split


def inspect_path(path: str, limit: int = 5, chars: int = 400) -> None:
    console = Console()
    fs, root = filesystem(path)
    if fs.exists(join(root, "manifest.json")):
        from ..runs import open_run

        run = open_run(path)
        stats = run.stats
        console.print(f"[bold]{path}[/]: {stats['output_records']:,} documents kept of "
                      f"{stats['input_records']:,} input records, {stats['quarantined']:,} quarantined, "
                      f"{len(run.manifest['shards'])} shard(s)", soft_wrap=True)
        docs: Iterator[dict[str, Any]] = iter(run.to_arrow().slice(0, limit).to_pylist())
    else:
        docs = _documents_of_files(path)
    shown = 0
    for doc in itertools.islice(docs, limit):
        shown += 1
        text = doc.get("text") or ""
        facts = [f"{k}={doc[k]}" for k in ("lang", "source") if doc.get(k) is not None]
        if doc.get("lang_score") is not None:
            facts.insert(1, f"lang_score={doc['lang_score']:.2f}")
        facts += [f"{k}={v}" for k, v in doc.items()
                  if k not in ("id", "text", "url", "lang", "lang_score", "source", "metadata") and v is not None]
        facts.append(f"{len(text):,} chars")
        # Facts go in the body, where they wrap: a subtitle would be cut at the terminal's width.
        body = Text("  ".join(facts) + "\n\n", style="dim")
        body.append(text[:chars] + (" …" if len(text) > chars else ""))
        title = f"{doc.get('id') or ''}  {doc.get('url') or ''}".strip()
        console.print(Panel(body, title=title, title_align="left"))
    if not shown:
        console.print("no documents")


def _documents_of_files(path: str) -> Iterator[dict[str, Any]]:
    cfg = InputConfig(paths=[path])
    files = expand_paths([path], lambda _: {})
    for split in plan_splits(files, cfg, lambda _: {}):
        with open_split(split, {}) as f:
            for item in read_split(split, f, cfg):
                if isinstance(item, Record):
                    yield {"id": f"{split.url}@{item.offset}", "url": item.url, "text": item.decoded(),
                           "source": split.url, "metadata": json.dumps(item.metadata)}
