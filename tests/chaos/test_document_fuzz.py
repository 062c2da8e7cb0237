"""Issue 23, point 1: a seeded fuzzer over every bundled document. No mutant of a PDF, DOCX, PPTX,
Markdown, HTML or WARC file may stop a run: each one is kept, dropped or quarantined, and the books
balance.

Mutants of the files in samples/documents and samples/crawl (a few thousand, from one seed): bytes
flipped, cut, deleted, repeated or inserted, numbers replaced by hostile ones (PDF object sizes and
page boxes, WARC Content-Length), and for DOCX and PPTX their ZIP members changed the way a broken
or hostile writer would: an XML element removed, repeated, renamed to one the schema lacks, wrapped
in mc:AlternateContent, given a hostile attribute value (a billion-column span, a list numbered from
9e14), the root replaced, a member dropped or its bytes damaged. Many mutants go into each run's
input folder (a run per mutant would take over an hour); the pipeline extracts HTML too, so its child
process meets the damaged pages.
"""
from __future__ import annotations

import copy
import io
import json
import random
import re
import zipfile
from collections import Counter
from pathlib import Path

from lxml import etree

import ylink_data
from ylink_data.engine.stats import check_invariant

from ..conftest import REPO, SAMPLES
from .test_readers_everywhere import first_html_page

SEED = 23
DOCS = REPO / "samples" / "documents"
# How many mutants of each seed file: 4,100 in all, read in about a minute on 2 cores.
DOCUMENT_MUTANTS = {"multi_page.pdf": 800, "word_tables.docx": 1200, "powerpoint_sample.pptx": 1200,
                    "poetry-faq.md": 300, "page.html": 300}
CRAWL_MUTANTS = {"CC-MAIN-2024-22-whirlwind.warc.gz": 120, "CC-MAIN-2014-35-excerpt.warc.wet": 120,
                 "CC-MAIN-2024-22-whirlwind.warc.wet.gz": 60}
# Every reason a quarantine entry may give: the readers' and extract's.
REASONS = {"unreadable", "encrypted", "needs_ocr", "timeout", "too_large", "error"}
HOSTILE_NUMBERS = [b"0", b"-1", b"2147483648", b"-9223372036854775809", b"900000000000000", b"1e400",
                   b"99999999999999999999999999", b"nan"]
HOSTILE_VALUES = ["", "-1", "0", "1000000000", "900000000000000", "1e400", "nan", "x" * 1000, "%1%1%1%1%1%1%1%1"]
_NUMBER = re.compile(rb"(?<![\w.])-?\d{1,12}(?:\.\d+)?(?![\w.])")
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"


# ----------------------------------------------------------------------------- byte mutations


def flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def cut(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def delete(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + data[at + rng.randint(1, 4096):]


def repeat(rng: random.Random, data: bytes) -> bytes:
    at, to = rng.randrange(len(data)), rng.randrange(len(data))
    return data[:to] + data[at:at + rng.randint(1, 4096)] * rng.randint(1, 8) + data[to:]


def insert(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data))
    junk = rng.choice([rng.randbytes(rng.randint(1, 64)), b"\xff\xfe\x00", b"\r\n" * 50, *HOSTILE_NUMBERS])
    return data[:at] + junk + data[at:]


def number(rng: random.Random, data: bytes) -> bytes:
    """A number in the file (a PDF object's /Length, a page box, a WARC Content-Length) made hostile."""
    found = list(_NUMBER.finditer(data[:200_000]))
    if not found:
        return flip(rng, data)
    m = rng.choice(found)
    return data[:m.start()] + rng.choice(HOSTILE_NUMBERS) + data[m.end():]


BYTE_MUTATIONS = [flip, cut, delete, repeat, insert, number]


def bytes_mutant(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        data = rng.choice(BYTE_MUTATIONS)(rng, data) or data[:1]
    return data


# ----------------------------------------------------------------------------- ZIP and XML mutations


def xml_mutant(rng: random.Random, xml: bytes) -> bytes:
    """One element of the part changed the way a broken or hostile writer would."""
    try:
        root = etree.fromstring(xml)
    except etree.XMLSyntaxError:
        return bytes_mutant(rng, xml)
    if rng.random() < 0.03:
        return b'<?xml version="1.0"?><foo xmlns="http://x"/>'  # another vocabulary's root
    elements = [el for el in root.iter() if isinstance(el.tag, str)]
    el = rng.choice(elements)
    parent = el.getparent()
    namespace = etree.QName(el).namespace
    kind = rng.randrange(6)
    if kind == 0 and parent is not None:
        parent.remove(el)
    elif kind == 1 and parent is not None:
        parent.insert(parent.index(el), copy.deepcopy(el))
    elif kind == 2:
        el.tag = etree.QName(namespace, f"unknown{rng.randrange(3)}").text if namespace else "unknown"
    elif kind == 3 and parent is not None:  # a shape or paragraph wrapped in markup compatibility
        alternate = etree.Element(f"{{{_MC}}}AlternateContent")
        choice = etree.SubElement(alternate, f"{{{_MC}}}{rng.choice(['Choice', 'Fallback'])}", Requires="p14")
        parent.replace(el, alternate)
        choice.append(el)
    elif kind == 4 and el.attrib:
        el.set(rng.choice(sorted(el.attrib)), rng.choice(HOSTILE_VALUES))
    else:
        el.text = rng.choice(HOSTILE_VALUES)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)


def zip_mutant(rng: random.Random, data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = {info.filename: z.read(info) for info in z.infolist()}
    for _ in range(rng.choice([1, 1, 2, 3])):
        xml = [name for name in members if name.endswith((".xml", ".rels"))]
        name = rng.choice(xml if xml and rng.random() < 0.9 else list(members))
        roll = rng.random()
        if roll < 0.75:
            members[name] = xml_mutant(rng, members[name])
        elif roll < 0.9:
            members[name] = bytes_mutant(rng, members[name]) if members[name] else b""
        else:
            members.pop(name, None)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return out.getvalue()


def mutant(rng: random.Random, name: str, data: bytes) -> bytes:
    if name.endswith((".docx", ".pptx")) and rng.random() < 0.8:
        return zip_mutant(rng, data)
    return bytes_mutant(rng, data)


def write_mutants(folder: Path, seeds: dict[str, bytes], counts: dict[str, int], rng: random.Random) -> int:
    folder.mkdir()
    for name, n in counts.items():
        for i in range(n):
            (folder / f"m{i:04d}-{name}").write_bytes(mutant(rng, name, seeds[name]))
    return sum(counts.values())


def run(folder: Path, out: Path) -> tuple[ylink_data.Run, dict]:
    cfg = {"name": "fuzz", "input": {"paths": [str(folder)], "time_limit_s": 10},
           "output": {"path": str(out)}, "stages": [{"extract": {}}],
           "ray": {"execution": "processes", "num_cpus": 2}}
    _, stats = ylink_data.run(cfg)
    return ylink_data.open_run(str(out)), stats


def check_entries(run: ylink_data.Run) -> list[dict]:
    entries = list(run.quarantine())
    for entry in entries:
        assert entry["reason"] in REASONS and entry["error"] and "\n" not in entry["error"], entry
    return entries


def test_no_mutant_of_a_bundled_document_stops_a_run_and_each_is_accounted_for(tmp_path):
    rng = random.Random(SEED)
    seeds = {name: (DOCS / name).read_bytes() for name in DOCUMENT_MUTANTS if name != "page.html"}
    seeds["page.html"] = first_html_page()
    folder = tmp_path / "documents"
    n = write_mutants(folder, seeds, DOCUMENT_MUTANTS, rng)

    docs_run, stats = run(folder, tmp_path / "out")

    assert check_invariant(stats) is None
    assert stats["input_records"] == n  # one record per file
    kept = Counter(Path(row["source"]).name for row in docs_run.to_arrow().to_pylist())
    quarantined = Counter(Path(e["file"]).name for e in check_entries(docs_run))
    assert set(kept.values()) <= {1} and set(quarantined.values()) <= {1}
    assert not kept.keys() & quarantined.keys()
    dropped = sum(sum(s["dropped"].values()) for s in stats["stages"])
    assert len(kept) + len(quarantined) + dropped == n  # the rest: dropped (empty), each once
    assert len(kept) > n // 4 and len(quarantined) > n // 10  # the mutants are neither all fine nor all broken

    # Parts left out of kept documents are counted in the read stage, and every count is on a document.
    counters = stats["stages"][0].get("counters", {})
    on_documents = Counter()
    for row in docs_run.to_arrow().to_pylist():
        on_documents.update(json.loads(row["metadata"] or "{}").get("skipped_parts", {}))
    assert counters == {f"skipped_part_{kind}": k for kind, k in on_documents.items()}
    assert on_documents["pptx_shape"] > 0  # the fuzzer reaches the shapes python-pptx has no class for


def test_no_mutant_of_a_bundled_crawl_file_stops_a_run(tmp_path):
    rng = random.Random(SEED)
    seeds = {name: (SAMPLES / name).read_bytes() for name in CRAWL_MUTANTS}
    folder = tmp_path / "crawl"
    write_mutants(folder, seeds, CRAWL_MUTANTS, rng)

    crawl_run, stats = run(folder, tmp_path / "out")

    assert check_invariant(stats) is None
    assert stats["output_records"] > 0 and stats["quarantined"] > 0
    check_entries(crawl_run)
