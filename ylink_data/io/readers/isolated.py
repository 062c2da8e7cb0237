"""Document files (PDF, DOCX, PPTX, Markdown) read in a child process: the one boundary around every
document reader. Whatever happens while a file is read, it is that file's fate, never the run's:
- an exception of any type, from a reader or from the libraries under it: `unreadable`, with the
  error (a file's own parts that fail are the reader's to skip and count: document.Parts);
- longer than `input.time_limit_s`, in Python (a list label of a billion "m"s) or in C (PDFium,
  lxml): `timeout`, the child stopping itself or being killed (core/deadline.py);
- the child dying on it (a crash of PDFium or lxml, the OOM killer, a kill from outside): the file
  goes to a new child once more (deadline.DeadlineProcess.call), and is `unreadable` only when it
  kills that one too ("it killed ... twice (SIGKILL, signal 9)");
- more memory than `input.max_document_memory_bytes` beyond the child's own: the child's address
  space is bounded (core/memory.py), so an allocation past it fails, and the file is `too_large`,
  whatever tried to allocate (a PDF stream the pre-check in pdf.py cannot see, an XML part that
  parses to gigabytes); the run goes on, and the next file gets a new child.
One child per worker process, started with the first document file and reused; it imports the
readers once (0.5 s from start to ready on a 2-core EPYC VM). A file then costs one round trip, its
bytes one way and its item back: 0.05-0.5 ms more than reading it in-process for the four files of
samples/documents (0.01-11 ms each; measured 2026-12, median of 50-200 reads).
"""
from __future__ import annotations

from abc import abstractmethod
from typing import IO, Any, Callable, ClassVar, Iterator, NamedTuple

from ylink_data.core.timelimit import DocumentTimeout
from ylink_data.core.deadline import ChildFailed, ChildOutOfMemory, DeadlineProcess, serve
from ylink_data.io.readers.base import TIMEOUT, TOO_LARGE, UNREADABLE, Bad, Record, Skip, Split, one_line, read_whole
from ylink_data.io.readers.registry import Reader, readers

_PROCESS: DeadlineProcess | None = None


class DocumentOptions(NamedTuple):
    """What the document readers use of the input section, sent to the child with each file."""

    ocr: bool
    ocr_languages: str
    max_unpacked_bytes: int


# A document reader's parser, run in the child: the file's items from its bytes.
Parse = Callable[[Split, bytes, DocumentOptions], Iterator[Record | Skip | Bad]]


class DocumentReader(Reader):
    """A format of one document per file, read whole in the child process (this module's boundary).
    Subclasses set `kind` and implement `load`."""

    isolated = True
    kind: ClassVar[str]  # how errors name a file of it: "PDF", ".docx"

    @abstractmethod
    def load(self) -> Parse:
        """Import the parser (in the child, once, before it says it is ready: not in any file's time)."""

    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        reader_process().spawn()  # it loads the readers while this process reads the file
        data = read_whole(f, cfg.max_record_bytes)
        if isinstance(data, Bad):
            yield data
            return
        if not data:  # a zero-byte file is no document of any format (an interrupted copy, usually)
            yield Bad(0, f"empty file (0 bytes), not a {split.format} document; remove it or copy it again")
            return
        yield from read_document(split, data, cfg, self.kind)


def reader_process() -> DeadlineProcess:
    """This process's document reader child (not started until `spawn` or the first file)."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = DeadlineProcess(__name__, name="the document reader process")
    return _PROCESS


def read_document(split: Split, data: bytes, cfg: Any, kind: str) -> list[Record | Skip | Bad]:
    """The file's item: a document, why it is none (Skip), or why it is quarantined (Bad)."""
    options = DocumentOptions(cfg.ocr, cfg.ocr_languages, cfg.max_unpacked_bytes)  # what the readers use, not the config
    process = reader_process()
    process.start()  # a child that cannot start is this machine's fault, not the file's: it fails the task
    try:
        return process.call((split, options), data, cfg.time_limit_s, cfg.max_document_memory_bytes)
    except ChildOutOfMemory as exc:
        return [Bad(0, f"reading it needs more memory than input.max_document_memory_bytes "
                       f"({cfg.max_document_memory_bytes:,} bytes; {one_line(str(exc), 200)}); raise it to read such "
                       f"files", TOO_LARGE)]
    except DocumentTimeout:
        return [Bad(0, f"timeout: reading it took over input.time_limit_s ({cfg.time_limit_s:g} s); raise that limit to "
                       f"read such files", TIMEOUT)]
    except ChildFailed as exc:
        if exc.died:
            return [Bad(0, f"{exc}: the reader crashes on this {kind} file or it needs more memory than "
                           f"the machine has; save it again, or read it where there is more memory", UNREADABLE)]
        return [Bad(0, f"not a readable {kind} file ({one_line(str(exc), 300)}): it is damaged, "
                       f"cut short, another format or uses a feature the reader lacks; save it again or remove it",
                    UNREADABLE)]


def _load():
    # Every document reader's parser, imported here, once, before the child says it is ready. Told by
    # `isolated`, not by class: this module runs as __main__ in the child, a second DocumentReader.
    parsers = {r.format: r.load() for r in readers() if r.isolated}

    def read(args: tuple, data: bytes) -> list[Record | Skip | Bad]:
        split, options = args
        return list(parsers[split.format](split, data, options))

    return read


if __name__ == "__main__":
    serve(_load)
