"""OCR of PDF pages without a usable text layer (`input.ocr: true`): the page rendered by PDFium at
300 dpi (less for a page too large for MAX_PIXELS), read by the `tesseract` binary (Debian's
tesseract-ocr, tesseract-ocr-chi-sim). Through the binary rather than a Python binding: nothing to
compile, and a page that hangs it can be timed out."""
from __future__ import annotations

import io
import math
import re
import shutil
import subprocess

import pypdfium2 as pdfium

from ylink_data.core.errors import InputError

DPI = 300
# The most pixels a page is rendered to: a larger page is rendered at a lower resolution that fits.
# 300 dpi is 8.7 million pixels for an A4 page and 35 million for A2; a one-page PDF of 14400 x 14400
# pt (a poster, or a hostile file) would be 3.6 billion, over 10 GB as RGB, and the run died with
# MemoryError. 40 million pixels: A2 and smaller pages at the full 300 dpi, 160 MB of BGRA at most.
MAX_PIXELS = 40_000_000
TIMEOUT_S = 300
_CJK_SPACE = re.compile(r"(?<=[\u2e80-\u9fff\uff00-\uffef]) (?=[\u2e80-\u9fff\uff00-\uffef])")


def tesseract() -> str:
    """The tesseract binary, or a config error that says how to install it."""
    path = shutil.which("tesseract")
    if path is None:
        raise InputError("input.ocr: true needs the `tesseract` binary: apt-get install tesseract-ocr "
                         "tesseract-ocr-chi-sim (or set input.ocr: false to quarantine such pages as needs_ocr)")
    return path


def render_scale(width_pt: float, height_pt: float) -> float:
    """Pixels per PDF point (1/72 inch) to render a page at: 300 dpi, or less where that would make
    more than MAX_PIXELS."""
    scale = DPI / 72
    area = width_pt * height_pt
    if area * scale * scale > MAX_PIXELS:
        scale = math.sqrt(MAX_PIXELS / area)
    return scale


def ocr_page(page: pdfium.PdfPage, languages: str) -> str:
    """The page's text as Tesseract reads it: paragraphs separated by a blank line."""
    try:
        image = page.render(scale=render_scale(*page.get_size())).to_pil()
    finally:
        page.close()
    png = io.BytesIO()
    image.save(png, format="PNG")
    done = subprocess.run([tesseract(), "stdin", "stdout", "-l", languages, "--psm", "3"],
                          input=png.getvalue(), capture_output=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        err = " ".join(done.stderr.decode(errors="replace").split())[:300]
        raise InputError(f"tesseract failed (exit {done.returncode}): {err}; check input.ocr_languages "
                         f"({languages!r}) names installed languages (`tesseract --list-langs`)")
    text = done.stdout.decode("utf-8", errors="replace")
    text = re.sub(r"(?<=[^\W\d_])-\n(?=[a-z])", "", text)  # a word broken at a line end
    # Tesseract puts a space between Chinese characters; paragraphs end with a blank line.
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return "\n\n".join(_CJK_SPACE.sub("", p) for p in paragraphs if p)
