"""Main text of an HTML page: what a model will read of it, without menus, footers and comments.

Three extractors, chosen per pipeline; `bench/bench_extract.py` measures them on trafilatura's
evaluation set (`bench/RESULTS.md`, "Extraction (issue 3)"):
- `trafilatura`: `trafilatura.extract` with comments left out: the best F1 we measured (0.926, its
  default scores 0.921), at about 25 ms a page.
- `resiliparse`: Resiliparse's `extract_plain_text` with its main-content heuristics: about 2 ms a
  page, but it keeps comment sections, related links and footers that trafilatura removes (F1 0.849).
- `hybrid` (the default): Resiliparse's parser and renderer with boilerplate rules on top, and
  trafilatura for the few pages where that leaves too little text: F1 0.921 at 5.6x the speed of
  trafilatura's default (3.7x on a crawl with many short pages, which go to trafilatura).
All take the page as text (decode bytes with `ylink_data.io.charset.decode_html`) and return the
main text, or "" when the page has none.
"""
from __future__ import annotations

import html as html_entities
import re
from typing import TYPE_CHECKING, Callable, Literal, get_args

if TYPE_CHECKING:
    from resiliparse.parse.html import DOMNode, HTMLTree

ExtractorName = Literal["hybrid", "trafilatura", "resiliparse"]
# Chosen by measurement (bench/RESULTS.md): trafilatura's default F1 (-0.0002) at 5.6x its speed.
DEFAULT_EXTRACTOR: ExtractorName = "hybrid"
EXTRACTOR_NAMES: tuple[str, ...] = get_args(ExtractorName)


def extract_text(html: str, url: str | None = None, extractor: str = DEFAULT_EXTRACTOR) -> str:
    """The main text of `html` with the named extractor ("" if it finds none)."""
    return extract_with_engine(html, url, extractor)[0]


def extract_with_engine(html: str, url: str | None = None, extractor: str = DEFAULT_EXTRACTOR) -> tuple[str, str]:
    """(main text, the engine that produced it): `hybrid` reports `hybrid:trafilatura` for the pages
    it handed to trafilatura, so a corpus can tell which text came from where."""
    try:
        fn = _EXTRACTORS[extractor]
    except KeyError:
        raise ValueError(f"unknown extractor {extractor!r} (known: {', '.join(EXTRACTOR_NAMES)})") from None
    return fn(html, url)


def load_extractor(extractor: str) -> None:
    """Import an extractor's libraries and run it once (trafilatura loads its tables on the first
    call: about 0.4 s in all). Done once per worker process, so that the first document's time limit
    is not spent on set-up."""
    extract_with_engine(_WARM_UP, None, extractor)  # too short for hybrid: runs its trafilatura too


_WARM_UP = "<html><body><article><p>Set-up.</p></article></body></html>"


# ----------------------------------------------------------------------------- trafilatura

# include_comments=False: comments are not the page's main text, and leaving them out scored higher
# than trafilatura's default (F1 0.926 vs 0.921); fast=False keeps its own fallbacks (+0.006 F1).
TRAFILATURA_OPTIONS = {"include_comments": False, "include_tables": True, "fast": False}
# In the hybrid, trafilatura only sees pages where the fast path found little: there its fast mode
# scored as well as the full one, at half the cost.
_FALLBACK_OPTIONS = {"include_comments": False, "include_tables": True, "fast": True}


def _trafilatura(html: str, url: str | None, options: dict = TRAFILATURA_OPTIONS) -> str:
    import trafilatura

    return trafilatura.extract(html, url=url, **options) or ""


# ----------------------------------------------------------------------------- resiliparse

# preserve_formatting keeps paragraphs as lines (line-based quality filters need them); bullets and
# image alt texts are not prose (leaving them out: F1 0.849 instead of 0.842).
RESILIPARSE_OPTIONS = {"main_content": True, "preserve_formatting": True, "list_bullets": False, "alt_texts": False}


def _resiliparse(html: str, url: str | None) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    return extract_plain_text(HTMLTree.parse(html), **RESILIPARSE_OPTIONS).strip()


# ----------------------------------------------------------------------------- hybrid

# Where CMSs put the article, most specific first. The first group with a match of some size wins;
# within a group the match with the most text does.
_CONTAINER_TOKENS = (
    "entry-content", "post-content", "article-content", "article-body", "articlebody", "article__body",
    "article__content", "story-body", "story-content", "post-body", "post-entry", "post_content", "post-text",
    "article-text", "articletext", "entry-body", "single-content", "content-body", "td-post-content",
    "text-content", "body-text",
)
_CONTAINERS = (
    '[itemprop="articleBody"]',
    ", ".join(f'[class*="{token}" i]' for token in _CONTAINER_TOKENS),  # ids too: lower F1, slower
    "article",
    'main, [role="main"]',
    "#content, #main, .content, .main",
)
# Boilerplate by class or id. A match is skipped only if it holds no run of three paragraphs, no
# <h1> and no three line breaks: layout wrappers named "has-sidebar" or "page-footer-wrap" hold the
# article itself. Leaving out any of these lowers F1 on the evaluation set, except "sharing",
# "breadcrumb" and "advert" (no effect there, kept as common names); "share" and "widget" were
# dropped because leaving them out raised F1 on both halves of the set (they name wrappers too).
_BOILERPLATE_TOKENS = (
    "comment", "social", "sharing", "related", "newsletter", "subscribe", "author", "meta", "tags",
    "breadcrumb", "cookie", "promo", "teaser", "advert", "caption", "credit", "footer", "sidebar", "nav",
    "pagination", "rating",
)
_SMALL = ":not(:has(p ~ p ~ p, h1, br ~ br ~ br))"
_SKIP = (
    "#comments", "#respond", ".comment-respond", ".comments-area", ".comment-list", ".commentlist",
    "#disqus_thread", '[class~="comments"]', "figcaption", ".wp-caption-text", ".sharedaddy", ".related-posts",
    "#related", "figure:not(:has(p ~ p))",
    *(f'[{attr}*="{token}" i]{_SMALL}' for token in _BOILERPLATE_TOKENS for attr in ("class", "id")),
)
_HYBRID_RENDER = {"main_content": True, "preserve_formatting": "minimal_html", "links": True,
                  "skip_elements": list(_SKIP)}

_CONTAINER_MIN_CHARS = 200  # a smaller match is a teaser, not the article
_CONTAINER_SURE_CHARS = 2000  # this much text from the container: no need to compare with the page
_CONTAINER_MIN_SHARE = 0.35  # less than this share of the whole page's text: the wrong container
_FALLBACK_BELOW_CHARS = 500  # less text than this: ask trafilatura (about 5% of pages)

# A tag ends at the next "<" too, and a link's text at the next "<a": from every "<" (or "<a") of
# text without a ">" (or "</a>") the scan would otherwise run to the end, quadratic (issue 39).
_TAG = re.compile(r"<[^<>]+>")
_LINK = re.compile(r"<a\b[^<>]*>([^<]*(?:<(?!/a>|a\b)[^<]*)*)</a>")
_HEADING = re.compile(r"^\s*<h[1-6]>")
_BLANKS = re.compile(r"\n{3,}")
# Photo credits and copyright lines, short ones only: a long line saying "©" is prose about it.
_CREDIT_LINE = re.compile(
    r"©|\(c\)\s*\d{4}|copyright|all rights reserved|alle rechte vorbehalten"
    r"|^\W*(?:foto|fotos|photo|photos|bild|credits?|quelle|source|image|picture|titelbild|abbildung|grafik)\s*:",
    re.I)


def _hybrid(html: str, url: str | None) -> tuple[str, str]:
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    text = _main_text(tree) if tree.body is not None else ""
    if len(text) < _FALLBACK_BELOW_CHARS:
        fallback = _trafilatura(html, url, _FALLBACK_OPTIONS)
        if fallback:
            return fallback, "hybrid:trafilatura"
    return text, "hybrid"


def _main_text(tree: HTMLTree) -> str:
    """The article container's text if one is found and holds enough of the page, else the page's."""
    from resiliparse.parse.html import HTMLTree

    container = _find_container(tree.body)
    if container is not None:
        inner = _render(HTMLTree.parse(container.html))
        if len(inner) >= _CONTAINER_SURE_CHARS:
            return inner
    whole = _render(tree)
    if container is not None and len(inner) >= _CONTAINER_MIN_SHARE * len(whole):
        return inner
    return whole


def _find_container(body: DOMNode) -> DOMNode | None:
    for selector in _CONTAINERS:
        matches = body.query_selector_all(selector)
        n = len(matches)
        if not n or n > 30:  # dozens of matches: a listing page, no single article
            continue
        # Indexing resiliparse's node lists costs O(n) per item: n is small here.
        best = max((matches[i] for i in range(n)), key=lambda node: len(node.text))
        if len(best.text) >= _CONTAINER_MIN_CHARS:
            return best
    return None


def _render(tree: HTMLTree) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return _clean(extract_plain_text(tree, **_HYBRID_RENDER))


def _clean(minimal_html: str) -> str:
    """Resiliparse's minimal HTML (one block per line, links kept) to plain text, dropping lines that
    are mostly links (menus, "related" lists, tag clouds), repeated lines, headings with nothing under
    them, credit and copyright lines, and the short lines after the last long one (bylines, share
    prompts, "back to top")."""
    lines: list[tuple[str, bool]] = []  # (text, is a heading)
    seen: set[str] = set()
    in_pre = False
    for raw in minimal_html.split("\n"):
        tagged = "<" in raw  # about half the lines have no tag: no regex for them
        text = _TAG.sub("", raw) if tagged else raw
        if "&" in text:
            text = html_entities.unescape(text)
        opens, closes = tagged and "<pre" in raw, tagged and "</pre>" in raw
        text = text.rstrip() if in_pre or opens else text.strip()
        in_pre = (in_pre or opens) and not closes
        if not text.strip():
            lines.append(("", False))
            continue
        size = len(text.strip())
        if "<a" in raw:
            linked = sum(len(html_entities.unescape(_TAG.sub("", m))) for m in _LINK.findall(raw))
            if (linked >= 0.5 * size and size < 100) or linked >= 0.8 * size:
                continue
        if size > 20:
            if text in seen:
                continue
            seen.add(text)
        if size < 150 and _CREDIT_LINE.search(text):
            continue
        lines.append((text, tagged and _HEADING.match(raw) is not None))
    kept = [text for i, (text, heading) in enumerate(lines) if not (heading and _nothing_under(lines, i))]
    kept = _trim_tail(kept)
    return _BLANKS.sub("\n\n", "\n".join(kept)).strip()


def _nothing_under(lines: list[tuple[str, bool]], i: int) -> bool:
    for text, heading in lines[i + 1:]:
        if text:
            return heading
    return True


def _trim_tail(lines: list[str], short: int = 30, long: int = 100) -> list[str]:
    last_long = max((i for i, line in enumerate(lines) if len(line.strip()) >= long), default=None)
    if last_long is None:
        return lines
    return lines[:last_long + 1] + [line for line in lines[last_long + 1:] if len(line.strip()) >= short]


_EXTRACTORS: dict[str, Callable[[str, str | None], tuple[str, str]]] = {
    "hybrid": _hybrid,
    "trafilatura": lambda html, url: (_trafilatura(html, url), "trafilatura"),
    "resiliparse": lambda html, url: (_resiliparse(html, url), "resiliparse"),
}
