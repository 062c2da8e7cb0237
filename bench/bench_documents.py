"""Benchmark: document readers (issue 15) against markitdown, docling's non-model backends and
pdfplumber, on the bundled documents with references (../shared/data/documents: 9 PDFs, 17 DOCX,
4 PPTX).

    .venv/bin/python bench/bench_documents.py [--repeats 3]

For each format and side: mean word F1 over the files (tokens of tests/doctexts.py: words, and
single characters for Chinese; Markdown markup counts for nothing) and pages per CPU-second (pages
for PDF, slides for PPTX, files for DOCX, which has no pages), i.e. pages/s per core. Every side
reads the same bytes from memory and must return text; a side that raises on a file scores 0 for
it (the error is printed). Timing: the sides take turns `--repeats` times over each format's files
and the median CPU time (`time.process_time`, all threads of this process) is taken.

Sides:
- ylink: `ylink_data.io.readers.read_split` (pypdfium2, python-docx, python-pptx), as a run reads.
- markitdown: `MarkItDown().convert_stream(...)`, its pdf/docx/pptx converters (pdfminer, mammoth,
  python-pptx).
- docling: `MsWordDocumentBackend` and `MsPowerpointDocumentBackend` to a DoclingDocument, exported
  to Markdown; for PDF, the docling-parse backend without any model: each page's text cells, one a
  line (docling's layout and table models would need a hub download).
- pdfplumber: `page.extract_text()` per page (PDF only).
"""
from __future__ import annotations

import argparse
import io
import platform
import statistics
import sys
import time
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from benchtools import WALL_OVER_CPU, timed  # noqa: E402
from tests.conftest import SHARED_DATA  # noqa: E402
from tests.doctexts import documents_with_references, word_f1  # noqa: E402

warnings.filterwarnings("ignore")
FORMATS = ("pdf", "docx", "pptx")


def ylink(path: Path, data: bytes) -> str:
    from ylink_data.io.input_config import InputConfig
    from ylink_data.io.readers import Record, Split, read_split, split_extension

    split = Split(str(path), split_extension(str(path))[0])
    items = list(read_split(split, io.BytesIO(data), InputConfig(paths=["x"])))
    records = [i for i in items if isinstance(i, Record)]
    if not records:
        raise RuntimeError(f"no document: {items}")
    return records[0].text


def markitdown_side() -> Callable[[Path, bytes], str]:
    from markitdown import MarkItDown, StreamInfo

    md = MarkItDown(enable_plugins=False)

    def run(path: Path, data: bytes) -> str:
        return md.convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=path.suffix)).text_content
    return run


def docling_side() -> Callable[[Path, bytes], str]:
    from docling.backend.docling_parse_backend import ThreadedDoclingParseDocumentBackend
    from docling.backend.mspowerpoint_backend import MsPowerpointDocumentBackend
    from docling.backend.msword_backend import MsWordDocumentBackend
    from docling.datamodel.backend_options import ThreadedDoclingParseBackendOptions
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.document import InputDocument

    def run(path: Path, data: bytes) -> str:
        stream = io.BytesIO(data)
        if path.suffix == ".pdf":
            doc = InputDocument(path_or_stream=stream, format=InputFormat.PDF, filename=path.name,
                                backend=ThreadedDoclingParseDocumentBackend,
                                backend_options=ThreadedDoclingParseBackendOptions(parser_threads=1, render_pages=False))
            backend = doc._backend
            try:
                return "\n\n".join("\n".join(c.text for c in page.get_text_cells()) for page in backend.iter_pages())
            finally:
                backend.unload()
        fmt, cls = ((InputFormat.DOCX, MsWordDocumentBackend) if path.suffix == ".docx"
                    else (InputFormat.PPTX, MsPowerpointDocumentBackend))
        doc = InputDocument(path_or_stream=stream, format=fmt, filename=path.name, backend=cls)
        return doc._backend.convert().export_to_markdown()
    return run


def pdfplumber_side(path: Path, data: bytes) -> str:
    import pdfplumber

    with pdfplumber.open(io.BytesIO(data)) as pdf:
        return "\n\n".join(page.extract_text() or "" for page in pdf.pages)


def pages(path: Path, data: bytes) -> int:
    if path.suffix == ".pdf":
        import pypdfium2

        return len(pypdfium2.PdfDocument(data))
    if path.suffix == ".pptx":
        import pptx

        return len(pptx.Presentation(io.BytesIO(data)).slides)
    return 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    pairs = documents_with_references(SHARED_DATA / "documents")
    files = {fmt: [(p, p.read_bytes(), ref) for p, ref in pairs if p.suffix == f".{fmt}"] for fmt in FORMATS}
    sides: dict[str, Callable[[Path, bytes], str]] = {"ylink": ylink, "markitdown": markitdown_side(),
                                                      "docling": docling_side(), "pdfplumber": pdfplumber_side}
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}; pypdfium2 {version('pypdfium2')}, python-docx {version('python-docx')}, "
          f"python-pptx {version('python-pptx')}, markitdown {version('markitdown')}, "
          f"docling-slim {version('docling-slim')}, docling-parse {version('docling-parse')}, "
          f"pdfplumber {version('pdfplumber')}")
    print("| format | side | files | pages | mean F1 | min F1 | pages/s per core | ylink speed x | F1 - ylink |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fmt in FORMATS:
        docs = files[fmt]
        n_pages = sum(pages(p, d) for p, d, _ in docs)
        active = {name: fn for name, fn in sides.items() if fmt == "pdf" or name != "pdfplumber"}
        f1s: dict[str, list[float]] = {}
        failed: dict[str, set[str]] = {}
        for name, fn in active.items():
            scores = []
            for path, data, ref in docs:
                try:
                    scores.append(word_f1(fn(path, data), ref))
                except Exception as exc:  # a peer that cannot read a file scores 0 on it
                    failed.setdefault(name, set()).add(path.name)
                    print(f"#   {name} failed on {path.name}: {type(exc).__name__}: {str(exc)[:120]}")
                    scores.append(0.0)
            f1s[name] = scores
        cpu: dict[str, list[float]] = {name: [] for name in active}
        for _ in range(args.repeats):
            for name, fn in active.items():
                def read_all(fn=fn, name=name):
                    for path, data, _ in docs:
                        if path.name not in failed.get(name, ()):
                            try:
                                fn(path, data)
                            except Exception:
                                pass
                cpu[name].append(timed(read_all))
        # A side's rate counts the pages of the files it read (a failed file is not timed).
        read_pages = {name: sum(pages(p, d) for p, d, _ in docs if p.name not in failed.get(name, ()))
                      for name in active}
        rates = {name: read_pages[name] / statistics.median(t) for name, t in cpu.items()}
        ours = statistics.mean(f1s["ylink"])
        for name in active:
            mean = statistics.mean(f1s[name])
            print(f"| {fmt} | {name} | {len(docs)} | {n_pages} | {mean:.3f} | {min(f1s[name]):.3f} | "
                  f"{rates[name]:.1f} | {rates['ylink'] / rates[name]:.1f} | {mean - ours:+.3f} |")
        per_file = " ".join(f"{p.name}={s:.3f}" for (p, _, _), s in zip(docs, f1s["ylink"]))
        print(f"#   ylink per file: {per_file}")
    print(f"# wall/CPU per timed call: median {statistics.median(WALL_OVER_CPU):.2f}")


if __name__ == "__main__":
    main()
