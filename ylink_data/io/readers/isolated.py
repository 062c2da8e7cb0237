"""Document files (PDF, DOCX, PPTX, Markdown) read in a child process: the one boundary around every
document reader. Whatever happens while a file is read, it is that file's fate, never the run's:
- an exception of any type, from a reader or from the libraries under it: `unreadable`, with the
  error (a file's own parts that fail are the reader's to skip and count: document.Parts);
- longer than `input.time_limit_s`, in Python (a list label of a billion "m"s) or in C (PDFium,
  lxml): `timeout`, the child stopping itself or being killed (io/deadline.py);
- the child dying on it (a crash of PDFium or lxml, the OOM killer, a kill from outside): the file
  goes to a new child once more (deadline.DeadlineProcess.call), and is `unreadable` only when it
  kills that one too ("it killed ... twice (SIGKILL, signal 9)").
One child per worker process, started with the first document file and reused; it imports the
readers once (0.5 s from start to ready on a 2-core EPYC VM). A file then costs one round trip, its
bytes one way and its item back: 0.05-0.5 ms more than reading it in-process for the four files of
samples/documents (0.01-11 ms each; measured 2026-12, median of 50-200 reads).
"""
from __future__ import annotations

from ylink_data.engine.config import InputConfig
from ylink_data.core.timelimit import DocumentTimeout
from ylink_data.core.deadline import ChildFailed, DeadlineProcess, serve
from ylink_data.io.readers.base import TIMEOUT, UNREADABLE, Bad, Record, Skip, Split, one_line

_KIND = {"pdf": "PDF", "docx": ".docx", "pptx": ".pptx", "markdown": "Markdown"}
_PROCESS: DeadlineProcess | None = None


def reader_process() -> DeadlineProcess:
    """This process's document reader child (not started until `spawn` or the first file)."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = DeadlineProcess(__name__, name="the document reader process")
    return _PROCESS


def read_document(split: Split, data: bytes, cfg: InputConfig) -> list[Record | Skip | Bad]:
    """The file's item: a document, why it is none (Skip), or why it is quarantined (Bad)."""
    options = (cfg.ocr, cfg.ocr_languages, cfg.max_unpacked_bytes)  # what the readers use, not the config
    process = reader_process()
    process.start()  # a child that cannot start is this machine's fault, not the file's: it fails the task
    try:
        return process.call((split, options), data, cfg.time_limit_s)
    except DocumentTimeout:
        return [Bad(0, f"timeout: reading it took over input.time_limit_s ({cfg.time_limit_s:g} s); raise that limit to "
                       f"read such files", TIMEOUT)]
    except ChildFailed as exc:
        if exc.died:
            return [Bad(0, f"{exc}: the reader crashes on this {_KIND[split.format]} file or it needs more memory than "
                           f"the machine has; save it again, or read it where there is more memory", UNREADABLE)]
        return [Bad(0, f"not a readable {_KIND[split.format]} file ({one_line(str(exc), 300)}): it is damaged, "
                       f"cut short, another format or uses a feature the reader lacks; save it again or remove it",
                    UNREADABLE)]


def _load():
    # Imported here, once, before the child says it is ready: not in any file's time.
    from ylink_data.io.readers.docx import read_docx
    from ylink_data.io.readers.markdown import read_markdown
    from ylink_data.io.readers.pdf import read_pdf
    from ylink_data.io.readers.pptx import read_pptx

    def read(args: tuple, data: bytes) -> list[Record | Skip | Bad]:
        split, (ocr, ocr_languages, max_unpacked_bytes) = args
        if split.format == "pdf":
            return list(read_pdf(split, data, ocr, ocr_languages, max_unpacked_bytes))
        if split.format == "docx":
            return list(read_docx(split, data, max_unpacked_bytes))
        if split.format == "pptx":
            return list(read_pptx(split, data, max_unpacked_bytes))
        return list(read_markdown(split, data))

    return read


if __name__ == "__main__":
    serve(_load)
