"""Text normalisation as plain functions: mojibake repair, line endings, invisible characters,
Unicode normal forms and whitespace. The `normalize` op chains them; each is usable on its own.

Almost all web text needs almost none of these fixes, so each function first asks, as cheaply as
Python allows (a `str` method, a substring test, one compiled-regex scan), whether there is
anything to do, and returns its input untouched when there is not. No per-character Python loops.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from typing import Literal

import ftfy
from ftfy.badness import is_bad

UnicodeForm = Literal["NFC", "NFKC"]

# ftfy set to undo encoding mistakes only: UTF-8 read with a single-byte codec (Windows-1252,
# Latin-1, MacRoman, ...), and C1 controls, which are Windows-1252 punctuation read as Latin-1.
# Quotes, dashes, HTML entities, full-width forms, ligatures and line breaks are not encoding
# mistakes and are left alone (the other steps, or nobody, own them); so is ftfy's own NFC.
FTFY_CONFIG = ftfy.TextFixerConfig(
    unescape_html=False, remove_terminal_escapes=False, fix_encoding=True, restore_byte_a0=True,
    replace_lossy_sequences=True, decode_inconsistent_utf8=True, fix_c1_controls=True,
    fix_latin_ligatures=False, fix_character_width=False, uncurl_quotes=False, fix_line_breaks=False,
    fix_surrogates=True, remove_control_chars=False, normalization=None, explain=False)
_FTFY_EXPLAINED = FTFY_CONFIG._replace(explain=True)

# Where ftfy's mojibake heuristic (`ftfy.badness.BADNESS_RE`, ftfy 6.3) can match. Each of its
# patterns holds two adjacent characters outside ASCII and the CJK blocks (ideographs, kana,
# hangul, CJK and full-width punctuation), or one of Â Ã Œ œ or a C1 control, and none is longer
# than 7 characters: the heuristic only has to see a few characters around such spots. Lone curly
# quotes in English and “” in Chinese are not spots, which is most of what clean text holds.
_NOT_MOJIBAKE = (r"\x00-\x7f\u2e80-\u2fdf\u3000-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                 r"\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff")
_SUSPECT = re.compile(f"[^{_NOT_MOJIBAKE}]{{2,}}|[\\x80-\\x9fÂÃŒœ]")
_CONTEXT = 8  # characters either side of a spot: more than the longest pattern


def may_hold_mojibake(text: str) -> bool:
    """True when ftfy's heuristic finds something to look at in `text`. It costs one regex scan
    and the heuristic on a few characters around each spot where it could match, instead of the
    heuristic over the whole text, which runs at ~5 M characters/s and would be the slowest step
    of the op by far (see `tests/test_normalize.py` for the check that it never hides a fix)."""
    if text.isascii():
        return False
    window: tuple[int, int] | None = None
    for m in _SUSPECT.finditer(text):
        start, end = m.start() - _CONTEXT, m.end() + _CONTEXT
        if window is not None and start > window[1]:  # a new window: test the one before it
            if is_bad(text[max(window[0], 0):window[1]]):
                return True
            window = None
        window = (start if window is None else window[0], end)
    return window is not None and is_bad(text[max(window[0], 0):window[1]])


def fix_mojibake(text: str) -> str:
    """Repair text that was decoded with the wrong codec ("cafÃ©" -> "café"; ftfy). Text in which
    nothing looks like mojibake is returned as is, without entering ftfy.

    A page read whole with the wrong codec is re-decoded whole: ftfy's own line-by-line repair
    misses lines too short for its heuristic (a lone "å…±" for 共: half of our real Chinese pages
    made into mojibake came back incomplete). Text that does not re-decode whole (one bad paragraph
    among good ones) is repaired line by line."""
    if not may_hold_mojibake(text):
        return text
    whole = ftfy.fix_and_explain(text, _FTFY_EXPLAINED)
    if whole.explanation and whole.explanation[0].action == "encode":
        return whole.text
    return ftfy.fix_text(text, FTFY_CONFIG)


# CR and CRLF, and the other characters that `str.splitlines` treats as line breaks and that mean
# one in real text: vertical tab, form feed, NEL, the Unicode line and paragraph separators.
_LINE_BREAK = re.compile(r"[\r\x0b\x0c\x85\u2028\u2029]")


def normalize_line_endings(text: str) -> str:
    if _LINE_BREAK.search(text) is None:
        return text
    return _LINE_BREAK.sub("\n", text.replace("\r\n", "\n"))


# C0 controls but tab, newline and CR (a line ending: `normalize_line_endings` owns it), DEL, C1.
CONTROLS = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
# Invisible characters with no meaning in plain text: zero-width space, word joiner, the BOM (also
# the zero-width no-break space), the Mongolian vowel separator that was once a space. The
# zero-width joiner and non-joiner stay: emoji sequences and Persian and Indic scripts need them.
ZERO_WIDTH = r"[\u200b\u2060\ufeff\u180e]"


def invisible_pattern(controls: bool = True, zero_width: bool = True) -> re.Pattern[str] | None:
    """One regex for the invisible characters to delete, or None when neither kind is."""
    parts = [p for p, on in ((CONTROLS, controls), (ZERO_WIDTH, zero_width)) if on]
    return re.compile("|".join(parts)) if parts else None


_INVISIBLE = invisible_pattern()


def remove_invisible(text: str, pattern: re.Pattern[str] | None = _INVISIBLE) -> str:
    return pattern.sub("", text) if pattern is not None else text


def normalize_unicode(text: str, form: UnicodeForm = "NFC") -> str:
    """NFC composes (e + combining acute -> é) and changes nothing a reader sees. NFKC also folds
    compatibility forms: full-width Latin letters, digits and punctuation (common in Chinese web
    text: ＡＢＣ１２３，), the ideographic space, ligatures, circled and superscript digits.
    CPython checks for already-normal text first, so normal text costs one scan."""
    return unicodedata.normalize(form, text)


# Two or more spaces/tabs after visible text on a line (the look-behind sits after the first two
# so that the scan can start from a literal class): indentation and lone tabs are kept.
_SPACE_RUN = re.compile(r"[ \t]{2}(?<=[^ \t\n][ \t]{2})[ \t]*")
_TRAILING = re.compile(r"(?<![ \t])[ \t]+$", re.M)  # from a run's start only: linear in a long run


def collapse_spaces(text: str) -> str:
    """Runs of spaces/tabs inside a line become one space; indentation (verse, code, lists) and
    lone tabs (tab-separated values) stay."""
    if "  " not in text and "\t" not in text:
        return text
    return _SPACE_RUN.sub(" ", text)


def strip_trailing_spaces(text: str) -> str:
    if " \n" not in text and "\t\n" not in text and text[-1:] not in (" ", "\t"):
        return text
    return _TRAILING.sub("", text)


@functools.lru_cache(maxsize=8)
def _blank_line_runs(max_blank_lines: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Runs of more than `max_blank_lines` blank (or spaces-only) lines: at the very start of the
    text, and after a line break (a pattern that starts with a literal scans fastest). The lines past
    the first `more` are one class run to the run's last line break: a group repeated over a run of
    a hundred thousand lines keeps a backtracking point for each (3-5x slower per line at 256 KB)."""
    more = max_blank_lines + 1
    return (re.compile(r"\A(?:[ \t]*\n){%d}(?:[ \t\n]*\n)?" % more),
            re.compile(r"\n(?:[ \t]*\n){%d}(?:[ \t\n]*\n)?" % more))


def limit_blank_lines(text: str, max_blank_lines: int = 1) -> str:
    """Runs of more than `max_blank_lines` blank lines become exactly that many."""
    at_start, after_break = _blank_line_runs(max_blank_lines)
    text = at_start.sub("\n" * max_blank_lines, text, count=1)
    return after_break.sub("\n" * (max_blank_lines + 1), text)


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_KANA = re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u31f0-\u31ff\uff66-\uff9d]")  # not ・ or ー: Chinese uses them


def looks_chinese(text: str) -> bool:
    """Han characters, and kana fewer than one for every five of them. Japanese kanji must not be
    'simplified' into Chinese forms, and Japanese running text has about as much kana as kanji;
    Chinese text borrows a little (の in web slang, katakana product names in the news)."""
    han = len(_HAN.findall(text))
    return han > 0 and len(_KANA.findall(text)) * 5 < han
