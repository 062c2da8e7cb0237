"""What an op is. An op is a small class named in YAML; its constructor arguments are its
parameters (type-hinted, with defaults), validated from the config before any work starts.

Four shapes cover every op:
- `DocumentFilter`: implement `filter(doc) -> bool | str`; returning False or a reason drops the
  document, and the runner does the counting, the `rejected/` writing and the error quarantine.
- `DocumentMapper`: implement `map(doc) -> Document | str | None` to change documents one at a
  time (text, lang, metadata); a str or None drops the document, as for filters.
- `MapOp`: implement `process(table) -> BatchResult` to work on a whole Arrow batch at once
  (vectorised transforms, ops that add columns, filters that are faster column-wise).
- `GlobalOp`: needs to see the whole corpus (deduplication). It computes per-document keys in the
  map task before it (`keys`), then `resolve` decides, across all tasks, what to drop.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import pyarrow as pa
from pydantic import Field

from ylink_data.core.errors import DocumentError
from ylink_data.core.timelimit import DocumentTimeout, time_limit
from ylink_data.ops.context import DEFAULT_CONTEXT, OpContext
from ylink_data.text.transform import units

if TYPE_CHECKING:
    import numpy as np

    from ylink_data.ops.workspace import Workspace


# Parameter types with their bounds, for ops' signatures (pydantic's PositiveInt, NonNegativeInt,
# PositiveFloat and NonNegativeFloat for the others): a value out of range is a config error.
Fraction = Annotated[float, Field(ge=0, le=1)]  # a share of lines, words, characters or documents
Seconds = Annotated[float, Field(gt=0)]  # a time limit
Strings = Annotated[list[str], Field(min_length=1)]  # words, list names or language codes: at least one
Language = Literal["en", "zh", "auto"]  # the text units of a language-aware op (`LanguageAwareOp`)


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
    added); `dropped[i]` is a reason to drop row i (None keeps it); `errors[i]` quarantines row i
    (a message starting with "timeout" is quarantined with that reason, one starting with
    "unusable_response" or "unusable answer" as `unusable_response`, one starting with "truncated
    answer" as `truncated`, others with `error`: engine/tasks.py ERROR_REASONS).

    Fan-out (one document -> several rows: chunks, question-answer pairs): `parents[j]` is the input
    row that row j of `table` came from, in input order, and every input row has at least one row
    (`fan_out` builds such a table). An input row that yields nothing keeps one row of its own, with
    a reason in `dropped` or an error in `errors`, so nothing leaves the books unexplained;
    `dropped` and `errors` are indexed by the rows of `table`, as without fan-out. The rows beyond
    the first per input row are counted as `created` in stats.json."""

    table: pa.Table
    dropped: list[str | None] | None = None
    errors: list[str | None] | None = None
    counters: dict[str, int] = field(default_factory=dict)
    parents: list[int] | None = None  # None: row i of `table` is input row i


class Op:
    """Base of every op. Subclasses set `name` (the YAML key) and take parameters in `__init__`.

    What an op can do beyond its shape is declared here, each with its default: class attributes
    (`preload`, `reads_text`, `makes_text`, `uses_llm`, `writes_tokens`, `writes_document_tokens`) and classmethods of the
    parameters (`files_read`, `columns_read`, `columns_added`, `fingerprint_params`, `is_global`).
    The engine reads only these; what an op needs from the run comes to `setup(ctx)` (`OpContext`)."""

    name: ClassVar[str] = ""
    # Modules a worker process of a run with this op imports on start, calling their `warm()` if
    # they have one: code that is slow to load the first time (numba's compiled loops).
    preload: ClassVar[tuple[str, ...]] = ()
    # Its rules read plain text (words, lines, punctuation): on HTML input (WARC, .html files) it
    # belongs after an op that `makes_text` (extract), or it measures markup; `ylink validate` warns.
    reads_text: ClassVar[bool] = False
    makes_text: ClassVar[bool] = False
    # It calls a model server: config.py gives its `llm` parameter the pipeline's `llm:` block under
    # the op's own keys before any work starts (`LLMOp`).
    uses_llm: ClassVar[bool] = False
    # It writes token ids: the column of each row's token count (`num_tokens`), which stats.json's
    # `tokens` section sums over the published shards. None: it writes no tokens.
    writes_tokens: ClassVar[str | None] = None
    # Its token ids are whole documents, each ending in an end-of-document id, by the tokenizer.json
    # at its `tokenizer` (and `eod_token`) parameter: what Megatron's .bin/.idx hold, so that
    # `output.megatron` needs such an op (`tokenize`; `sft_tokenize`'s rows are conversations).
    writes_document_tokens: ClassVar[bool] = False

    def setup(self, ctx: OpContext = DEFAULT_CONTEXT) -> None:
        """Load what is expensive (models, tables) once per worker process, before the first batch.
        `ctx` is what the run gives the op (storage options for the files it reads); an op built on
        its own (a preview, a test) gets the default."""

    def teardown(self) -> None:
        """Release what `setup` started (a child process) when the op is done with before its process
        ends: a preview of one sample. Workers keep their ops for the next task and never call it."""

    def output_tiers(self) -> tuple[str, list[str]] | None:
        """(column, tier names) when the op routes documents into separate output folders by the
        value of a column it writes (OUTPUT/tiers/<tier>/, each with its own manifest)."""
        return None

    @classmethod
    def is_global(cls, params: dict[str, Any]) -> bool:
        """Whether the op, with these parameters, needs the whole corpus (a phase of its own)."""
        return issubclass(cls, GlobalOp)

    @classmethod
    def fingerprint_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The op's parameters as the run's fingerprint holds them (run.json): all of them by default;
        an op leaves out what does not change its output (`LLMOp`: of `llm`, only what changes an
        answer), so that changing it resumes the run instead of starting anew."""
        return params

    @classmethod
    def files_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        """(parameter key, path or URL) of every file or folder the op reads that its parameters name:
        models, tokenizers, benchmarks, prompts, word lists, indexes. The one declaration of them: the
        run's fingerprint holds their content (`io.digest`), and validation and planning refuse a
        missing one, naming the key. Bundled assets are part of the package, not listed."""
        return []

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]] | None:
        """(parameter key, column) of every column the op reads by a name its parameters give
        (`text_column`, `column`...): validation checks each against the columns the input and the
        ops before it make (engine/column_check.py). None: not declared yet; nothing is checked
        from this op on, as what it makes is unknown."""
        return None

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str] | dict[str, pa.DataType] | None:
        """The columns the op adds to every row it keeps (with these parameters): their names, or
        {name: Arrow type} where the op knows the types (a column another op reads as numbers is
        then checked to hold numbers). None: not declared."""
        return None

    @classmethod
    def numeric_columns(cls, params: dict[str, Any]) -> list[str]:
        """The parameter keys, among `columns_read`'s, whose column the op reads as numbers (a score
        it ranks or compares by): validation refuses a column known to hold anything else."""
        return []


def named_files(key: str, value: Any) -> list[tuple[str, str]]:
    """(key, path) of a parameter that names a file, a list of files (`key[i]`) or files by name
    (`key.name`); None names none."""
    if isinstance(value, str):
        return [(key, value)]
    if isinstance(value, dict):
        return [(f"{key}.{k}", v) for k, v in value.items() if isinstance(v, str)]
    if isinstance(value, (list, tuple)):
        return [(f"{key}[{i}]", v) for i, v in enumerate(value) if isinstance(v, str)]
    return []


class MapOp(Op):
    """An op applied batch by batch, independently per task.

    `group_column`: set (a column name) by an op that must see every row of a group at once (the
    responses of one instruction, which `respond` writes as adjacent rows): the task runner then
    cuts the op's batches only between groups, holding a batch's last group back for the next
    batch (engine/tasks.py `whole_groups`). A group is adjacent rows with one value; rows stay
    in their task through every phase, so a group made inside a pipeline is never split. Rows of
    one group spread over input files or far apart in one are seen as separate groups."""

    group_column: str | None = None

    def process(self, table: pa.Table) -> BatchResult:
        raise NotImplementedError


class PerDocumentOp(MapOp):
    """Base of ops that look at one document at a time: `each_document` runs a method over a batch
    with the time limit and error quarantine in one place (DocumentFilter, DocumentMapper and ops
    that measure documents build on it)."""

    time_limit_s: float | None = None  # per document; subclasses set it from a parameter

    def count(self, name: str, n: int = 1) -> None:
        """Add to a counter reported in this stage's stats (e.g. redactions per kind)."""
        if not hasattr(self, "_counts"):
            self._counts: Counter[str] = Counter()
        self._counts[name] += n

    def document_arguments(self, table: pa.Table) -> tuple[list[Any], ...]:
        """Values per document decided once for the whole batch (column-wise), which `each_document`
        passes to the per-document method after the document: none by default."""
        return ()

    def each_document(self, table: pa.Table, fn) -> tuple[list[Document], list[Any], list[str | None]]:
        """Calls `fn(doc, *arguments)` per document (`document_arguments`), each under the time limit;
        `self.counters()` then holds what `count` added meanwhile."""
        self._counts = Counter()
        docs = documents(table)
        arguments = self.document_arguments(table)
        per_document = zip(*arguments) if arguments else repeat(())
        verdicts: list[Any] = []
        errors: list[str | None] = []
        for doc, args in zip(docs, per_document):
            verdict, error = self.run_document(fn, doc, *args)
            verdicts.append(verdict)
            errors.append(error)
        return docs, verdicts, errors

    def run_document(self, fn, doc: Document, *args: Any) -> tuple[Any, str | None]:
        """(fn's verdict, None), or (True, the error that quarantines the document)."""
        try:
            with time_limit(self.time_limit_s):
                return fn(doc, *args), None
        except DocumentTimeout as exc:
            return True, str(exc)
        except DocumentError as exc:  # already says what failed, e.g. "ValueError: ..." from a child process
            return True, str(exc)
        except Exception as exc:  # one bad document must not stop the task: quarantine it
            return True, f"{type(exc).__name__}: {exc}"

    def counters(self) -> dict[str, int]:
        return dict(getattr(self, "_counts", {}))

    def _reason(self, verdict: Any) -> str | None:
        if verdict is None or verdict is False:
            return self.name
        return f"{self.name}:{verdict}" if isinstance(verdict, str) else None


class LanguageAwareOp(PerDocumentOp):
    """An op with a `language` parameter: `en` (space-separated words), `zh` (jieba words) or `auto`
    (each document by its `lang`, else by its script; `units.unit_languages`). The text units of
    every document of a batch are decided once, column-wise, and passed to the per-document method
    after the document. When a batch holds Chinese, jieba's segmenter is loaded before the first
    document (once per process, about 0.8 s), outside every document's time limit."""

    language: str = "auto"
    reads_text: ClassVar[bool] = True
    segmented: ClassVar[bool] = True  # False: the op's Chinese units need no jieba words

    def document_arguments(self, table: pa.Table) -> tuple[list[Any], ...]:
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else None
        families = units.unit_languages(self.language, table.column("text"), langs)
        if self.segmented and units.CHINESE in families:
            units.load_segmenter()
        return (families,)


class DocumentFilter(PerDocumentOp):
    """A filter written one document at a time. `filter` returns True to keep the document, or
    False / a reason string to drop it; the reason is reported as `<op name>:<reason>`."""

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []  # a rule on the document's own fields

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str]:
        return []  # it keeps or drops rows

    def filter(self, doc: Document, *arguments: Any) -> bool | str:
        raise NotImplementedError

    def process(self, table: pa.Table) -> BatchResult:
        _, verdicts, errors = self.each_document(table, self.filter)
        dropped = [self._reason(v) for v in verdicts]
        return BatchResult(table, dropped=dropped, errors=errors if any(errors) else None,
                           counters=self.counters())


class DocumentMapper(PerDocumentOp):
    """A transform written one document at a time. `map` returns the document to keep (changed in
    place or new), or a reason string / None to drop it. Changes to text, url, lang, lang_score
    and metadata are written back to the batch."""

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []  # a rule on the document's own fields

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> list[str]:
        return []  # it changes the document's own fields

    def map(self, doc: Document, *arguments: Any) -> Document | str | None:
        raise NotImplementedError

    def process(self, table: pa.Table) -> BatchResult:
        docs, verdicts, errors = self.each_document(table, self.map)
        out = [v if isinstance(v, Document) else d for v, d in zip(verdicts, docs)]
        dropped = [None if isinstance(v, Document) else self._reason(v) for v in verdicts]
        return BatchResult(with_documents(table, out), dropped=dropped, errors=errors if any(errors) else None,
                           counters=self.counters())


KEEP_ROW = "<keep the row as it is>"  # DocumentSplitter.split's answer for a row it leaves alone
PAIR_COLUMN = "question"  # a row with a question is a question-answer pair already (qa_extract, qa_generate)


def pair_rows(table: pa.Table) -> list[bool]:
    """Which rows of `table` are question-answer pairs already (a non-null `question`)."""
    if PAIR_COLUMN not in table.column_names:
        return [False] * table.num_rows
    return table.column(PAIR_COLUMN).is_valid().to_pylist()


class DocumentSplitter(PerDocumentOp):
    """An op that makes several rows of one document, written one document at a time. `split`
    returns a list of new rows (dicts of column values: `text` and the op's `columns`; the other
    document fields are inherited from the document, `metadata` unless given), a reason string /
    None / an empty list to drop the document, or KEEP_ROW to keep it as it is (its id unchanged).
    The new rows get ids `<document id>#<k>`. With `keeps_pairs`, rows that are question-answer
    pairs already (`pair_rows`) are kept as they are without calling `split`: chunking or
    re-extracting a pair makes no sense, and a FileQA pipeline passes the pairs a document holds
    through the ops that make pairs from the other documents."""

    columns: ClassVar[dict[str, pa.DataType]] = {}  # columns the op adds (null on dropped documents)
    keeps_pairs: ClassVar[bool] = False

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return dict(cls.columns)

    def split(self, doc: Document, *arguments: Any) -> list[dict[str, Any]] | str | None:
        raise NotImplementedError

    def process(self, table: pa.Table) -> BatchResult:
        split = self.split
        if self.keeps_pairs and any(pairs := pair_rows(table)):
            pair_ids = {i for i, is_pair in zip(table.column("id").to_pylist(), pairs) if is_pair}
            split = lambda doc, *args: KEEP_ROW if doc.id in pair_ids else self.split(doc, *args)  # noqa: E731
        _, verdicts, errors = self.each_document(table, split)
        children: list[list[dict[str, Any]] | None] = []
        dropped: list[str | None] = []
        row_errors: list[str | None] = []
        for verdict, error in zip(verdicts, errors):
            if error is None and verdict is KEEP_ROW:
                children.append(None)
                dropped.append(None)
                row_errors.append(None)
            elif error is None and isinstance(verdict, list) and verdict:
                children.append(verdict)
                dropped += [None] * len(verdict)
                row_errors += [None] * len(verdict)
            else:  # the document keeps one row, dropped or quarantined
                children.append(None)
                dropped.append(None if error else self._reason(verdict or None))
                row_errors.append(error)
        out, parents = fan_out(table, children, self.columns)
        return BatchResult(out, dropped=dropped, errors=row_errors if any(row_errors) else None,
                           counters=self.counters(), parents=parents)


def fan_out(table: pa.Table, children: list[list[dict[str, Any]] | None],
            columns: dict[str, pa.DataType]) -> tuple[pa.Table, list[int]]:
    """(rows, parents) for `BatchResult`: for each input row i, `children[i]` is a list of new rows
    or None to keep row i itself (for a drop or an error). A new row copies its input row's fields
    (`source`, `url`, `lang`, ...) except those it gives, and gets the id `<parent id>#<k>` (k: its
    position among its parent's rows), so ids stay unique and the same on every rerun. `columns`
    are the op's new columns, appended in this order (null where a row does not give them; where
    the table has one already, a row that does not give it keeps its value)."""
    parents: list[int] = []
    kept_whole: list[bool] = []
    given: list[dict[str, Any]] = []
    for i, rows in enumerate(children):
        if rows is None:
            parents.append(i)
            kept_whole.append(True)
            given.append({})
            continue
        for row in rows:
            parents.append(i)
            kept_whole.append(False)
            given.append(row)
    out = table.take(pa.array(parents, pa.int64()))
    ids = out.column("id").to_pylist()
    k, previous = 0, -1
    for j, (parent, whole) in enumerate(zip(parents, kept_whole)):
        k = k + 1 if parent == previous else 0
        previous = parent
        if not whole:
            ids[j] = f"{ids[j]}#{k}"
    out = out.set_column(out.schema.get_field_index("id"), out.schema.field("id"), pa.array(ids, pa.string()))
    unknown = {key for row in given for key in row} - set(out.column_names) - set(columns)
    if unknown:  # a bug in the op: say which column it forgot to declare
        raise ValueError(f"fan_out: rows give columns {sorted(unknown)} that are neither document fields nor "
                         f"declared in the op's columns {sorted(columns)}")
    for name in {key for row in given for key in row if key in out.column_names}:
        values = out.column(name).to_pylist()
        for j, row in enumerate(given):
            if name in row:
                value = row[name]
                if name == "metadata" and not isinstance(value, str | None):
                    value = json.dumps(value, ensure_ascii=False, default=str) if value else None
                values[j] = value
        index = out.schema.get_field_index(name)
        out = out.set_column(index, out.schema.field(name), pa.array(values, out.schema.field(name).type))
    for name, dtype in columns.items():
        if name in out.column_names:  # a row that does not give it keeps its own (a pair passed through)
            values = out.column(name).to_pylist()
            array = pa.array([row[name] if name in row else v for row, v in zip(given, values)], dtype)
            out = out.set_column(out.schema.get_field_index(name), name, array)
        else:
            out = out.append_column(name, pa.array([row.get(name) for row in given], dtype))
    return out, parents


class GlobalOp(Op):
    """An op that decides with a view of the whole corpus; runs as its own phase on Ray."""

    def keys(self, table: pa.Table) -> dict[str, pa.Array]:
        """Per-document values `resolve` needs, computed where the documents already are."""
        return {}

    def resolve(self, ctx: "Workspace") -> None:
        raise NotImplementedError

    def decision_breakdowns(self, table: pa.Table, dropped: "np.ndarray") -> dict[str, Counter]:
        """Counts for stats.json's `breakdowns` of this op's stage, per batch of the phase that applies
        its decisions: `table` holds the documents with the decision columns, `dropped` marks the
        rows removed. Summed over tasks (`minhash_dedup`: removals per source)."""
        return {}


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


_WRITABLE = ("text", "url", "lang", "lang_score", "metadata")


def with_documents(table: pa.Table, docs: list[Document]) -> pa.Table:
    """`table` with the writable fields of `docs` (one per row) written back."""
    for name in _WRITABLE:
        values = [getattr(d, name) for d in docs]
        if name == "metadata":
            values = [json.dumps(v, ensure_ascii=False, default=str) if v else None for v in values]
        index = table.schema.get_field_index(name)
        array = pa.array(values, table.schema.field(name).type)
        table = table.set_column(index, name, array)
    return table
