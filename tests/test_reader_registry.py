"""The reader registry (io/readers/registry.py): one module per input format, and everything that lists
formats (input.format's values, `auto` by extension, the "cannot tell the format" error) asks it.

A toy reader registered here, for an extension no built-in reader knows, is read by a real pipeline
run over a real file; its expectations come from the file's bytes, split independently."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, Iterator

import pytest

import ylink_data
from ylink_data.core.errors import ConfigError, InputError
from ylink_data.engine.config import load_config
from ylink_data.io.listing import InputFile
from ylink_data.io.readers import plan_splits, split_extension
from ylink_data.io.readers import registry
from ylink_data.io.readers.base import Bad, Record, Skip, Split
from ylink_data.io.readers.registry import Reader, input_formats, readers, register_reader

REPO = Path(__file__).resolve().parents[1]
FAQ = REPO / "samples" / "documents" / "poetry-faq.md"  # real prose, bundled


class ParagraphReader(Reader):
    """A toy format: one record per paragraph (lines up to a blank line), at its byte offset."""

    format = "paragraphs"
    extensions = (".para",)

    def read(self, split: Split, f: IO[bytes], cfg: Any) -> Iterator[Record | Skip | Bad]:
        offset = 0
        for block in f.read().split(b"\n\n"):
            if block.strip():
                yield Record(offset, block.decode("utf-8").strip(), None, {"content_type": "text/plain"})
            offset += len(block) + 2


@pytest.fixture
def toy_reader(monkeypatch):
    """The toy reader registered for this test only: the registry is restored afterwards."""
    registry.load_readers()
    monkeypatch.setattr(registry, "READERS", dict(registry.READERS))
    register_reader(ParagraphReader)
    return ParagraphReader


def _paragraphs(data: bytes) -> list[str]:
    return [p.decode("utf-8").strip() for p in re.split(rb"\n\n", data) if p.strip()]


def _pipeline(tmp_path: Path, path: Path, **input_keys) -> dict:
    return {"input": {"paths": [str(path)], **input_keys}, "output": {"path": str(tmp_path / "out")},
            "stages": [], "ray": {"execution": "local"}}  # in this process, where the toy is registered


def test_a_registered_reader_reads_its_extension_in_a_real_run(tmp_path, toy_reader):
    data = FAQ.read_bytes()
    path = tmp_path / "faq.para"
    path.write_bytes(data)
    assert split_extension(str(path)) == ("paragraphs", None)
    expected = _paragraphs(data)
    assert len(expected) > 10

    result = ylink_data.run(_pipeline(tmp_path, path), progress=False)  # input.format: auto, by extension
    run = ylink_data.open_run(str(result.path))
    table = run.to_arrow().sort_by("id")
    assert sorted(table.column("text").to_pylist()) == sorted(expected)
    assert set(table.column("source").to_pylist()) == {str(path)}
    assert run.stats["input_records"] == run.stats["output_records"] == len(expected)
    # input.format names it as any built-in format: the same documents
    again = ylink_data.run(_pipeline(tmp_path, path, format="paragraphs"), progress=False, fresh=True)
    assert ylink_data.open_run(str(again.path)).to_arrow().sort_by("id").column("text") == table.column("text")


def test_every_registered_format_is_named_by_validate_and_by_the_format_error(tmp_path, toy_reader):
    formats = ["auto", *(r.format for r in readers())]
    assert "paragraphs" in formats and {"warc", "wet", "jsonl", "pdf", "markdown"} <= set(formats)
    with pytest.raises(ConfigError) as err:
        load_config(_pipeline(tmp_path, FAQ, format="nonsense"))
    message = str(err.value)
    assert "input.format" in message and "'nonsense'" in message
    assert [f for f in formats if f"'{f}'" not in message] == []

    unknown = tmp_path / "notes.unknown"
    unknown.write_bytes(FAQ.read_bytes())  # no extension a reader knows, no first bytes either
    with pytest.raises(InputError, match=re.escape(str(unknown))) as err:
        plan_splits([InputFile(str(unknown), unknown.stat().st_size)], load_config(_pipeline(tmp_path, unknown)).input,
                    lambda _: {})
    assert [f for f in formats[1:] if re.search(rf"\b{f}\b", str(err.value)) is None] == []


def test_ylink_validate_names_every_format_of_the_formats_package(tmp_path):
    """In a fresh process, whatever registered them: each module of formats/ is found and listed."""
    config = tmp_path / "p.yaml"
    config.write_text(json.dumps(_pipeline(tmp_path, FAQ, format="nonsense")))
    proc = subprocess.run([sys.executable, "-m", "ylink_data", "validate", str(config)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    module_formats = {r.format for r in readers() if r.__module__.startswith("ylink_data.io.readers.formats.")}
    assert len(module_formats) >= 10
    assert [f for f in sorted(module_formats) if f"'{f}'" not in proc.stderr] == [], proc.stderr


def test_an_extension_belongs_to_one_reader(toy_reader):
    class Clash(ParagraphReader):
        format = "lines"
        extensions = (".jsonl",)

    with pytest.raises(TypeError, match=r"\.jsonl.*jsonl"):
        register_reader(Clash)


def test_the_input_section_loads_no_engine_and_no_parser():
    """The io layer stands without the engine, and listing the formats imports no parser (Arrow,
    warcio, PDFium, python-docx): `ylink validate` stays light."""
    code = ("import sys; from ylink_data.io.input_config import InputConfig; "
            "InputConfig(paths=['x'], format='pdf'); "
            "print(sorted(m for m in sys.modules if m.startswith('ylink_data.engine') or m.split('.')[0] in "
            "('pyarrow', 'warcio', 'pypdfium2', 'docx', 'pptx')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("reader", readers(), ids=lambda r: r.format)
def test_every_reader_is_found_by_each_of_its_extensions_and_is_a_format_value(tmp_path, reader):
    """Generated over the registry: each extension (any case, behind any whole-file compression)
    names its reader's format, and input.format takes the format."""
    assert reader.extensions, f"{reader.format} declares no extension: `auto` never picks it"
    for ext in reader.extensions:
        assert split_extension(f"s3://bucket/dir.d/a{ext.upper()}?v=1") == (reader.format, None)
        for suffix, compression in registry.COMPRESSION.items():
            assert split_extension(f"a{ext}{suffix}") == (reader.format, compression)
    assert load_config(_pipeline(tmp_path, FAQ, format=reader.format)).input.format == reader.format
    assert reader.format in input_formats()


def test_the_built_in_formats_keep_their_order_in_messages(tmp_path):
    """input.format's values and the format error list the formats as they always have (docs, scripts)."""
    assert input_formats() == ("auto", "warc", "wet", "jsonl", "parquet", "text", "html", "pdf", "docx", "pptx",
                               "markdown")
    unknown = tmp_path / "README"
    unknown.write_bytes(FAQ.read_bytes())
    with pytest.raises(InputError, match=re.escape(
            "set input.format (warc, wet, jsonl, parquet, text, html, pdf, docx, pptx or markdown)")):
        plan_splits([InputFile(str(unknown), unknown.stat().st_size)], load_config(_pipeline(tmp_path, unknown)).input,
                    lambda _: {})
