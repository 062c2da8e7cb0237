#!/usr/bin/env python3
"""Build the bundled sample crawl ``samples/crawl/`` from real web data.

Everything in ``samples/crawl/`` comes from real crawls; nothing is synthetic
except the WARC envelope around the trafilatura pages:

* Real Common Crawl / wget WARC and WET files, copied byte for byte from the
  test fixtures of public repositories (snapshotted under
  ``<repo>/../shared/data/cc_samples``):

  - commoncrawl/whirlwind-python (Apache-2.0): one CC-MAIN-2024-22 capture
  - chatnoir-eu/chatnoir-resiliparse (Apache-2.0): CC-MAIN-2020-34 excerpt,
    with Chinese SEO pages in mixed encodings
  - eugeneware/warc (BSD-3-Clause): CC-MAIN-2014-35 excerpt (uncompressed)
  - allenai/dolma (Apache-2.0): two WARC files captured with wget in 2024

* ``trafilatura-eval-pages.warc.gz``: real HTML pages from the evaluation set
  of adbar/trafilatura (Apache-2.0, snapshotted under
  ``<repo>/../shared/data/trafilatura_eval``), each wrapped in a WARC
  ``response`` record.  Selected: every page whose language (first entry of
  ``lang_by_file.json``, langid on the ground-truth snippets) is ``zh``, plus
  the first ``--en-pages`` (default 40) ``en`` pages in sorted file-name
  order; pages over 400 KB are skipped, and so are pages whose evaldata.json
  key is not an http(s) URL (e.g. ``hard::dw.com.colonial.html``): they have
  no real URL to use as WARC-Target-URI.  The HTTP header says
  ``Content-Type: text/html`` without a charset so that readers must detect
  the encoding from the page itself.  The file is byte-for-byte reproducible:
  fixed WARC-Date, uuid5 record ids, and one gzip member per record written
  by zlib, whose gzip header carries mtime=0 (checked below).

* ``licenses/<repo>.LICENSE``: the licence file of each source repository.

The crawl content itself is third-party web content (Common Crawl Terms of
Use / copyright of the sites), redistributed as in the source repositories,
for testing and evaluation.  See ``samples/crawl/SOURCE.md``.

Usage::

    python samples/build_sample_crawl.py [--shared DIR] [--out DIR] [--en-pages N]
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import shutil
import uuid
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SHARED = REPO_ROOT.parent / "shared" / "data"
DEFAULT_OUT = REPO_ROOT / "samples" / "crawl"

WARC_DATE = "2026-11-29T00:00:00Z"
MAX_PAGE_BYTES = 400 * 1024
TRAFILATURA_WARC = "trafilatura-eval-pages.warc.gz"

# (source path relative to the shared data folder, destination file name)
COPIED_FILES: list[tuple[str, str]] = [
    ("cc_samples/whirlwind_CC-MAIN-2024-22/whirlwind.warc.gz",
     "CC-MAIN-2024-22-whirlwind.warc.gz"),
    ("cc_samples/whirlwind_CC-MAIN-2024-22/whirlwind.warc.wet.gz",
     "CC-MAIN-2024-22-whirlwind.warc.wet.gz"),
    ("cc_samples/resiliparse_CC-MAIN-2020-34/tests/data/warcfile.warc.gz",
     "CC-MAIN-2020-34-excerpt.warc.gz"),
    ("cc_samples/eugeneware_CC-MAIN-2014-35/test/fixtures/"
     "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
     "CC-MAIN-2014-35-excerpt.warc"),
    ("cc_samples/eugeneware_CC-MAIN-2014-35/test/fixtures/"
     "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.wet",
     "CC-MAIN-2014-35-excerpt.warc.wet"),
    ("cc_samples/dolma/tests/data/warc/sample-0000.warc.gz",
     "dolma-wget-sample-0000.warc.gz"),
    ("cc_samples/dolma/tests/data/warc/sample-0001.warc.gz",
     "dolma-wget-sample-0001.warc.gz"),
]

# licence name in samples/crawl/licenses -> source path
LICENSES: dict[str, str] = {
    "whirlwind": "cc_samples/whirlwind_CC-MAIN-2024-22/LICENSE",
    "resiliparse": "cc_samples/resiliparse_CC-MAIN-2020-34/LICENSE",
    "eugeneware": "cc_samples/eugeneware_CC-MAIN-2014-35/LICENSE",
    "dolma": "cc_samples/dolma/LICENSE",
    "trafilatura": "trafilatura_eval/LICENSE",
}


def record_id(key: str) -> str:
    """Deterministic WARC-Record-ID derived from a URL (or file name)."""
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, key)}>"


def select_pages(traf_dir: Path, en_pages: int) -> list[tuple[str, str, Path]]:
    """Return (url, lang, path) for the zh pages, then the first en pages."""
    langs: dict[str, list[str]] = json.loads(
        (traf_dir / "lang_by_file.json").read_text(encoding="utf-8"))
    evaldata: dict[str, dict] = json.loads(
        (traf_dir / "tests" / "evaldata.json").read_text(encoding="utf-8"))
    url_by_file = {entry["file"]: url for url, entry in evaldata.items()}

    def locate(name: str) -> Path:
        for sub in ("eval", "cache"):
            path = traf_dir / "tests" / sub / name
            if path.is_file():
                return path
        raise FileNotFoundError(name)

    selected: list[tuple[str, str, Path]] = []
    for lang, limit in (("zh", None), ("en", en_pages)):
        count = 0
        for name in sorted(f for f, l in langs.items() if l[0] == lang):
            if limit is not None and count >= limit:
                break
            url = url_by_file[name]
            path = locate(name)
            if path.stat().st_size > MAX_PAGE_BYTES:
                continue
            if not url.startswith(("http://", "https://")):
                continue  # pseudo keys such as "hard::<file>" are not URLs
            selected.append((url, lang, path))
            count += 1
    return selected


def write_trafilatura_warc(pages: list[tuple[str, str, Path]], dest: Path) -> None:
    """Wrap the pages into WARC/1.0 response records (one gzip member each)."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True, warc_version="1.0")

    info = (
        "software: ylink-data samples/build_sample_crawl.py (warcio)\r\n"
        "format: WARC File Format 1.0\r\n"
        "description: real HTML pages from the adbar/trafilatura evaluation set "
        "(tests/eval, tests/cache), wrapped as response records; "
        "third-party web content, see SOURCE.md\r\n"
        "isPartOf: ylink-data sample crawl\r\n"
    ).encode("utf-8")
    writer.write_record(writer.create_warc_record(
        "", "warcinfo",
        payload=io.BytesIO(info), length=len(info),
        warc_content_type="application/warc-fields",
        warc_headers_dict={
            "WARC-Record-ID": record_id(dest.name),
            "WARC-Date": WARC_DATE,
            "WARC-Filename": dest.name,
        }))

    for url, _lang, path in pages:
        body = path.read_bytes()
        http_headers = StatusAndHeaders(
            "200 OK",
            [("Content-Type", "text/html"), ("Content-Length", str(len(body)))],
            protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(
            url, "response",
            payload=io.BytesIO(body), length=len(body),
            http_headers=http_headers,
            warc_headers_dict={
                "WARC-Record-ID": record_id(url),
                "WARC-Date": WARC_DATE,
            }))

    data = buf.getvalue()
    # zlib's gzip wrapper writes MTIME=0; make sure no timestamp sneaks in.
    assert data[:2] == b"\x1f\x8b" and data[4:8] == b"\0\0\0\0", "gzip mtime set"
    dest.write_bytes(data)


def summarize(path: Path) -> str:
    """One line: file name, records by WARC-Type, size in bytes."""
    counts: collections.Counter[str] = collections.Counter()
    with path.open("rb") as stream:
        for record in ArchiveIterator(stream):
            counts[record.rec_type] += 1
    by_type = ", ".join(f"{t}={n}" for t, n in sorted(counts.items()))
    return f"{path.name}: {sum(counts.values())} records ({by_type}), {path.stat().st_size} bytes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED,
                        help="shared data folder (default: <repo>/../shared/data)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output folder (default: <repo>/samples/crawl)")
    parser.add_argument("--en-pages", type=int, default=40,
                        help="number of en trafilatura pages (default: 40)")
    args = parser.parse_args()

    shared: Path = args.shared
    out: Path = args.out
    (out / "licenses").mkdir(parents=True, exist_ok=True)

    outputs: list[Path] = []
    for src, name in COPIED_FILES:
        shutil.copyfile(shared / src, out / name)
        outputs.append(out / name)

    pages = select_pages(shared / "trafilatura_eval", args.en_pages)
    write_trafilatura_warc(pages, out / TRAFILATURA_WARC)
    outputs.append(out / TRAFILATURA_WARC)

    for name, src in LICENSES.items():
        shutil.copyfile(shared / src, out / "licenses" / f"{name}.LICENSE")

    for path in outputs:
        print(summarize(path))


if __name__ == "__main__":
    main()
