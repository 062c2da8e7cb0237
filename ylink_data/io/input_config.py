"""The input section of a pipeline (`input:`): which files, in which format, read how. Its own model,
in the io layer that reads it, so that readers and the commands that read input files (`ylink inspect`,
the training commands) need no pipeline; `engine/config.py` composes it into the pipeline's.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ylink_data.core.config_model import MiB, Strict, not_blank
from ylink_data.io.readers.registry import input_formats, listed


class InputConfig(Strict):
    # Files, folders, globs or URLs. A folder holding a finished ylink run (its manifest.json) stands
    # for the run's published shards as the manifest lists them, nothing else of it (io/listing.py,
    # expand_paths), read as Parquet whatever `format` says: each row's text, url, lang, lang_score
    # and metadata as the run wrote them, its other one-value columns (the run's id and source, ops'
    # scores) added to the metadata (io/readers/parquet.py, run_record). A folder of an unfinished
    # run (run.json without manifest.json) is refused.
    paths: list[Annotated[str, not_blank("a file, folder, glob or URL")]] | None = Field(None, min_length=1)
    # Instead of `paths`: a path list, one path a line, plain or gzip (a name ending in .gz), local or
    # a URL, the way Common Crawl publishes each dump's `warc.paths.gz` / `wet.paths.gz`. Blank lines
    # and `#` comments are skipped. A local line is read like an entry of `paths` (a folder, a run);
    # a URL line (http, s3...) names one file, taken as listed without a request per line at planning
    # (a dump lists ~90k files): a missing one fails when its task reads it. The list is read as a
    # stream (io/path_list.py); its lines are the run's input files, so a changed list is another run.
    # A local list must be a regular file (not a FIFO, a device, a folder); lines of at most 64 KiB,
    # 256 MiB of list in all.
    paths_from: Annotated[str, not_blank("a path list file or URL")] | None = None
    # Joined to the list's relative lines (not starting with / nor a scheme): a URL prefix such as
    # https://data.commoncrawl.org/ or s3://commoncrawl/, or a local folder. null: relative lines are
    # relative to the working directory, as entries of `paths` are.
    paths_base: Annotated[str, not_blank("a URL or folder")] | None = None
    # auto (by extension, else a document's first bytes) or a registered reader's format
    # (io/readers/formats/): warc, wet, jsonl, parquet, text, html, pdf, docx, pptx, markdown.
    format: str = "auto"
    # JSONL/Parquet: the field holding the text; null tries text, raw_content, content in turn.
    text_field: str | None = None
    # The url field, dotted for nested ones; null tries url, then metadata.url.
    url_field: str | None = None
    # JSONL/Parquet rows are conversations (messages, ShareGPT, Alpaca) for `sft_tokenize`: their
    # conversation fields become `text` as one JSON object (ylink_data/io/readers/jsonl.py).
    chat: bool = False
    # Files larger than this are split into several tasks where the format allows it (uncompressed
    # JSONL and WARC by byte range, Parquet by row group, .warc.gz by gzip member), and small files
    # are packed into tasks of about this size. null: sized from the input, about 64 tasks of 2 to
    # 256 MiB each (io/readers/__init__.py, task_bytes), so that every core has work to the end.
    split_bytes: int | None = Field(None, gt=0)
    # A record (WARC record, JSONL line, text/HTML file) above this size is quarantined, not read.
    max_record_bytes: int = Field(32 * MiB, gt=0)
    # PDF pages without a usable text layer: quarantined as `needs_ocr` (false), or read by the
    # `tesseract` binary (true) in these Tesseract languages ('+'-joined, `tesseract --list-langs`).
    ocr: bool = False
    ocr_languages: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")] = "eng+chi_sim"
    # Document files (PDF, DOCX, PPTX, Markdown) are read in a child process of each worker that is
    # killed at this limit (io/readers/isolated.py), whatever holds it (Python, PDFium, lxml): the
    # file is quarantined as `timeout`. 60 s: the bundled documents take 0.01-11 ms each, PDFium reads
    # ~500 pages/s (bench/RESULTS.md, "Document readers (issue 15)"), and the densest DOCX that
    # max_unpacked_bytes lets in ~40 s (34 MB of empty paragraphs: 9.4 s); OCR takes seconds a page,
    # so scanned books read with `ocr: true` need more.
    time_limit_s: Annotated[float, Field(gt=0, le=24 * 3600)] = 60.0
    # DOCX and PPTX are ZIP packages: one that unpacks to more than this (the sizes its ZIP directory
    # declares, checked before parsing) is quarantined as `too_large`. python-docx and python-pptx
    # load every member and parse its XML into 5 (running text) to 16 (a million empty paragraphs)
    # times its size in memory, 12 for a slide of many shapes (measured 2026-12, python-docx 1.2.0,
    # python-pptx 1.0.2): 64 MiB is 1 GiB per worker at worst. Media (images) hardly compress, so a
    # file under max_record_bytes that is not a ZIP bomb unpacks to about its own size plus its XML;
    # the 21 bundled DOCX and PPTX unpack to 0.8 MB at most, most of it styles and theme.
    # A PDF stream that decodes past it, or whose filters cannot be decoded a piece at a time, is
    # `too_large` too (io/readers/pdf_filters.py): PDFium decodes a stream whole.
    max_unpacked_bytes: int = Field(64 * MiB, gt=0)
    # The memory a document file may take in its reader child beyond the child's own (~130 MB, the
    # readers loaded): the child's address space is bounded to that (RLIMIT_AS, core/memory.py), so
    # an allocation past it fails, whatever makes it (Python, PDFium, lxml), and the file is
    # quarantined as `too_large`, the run going on. The checks above are the fast path; this bounds
    # what they cannot see (a 600 KB PDF whose stream they could not find took the reader to 4 GB).
    # 2 GiB: twice the most max_unpacked_bytes lets a DOCX or PPTX parse into (1 GiB, above); the
    # bundled documents take a few MB. One child per worker: a machine needs this much per CPU only
    # when every worker reads such a file at once.
    max_document_memory_bytes: int = Field(2048 * MiB, gt=0)
    # Read on only a uniform random sample of this many documents of the input (null: all of them),
    # to try a pipeline on a slice of a large corpus: exactly min(sample, documents) documents, drawn
    # without replacement, the same ones for the same sample_seed however the input is split into
    # tasks or workers (bottom-k sampling: each document's rank is a 64-bit hash of sample_seed and
    # its id, and the `sample` lowest are kept; a pass over the input before phase 0 finds the cut,
    # engine/runner.py). The rest count as the read stage's `not_sampled` drops in stats.json
    # (never written to rejected/); records that cannot be read are quarantined as ever. Both keys
    # are part of the run's fingerprint: another sample is another run.
    sample: Annotated[int, Field(gt=0, strict=True)] | None = None
    sample_seed: Annotated[int, Field(strict=True)] = 0

    @field_validator("format", mode="plain")
    @classmethod
    def _a_registered_format(cls, v: Any) -> str:
        # Checked against the reader registry when validated, not fixed when this class is made: a
        # reader registered later is a format too, and named in the error as the others are.
        formats = input_formats()
        if isinstance(v, str) and v in formats:
            return v
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": listed(formats, quote=True)})

    @field_validator("paths", mode="before")
    @classmethod
    def _one_path_is_a_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _paths_or_a_list(self) -> "InputConfig":
        if (self.paths is None) == (self.paths_from is None):
            raise PydanticCustomError(
                "paths_or_list", "set exactly one of input.paths (files, folders, globs or URLs) and "
                "input.paths_from (a file listing one path a line)")
        if self.paths_base is not None and self.paths_from is None:
            raise PydanticCustomError("base_without_list", "input.paths_base prefixes the lines of "
                                      "input.paths_from: set input.paths_from, or remove input.paths_base")
        return self
