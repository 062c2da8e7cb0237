"""qa_extract: precision and recall of the reference FAQ pairs (issue 15; goal 0.95 each).

Two routes over the same real pages (../shared/data/documents/html_faq: 12 recipe pages with 59
reference pairs, and 6 pages of trafilatura's evaluation set with 30):
- markup: the op on each page as the HTML reader gives it (JSON-LD and microdata through extruct);
- text: the op on trafilatura's Markdown of each recipe page (FAQ headings and Q:/A: markers), i.e.
  what the op finds once the markup is gone (documents converted to Markdown, pages after extract).
Matching as in tests/test_qa_extract.py: question and answer equal after decoding entities,
removing tags, NFKC, case-folding and keeping only word characters. No peer extracts such pairs
without a model (the issue's survey), so there is no ratio: pages per CPU-second are given alone.

    .venv/bin/python bench/bench_qa_extract.py [--shared ../shared/data]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchtools import timed  # noqa: E402
from tests.test_qa_extract import norm, references  # noqa: E402
from ylink_data.io.charset import decode_html  # noqa: E402
from ylink_data.ops import build_op  # noqa: E402
from ylink_data.ops.base import Document  # noqa: E402


def score(got: set, expected: set) -> str:
    hits = len(got & expected)
    return (f"pairs {len(got)} found / {len(expected)} reference, {hits} matched: "
            f"precision {hits / max(1, len(got)):.3f}, recall {hits / len(expected):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    args = parser.parse_args()
    refs = references(Path(args.shared))
    op = build_op("qa_extract", {})

    pages = [(path, Document(path.name, decode_html(path.read_bytes())[0],
                             metadata={"content_type": "text/html"}), d) for path, d in refs]
    results: dict[str, list] = {}
    seconds = timed(lambda: results.update({p.name: op.split(doc) for p, doc, _ in pages}))
    for label, subset in (("recipe pages (12)", pages[:12]), ("trafilatura pages (6)", pages[12:]),
                          ("all 18 pages", pages)):
        got = {(p.name, norm(r["question"]), norm(r["answer"])) for p, _, _ in subset
               for r in (results[p.name] if isinstance(results[p.name], list) else [])}
        expected = {(p.name, norm(q["question"]), norm(q["answer_raw"])) for p, _, d in subset for q in d["qa"]}
        print(f"markup, {label}: {score(got, expected)}")
    print(f"markup: {len(pages) / seconds:.1f} pages per CPU-second ({seconds:.2f} s for {len(pages)} pages, "
          f"{sum(len(doc.text) for _, doc, _ in pages) / 1e6:.1f} MB of HTML)")

    import trafilatura

    got, expected = set(), set()
    for path, doc, d in pages[:12]:
        markdown = trafilatura.extract(doc.text, output_format="markdown", include_formatting=True) or ""
        rows = op.split(Document(path.name, markdown))
        got |= {(path.name, norm(r["question"]), norm(r["answer"])) for r in (rows if isinstance(rows, list) else [])}
        expected |= {(path.name, norm(q["question"]), norm(q["answer_raw"])) for q in d["qa"]}
    print(f"text (trafilatura Markdown), recipe pages (12): {score(got, expected)}")


if __name__ == "__main__":
    main()
