"""The bundled documents with reference texts (../shared/data/documents) and the word F1 that
tests/test_documents.py and bench/bench_documents.py score readers with.

F1 over bags of tokens: words (letters and digits, lower-cased) and, for Chinese, Japanese and
Korean text, single characters, so that a document in any of them is scored the same way and
Markdown markup (`#`, `|`, `-`) counts for nothing."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]|[^\W_]+")


def tokens(text: str) -> list[str]:
    """Word tokens of the text as a reader sees it: HTML comments (docling's `<!-- image -->`
    placeholders in its references and output) are markup, not text."""
    return [t.lower() for t in _TOKEN.findall(_COMMENT.sub(" ", text))]


def word_f1(output: str, reference: str) -> float:
    out, ref = Counter(tokens(output)), Counter(tokens(reference))
    common = sum((out & ref).values())
    if not common:
        return 0.0
    precision, recall = common / sum(out.values()), common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


def reference_text(doc: Path) -> str | None:
    """The reference for a bundled document, in whichever form its source ships it."""
    for ref in (Path(f"{doc}.md"), doc.with_suffix(".md"), doc.with_suffix(".txt"),
                doc.with_name(doc.stem + ".expected.txt")):
        if ref.is_file():
            return ref.read_text(encoding="utf-8")
    elements = Path(f"{doc}.json")  # unstructured's element list
    if elements.is_file():
        return "\n".join(e["text"] for e in json.loads(elements.read_text(encoding="utf-8")))
    return None


def documents_with_references(root: Path) -> list[tuple[Path, str]]:
    """(document, reference text) for every PDF, DOCX and PPTX under documents/ that has one."""
    docs = sorted(root.glob("pdf/*/*.pdf")) + sorted(root.glob("docx/*/*.docx")) + sorted(root.glob("pptx/*/*.pptx"))
    pairs = [(doc, reference_text(doc)) for doc in docs]
    return [(doc, ref) for doc, ref in pairs if ref is not None]
