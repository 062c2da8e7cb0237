"""What a sink is: one output format of a run. Every run has the Parquet shards (`parquet.py`);
`output:` keys ask for more (`output.megatron`, `output.sft_format`, ...), each one sink module.

A sink's life in a run, all of it in its module:
- `plan(cfg)`, once in the driver before any task: the sink for the run's config, or None when its
  `output:` key is unset (what it needs, a tokenizer say, is loaded here: a missing file is a
  ConfigError before any work);
- `write(shard)`, in the publish task of each shard: its files of that shard (under its folder,
  `<tier folder>/<name>/part-NNNNN.*`), written atomically; what it returns is the shard's entry for
  its manifest section, kept in the shard's publish marker (under its name) until the manifest;
- `section(entries, folder)`: its manifest section (`manifest[name]`) for the run, or for one tier
  folder (its entries only, paths relative to the folder);
- `finish(fs, root, section)`: files of the whole run written at publish, before the manifest
  (Megatron's data-path.txt, named in `whole_run_files`: a finished run's folder holds what its
  manifest lists and these, io/layout.py), so that a manifest that exists lists files that exist;
- `check(...)` and `listed(...)`, classmethods for readers: its section read back, every file
  checked (`run_files.check_file`), and the entries `--fresh`/resume look for.

The registry (`sinks/__init__.py`) lists the sinks in the order of their manifest sections.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import fsspec

from ylink_data.io.run_files import RunFile

if TYPE_CHECKING:  # pyarrow is loaded by the publish tasks that write, not by readers of manifests
    import pyarrow as pa

SINKS: dict[str, type["Sink"]] = {}  # manifest section name -> sink, in manifest order


def register(cls: type["Sink"]) -> type["Sink"]:
    if not cls.name:
        raise TypeError(f"{cls.__name__} needs a `name` (its manifest section and folder)")
    SINKS[cls.name] = cls
    return cls


@dataclass(frozen=True)
class ShardOutput:
    """One shard as its publish task hands it to the sinks: where it goes (the run folder `root`, its
    output `tier` or None, its `number` within the tier), the parts it is made of (none: a run or
    tier that kept nothing), `tables`: its rows in order with the columns the run's sinks are made
    of (`Sink.columns`), the columns the Parquet shard leaves out (`Sink.dropped_columns`), and
    `schema`, what every Parquet shard of the run holds (None: its parts' own, less `dropped`)."""

    fs: fsspec.AbstractFileSystem
    root: str
    tier: str | None
    number: int
    parts: list[dict[str, Any]]
    tables: list["pa.Table"] = field(default_factory=list)
    dropped: tuple[str, ...] = ()
    schema: "pa.Schema | None" = None

    @property
    def folder(self) -> str:
        """Where the tier's files live, relative to the run folder ("" without tiers)."""
        return tier_folder(self.tier)

    def path(self, name: str, suffix: str) -> str:
        """`<folder>/<name>/part-NNNNN<suffix>`, relative to the run folder."""
        return "/".join((*([self.folder] if self.folder else []), name, f"part-{self.number:05d}{suffix}"))


@dataclass
class Listed:
    """A sink's manifest section read back and checked: the files it lists, in manifest order."""

    files: list[RunFile]


class Sink(ABC):
    name: ClassVar[str] = ""          # its manifest section (and its folder in the run, unless `folder`)
    folder: ClassVar[str] = ""        # its folder in each run (and tier) folder: its name unless set
    key: ClassVar[str | None] = None  # the `output:` key that asks for it (None: every run)
    label: ClassVar[str] = ""         # what the publish progress line calls its files
    named_in_label: ClassVar[bool] = False  # label shared by kinds: "sft, prompts JSONL"
    whole_run_files: ClassVar[tuple[str, ...]] = ()  # what `finish` writes in its folder, by name

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "folder" not in cls.__dict__:
            cls.folder = cls.name

    @classmethod
    @abstractmethod
    def plan(cls, cfg: Any) -> "Sink | None":
        """The sink for a run's config (engine.config.PipelineConfig), or None when not asked for."""

    def columns(self, schema: pa.Schema) -> list[str]:
        """The columns of a shard (of `schema`) that its files are made of."""
        return []

    @classmethod
    def columns_needed(cls) -> tuple[tuple[str, ...], ...]:
        """The columns its files cannot be made without: every column of one of these sets (none:
        any rows do). engine/column_check.py refuses a run whose stages make none of them, before
        any work, saying `makers`."""
        return ()

    makers: ClassVar[tuple[str, ...]] = ()  # the ops that make `columns_needed`, which the fix names

    def dropped_columns(self) -> list[str]:
        """Columns the Parquet shards leave out once this sink has what it needs of them."""
        return []

    @abstractmethod
    def write(self, shard: ShardOutput) -> Any:
        """Write the files of `shard`; returns its entry for the manifest section."""

    @abstractmethod
    def section(self, entries: list[Any], folder: str = "") -> Any:
        """The manifest section listing `entries` (every shard's, in order); with `folder` (a tier's,
        "tiers/<tier>"), only the entries under it, their paths relative to it."""

    def finish(self, fs: fsspec.AbstractFileSystem, root: str, section: Any, at: str | None = None) -> None:
        """Files of the whole run (or tier folder at `root`) beside its section, before the manifest;
        `at`: where the folder will be read (a run published in another's _work/next/ until the swap)."""

    @classmethod
    @abstractmethod
    def check(cls, fs: fsspec.AbstractFileSystem, root: str, what: str, section: Any,
              seen: dict[str, Any]) -> Listed:
        """The section as read from a manifest (`what`: it, for messages), every file checked as a
        shard is and listed once (`seen`: every path listed before it)."""

    @classmethod
    @abstractmethod
    def listed(cls, section: Any, what: str) -> list[dict[str, Any]]:
        """The {"path", "bytes"} entries of the files the section lists, unchecked (a ManifestError
        when the section is not one), for finding files that are missing."""


def tier_folder(tier: str | None) -> str:
    """OUTPUT/tiers/<tier>/ relative to the run folder; "" for the run itself (io/layout.py)."""
    return f"tiers/{tier}" if tier else ""


def relative_to(path: str, folder: str) -> str | None:
    """`path` relative to `folder` ("" for the run folder); None when it lies outside it."""
    if not folder:
        return path
    return path[len(folder) + 1:] if path.startswith(folder + "/") else None
