"""The PDF reader's running header and footer rule (pdflayout.without_running_lines) on real PDFs:
a line goes only where it repeats AND stands in a page's top or bottom margin, and never when it is
all its page holds. The PDFs are written by pikepdf (qpdf) with the standard Helvetica fonts, laid
out as Word lays out a Letter page (1 inch margins, header and footer 0.5 inch from the edge), and
read by the reader as a run reads them."""
from __future__ import annotations

from pathlib import Path

import pikepdf
import pytest
from pikepdf import Dictionary, Name

from ylink_data.io.readers import Record

from .test_documents import read

HEIGHT = 792  # Letter, in points
HEADER, FOOTER = 750, 36  # baselines of Word's header and footer (0.5 inch from the edges)
BODY_TOP = 710  # the first body line's baseline: its text starts 1 inch below the top edge


def text_pdf(path: Path, pages: list[list[tuple]]) -> Path:
    """A PDF whose pages hold the given lines, each (baseline y from the page bottom, font size,
    text, bold[, x: 72 unless given]), written to the content stream in the order given."""
    pdf = pikepdf.new()
    fonts = Dictionary({f"/F{bold:d}": pdf.make_indirect(Dictionary(
        Type=Name.Font, Subtype=Name.Type1, BaseFont=Name("/Helvetica-Bold" if bold else "/Helvetica"),
        Encoding=Name.WinAnsiEncoding)) for bold in (False, True)})
    for lines in pages:
        page = pdf.add_blank_page(page_size=(612, HEIGHT))
        page.Resources = Dictionary(Font=fonts)
        ops = "".join(f"BT /F{bold:d} {size} Tf {x[0] if x else 72} {y} Td ({text}) Tj ET\n"
                      for y, size, text, bold, *x in lines)
        page.Contents = pdf.make_stream(ops.encode("latin-1"))
    pdf.save(path)
    return path


def read_text(path: Path) -> str:
    (record,) = read(path)
    assert isinstance(record, Record), record
    return record.text


def body(page: int, first: float) -> list[tuple[float, float, str, bool]]:
    """Three lines of body text of its own for each page, at 11 pt on 13.2 pt leading."""
    words = ["oak", "river", "copper", "meadow", "falcon", "glacier", "lantern", "orchard"]
    return [(first - 13.2 * k, 11, f"Question {k + 1}: describe the {words[page % 8]} in {k + 3} words.", False)
            for k in range(3)]


def test_worksheet_keeps_its_exercise_headings_and_instructions_below_a_running_header(tmp_path):
    # Each page of an 8-page worksheet starts its body with a bold "Exercise N" heading at text size
    # and the same instruction line; the header and footer are stamped into the page after the body
    # (as PDF stamping tools do), so the heading and instruction are the page's first two lines in
    # content order, and the header and footer its last two. Only the header and footer go.
    instruction = "Read the text, then answer the questions in full sentences."
    pages = [[(BODY_TOP, 11, f"Exercise {n}", True), (BODY_TOP - 13.2, 11, instruction, False),
              *body(n, BODY_TOP - 40),
              (HEADER, 9, "Year 5 Science - Spring term worksheet", False), (FOOTER, 9, f"Page {n} of 8", False)]
             for n in range(1, 9)]
    text = read_text(text_pdf(tmp_path / "worksheet.pdf", pages))
    for n in range(1, 9):
        assert f"Exercise {n}" in text
    assert text.count(instruction) == 8
    assert "Spring term worksheet" not in text and "of 8" not in text


def test_a_heading_that_opens_every_page_is_not_a_running_header(tmp_path):
    # The same worksheet without header or footer, its headings set larger than the text: each page's
    # topmost line is a heading in the top margin band, with the instruction right below it.
    instruction = "Read the text, then answer the questions in full sentences."
    pages = [[(BODY_TOP, 14, f"Exercise {n}", True), (BODY_TOP - 16, 11, instruction, False),
              *body(n, BODY_TOP - 44)] for n in range(1, 9)]
    text = read_text(text_pdf(tmp_path / "worksheet.pdf", pages))
    for n in range(1, 9):
        assert f"# Exercise {n}\n" in text
    assert text.count(instruction) == 8


@pytest.mark.parametrize("y", [396, HEADER], ids=["mid-page", "in-the-top-margin"])
def test_pages_of_one_repeated_line_keep_it(tmp_path, y):
    # The 3,000-page PDF whose every page holds one line "Page N has some text ...": in the
    # middle of the page it is not in a margin; in the top margin it is, but it is all its page has.
    n_pages = 3000
    pages = [[(y, 11, f"Page {n} has some text about the harbour and its boats.", False)] for n in range(1, n_pages + 1)]
    text = read_text(text_pdf(tmp_path / "one_line_pages.pdf", pages))
    assert text.count("has some text about the harbour") == n_pages
    for n in (1, 2, 1500, n_pages):
        assert f"Page {n} has some text" in text


def test_a_repeated_line_that_opens_pages_far_from_their_edges_stays(tmp_path):
    # Each page's text starts halfway down (a picture above it), with the same line: the topmost
    # text of every page, set apart by a gap, but in no margin band.
    prompt = "Look at the picture above, then answer the questions."
    pages = [[(396, 11, prompt, False), *body(n, 360)] for n in range(1, 9)]
    assert read_text(text_pdf(tmp_path / "pictures.pdf", pages)).count(prompt) == 8


def test_a_table_header_row_repeated_at_the_top_of_each_page_stays(tmp_path):
    # A table continued over pages repeats its header row as the first line of each page's body,
    # set close above the rows, which run on past the margin band: body text from the edge.
    row = "Item code Quantity Unit price"
    pages = [[(BODY_TOP, 11, row, False),
              *((BODY_TOP - 13.2 * k, 11, f"A-{page}{k:02d} {k + 2} {k * 3}.50", False) for k in range(1, 21))]
             for page in range(1, 7)]
    assert read_text(text_pdf(tmp_path / "table.pdf", pages)).count(row) == 6


def test_running_header_and_footer_in_the_margins_go(tmp_path):
    # A 6-page report: a running head with the page number at the right of its row (PDFium reads
    # the row as one line), and a three-line footer (the old rule, the first or last two lines of a page, left its
    # first line). The title page opens with the report's title, the running head's own words, as a
    # heading at the top of the body: the title is text and stays.
    footer = [(FOOTER + 22, 8, "Harbour Board of Kingsport", False),
              (FOOTER + 11, 8, "12 Quay Street, Kingsport", False)]
    pages = []
    for n in range(1, 7):
        lines = [(HEADER, 9, "Annual Report 2024", False)] if n > 1 else [(BODY_TOP - 10, 20, "Annual Report 2024", True)]
        lines += [*body(n, BODY_TOP - 40), *footer, (FOOTER, 8, f"Page {n} of 6", False)]
        if n > 1:
            lines.append((HEADER, 9, f"{n}", False, 530))
        pages.append(lines)
    text = read_text(text_pdf(tmp_path / "report.pdf", pages))
    assert text.startswith("# Annual Report 2024\n")
    assert text.count("Annual Report 2024") == 1
    for gone in ("Harbour Board of Kingsport", "Quay Street", "of 6"):
        assert gone not in text
    for n in range(1, 7):
        for _, _, line, _ in body(n, 0):
            assert line in text


def test_running_footers_of_a_real_pdf_go_and_its_title_stays(shared_data):
    # redp5110_sampled.pdf (IBM Redpaper): six of its 18 pages have the footer "<page> Row and Column
    # Access Control Support in IBM DB2 for i", 28-37 pt above the bottom edge; two of those pages
    # (6 and 8) are ones where PDFium's string leaves soft hyphens out, whose lines get their position
    # through PDFium's text-to-char index map. The cover's title, the same words, stays.
    text = read_text(shared_data / "documents/pdf/docling/redp5110_sampled.pdf")
    assert "Access Control Support" not in text
    assert text.count("Support in IBM DB2 for i") == 2  # the title on the front and back covers
