"""What an op is. An op is a small class named in YAML; its constructor arguments are its
parameters (type-hinted, with defaults), validated from the config before any work starts.

Three shapes cover every op:
- `DocumentFilter`: implement `filter(doc) -> bool | str`; returning False or a reason drops the
  document, and the runner does the counting, the `rejected/` writing and the error quarantine.
- `MapOp`: implement `process(table) -> BatchResult` to work on a whole Arrow batch at once
  (vectorised transforms, ops that add columns, filters that are faster column-wise).
- `GlobalOp`: needs to see the whole corpus (deduplication). It computes per-document keys in the
  map task before it (`keys`), then `resolve` decides, across all tasks, what to drop.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

if TYPE_CHECKING:
    from ..pipeline.global_phase import GlobalContext


@dataclass(slots=True)
class Document:
    """One document as per-document ops see it: a row of the document schema."""

    id: str
    text: str
    url: str | None = None
    source: str | None = None
    lang: str | None = None
    lang_score: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchResult:
    """An op's verdict on a batch: `table` has the same rows as the input (columns may be changed or
    added); `dropped[i]` is a reason to drop row i (None keeps it); `errors[i]` quarantines row i."""

    table: pa.Table
    dropped: list[str | None] | None = None
    errors: list[str | None] | None = None
    counters: dict[str, int] = field(default_factory=dict)


class Op:
    """Base of every op. Subclasses set `name` (the YAML key) and take parameters in `__init__`."""

    name: ClassVar[str] = ""

    def setup(self) -> None:
        """Load what is expensive (models, tables) once per worker process, before the first batch."""


class MapOp(Op):
    """An op applied batch by batch, independently per task."""

    def process(self, table: pa.Table) -> BatchResult:
        raise NotImplementedError


class DocumentFilter(MapOp):
    """A filter written one document at a time. `filter` returns True to keep the document, or
    False / a reason string to drop it; the reason is reported as `<op name>:<reason>`."""

    def filter(self, doc: Document) -> bool | str:
        raise NotImplementedError

    def process(self, table: pa.Table) -> BatchResult:
        dropped: list[str | None] = []
        errors: list[str | None] = []
        for doc in documents(table):
            try:
                verdict = self.filter(doc)
            except Exception as exc:  # one bad document must not stop the task: quarantine it
                dropped.append(None)
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            errors.append(None)
            if verdict is True:
                dropped.append(None)
            elif verdict is False or verdict is None:
                dropped.append(self.name)
            else:
                dropped.append(f"{self.name}:{verdict}")
        return BatchResult(table, dropped=dropped, errors=errors if any(errors) else None)


class GlobalOp(Op):
    """An op that decides with a view of the whole corpus; runs as its own phase on Ray."""

    def keys(self, table: pa.Table) -> dict[str, pa.Array]:
        """Per-document values `resolve` needs, computed where the documents already are."""
        return {}

    def resolve(self, ctx: "GlobalContext") -> None:
        raise NotImplementedError


def documents(table: pa.Table) -> list[Document]:
    """Rows of a document table as `Document`s (metadata decoded from JSON)."""
    cols = {name: table.column(name).to_pylist() for name in Document.__slots__ if name in table.column_names}
    n = table.num_rows
    meta = cols.get("metadata") or [None] * n
    empty = [None] * n
    return [
        Document(
            id=cols["id"][i],
            text=cols["text"][i] or "",
            url=cols.get("url", empty)[i],
            source=cols.get("source", empty)[i],
            lang=cols.get("lang", empty)[i],
            lang_score=cols.get("lang_score", empty)[i],
            metadata=json.loads(meta[i]) if meta[i] else {},
        )
        for i in range(n)
    ]
