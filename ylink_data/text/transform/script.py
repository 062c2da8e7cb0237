"""Which writing systems a text uses, and the language its script settles on its own: Han characters
without kana are Chinese, kana are Japanese, hangul is Korean. Language ID uses this as a prior in
front of its statistical model, which misreads short Chinese (`langid`'s docstring); ops that count
words or shingles use it to tell text written without spaces between words (`written_unspaced`,
and `is_unspaced` for a language code) where no language ID ran. This module is the one place that
decides both.

Counted per text, column-wise over a whole batch with numpy (one table look-up per character, about
10 ns; no Python loop per character):
- `han`: CJK ideographs (the unified blocks, extension A, the compatibility block and the
  supplementary planes' extensions), also 々 and 〇.
- `kana`: hiragana and katakana letters, full- and half-width, except those that web text uses as
  drawing strokes in emoticons (ツ シ ノ: `¯\\_(ツ)_/¯`, `(ノ°▽°)ノ`; ｼ ﾂ ﾉ) and the iteration marks;
  the prolonged sound mark ー and the middle dot ・ are common to Chinese text and not counted either.
- `hangul`: precomposed hangul syllables. Bare jamo (ㅋㅋ, ㅠㅠ: laughing and crying in chat text)
  are emoticons outside Korean text and are not counted.
- `words`: runs of letters of any other script (Latin, Cyrillic, Greek...), each run one word.
- `japanese_kanji`: Han characters in Japanese forms that Chinese does not write: in the JIS
  character set (Shift_JIS) but in neither Chinese one (GB2312, simplified; Big5, traditional),
  848 characters such as 変 様 経 駅 図 込 働 (Chinese 变/變, 样/樣...). Derived from Python's codecs.
"""
from __future__ import annotations

import functools
import re
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HAN, KANA, HANGUL, LETTER, JAPANESE_KANJI = 1, 2, 3, 4, 5  # look-up table categories (0: anything else)
COLUMNS = ("han", "kana", "hangul", "words", "japanese_kanji")

# A word of another script stands for about two Han characters (Chinese words are 1.5-2 characters
# long), so a text is "written in CJK" when it has at least two CJK characters per word of other
# scripts: "据ESPN消息，湖人方面确认拜纳姆并无大恙" is Chinese, "Xi Jinping (习近平) met the press" is not.
CJK_PER_WORD = 2
# Japanese running text writes its grammar in kana: in 92,036 real Japanese lines (Debian's Japanese
# manual pages) kana are a median 76% of the kana and kanji, 37% or more in 99% of the lines, under
# 10% in 0.25% (kanji-only fragments, mostly; bench/RESULTS.md, "Short lines"). Chinese text borrows
# a kana now and then (の in web slang, a katakana brand name).
# Japanese needs both: at least KANA_MIN kana, and kana at least KANA_SHARE of the kana and Han;
# Chinese has kana below that share (none, or a stray one in a longer text) and no Japanese-form kanji.
KANA_MIN = 2
KANA_SHARE = 0.1

_HAN_RANGES = ((0x3005, 0x3005), (0x3007, 0x3007), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
_ASTRAL_HAN = (0x20000, 0x3134F)
_KANA_RANGES = ((0x3041, 0x3096), (0x30A1, 0x30FA), (0x31F0, 0x31FF), (0xFF66, 0xFF9D))
_EMOTICON_KANA = "ツシノｼﾂﾉ"
_HANGUL_SYLLABLES = (0xAC00, 0xD7A3)
# Any character counted as Han, kana or hangul, for RE2 (Arrow's regular expressions).
_CJK_RE2 = "[" + "".join(f"\\x{{{lo:x}}}-\\x{{{hi:x}}}" for lo, hi in (
    *_HAN_RANGES, _ASTRAL_HAN, *_KANA_RANGES, _HANGUL_SYLLABLES)) + "]"


@functools.cache
def _table() -> np.ndarray:
    """Category of every code point of the Basic Multilingual Plane (built once per process, about 50 ms)."""
    table = np.zeros(0x10000, np.uint8)
    table[[c for c in range(0x10000) if chr(c).isalpha()]] = LETTER
    table[0xD800:0xE000] = 0  # surrogates
    for category, ranges in ((HAN, _HAN_RANGES), (KANA, _KANA_RANGES), (HANGUL, (_HANGUL_SYLLABLES,))):
        for lo, hi in ranges:
            table[lo:hi + 1] = category
    table[[ord(c) for c in _japanese_kanji()]] = JAPANESE_KANJI
    table[[ord(c) for c in _EMOTICON_KANA]] = 0
    table[0x1100:0x1200] = table[0x3130:0x3190] = table[0xA960:0xA980] = table[0xD7B0:0xD800] = 0  # jamo
    return table


def _japanese_kanji() -> list[str]:
    def encodes(char: str, codec: str) -> bool:
        try:
            char.encode(codec)
        except UnicodeEncodeError:
            return False
        return True

    return [chr(c) for c in range(0x4E00, 0xA000)
            if encodes(chr(c), "shift_jis") and not encodes(chr(c), "gb2312") and not encodes(chr(c), "big5")]


# Languages written without spaces between words, by their ISO 639-1 and 639-3 codes and lid.176's
# codes for Chinese varieties: their words cannot be split on spaces (quality rules cut them with
# jieba, MinHash shingles their characters).
UNSPACED_LANGUAGES = frozenset({"zh", "zho", "chi", "cmn", "yue", "wuu", "lzh", "ja", "jpn"})


@functools.lru_cache(maxsize=1024)
def is_unspaced(lang: str | None) -> bool:
    """Whether a language code (`zh`, `zh-Hant`, `ja_JP`, `jpn`, `__label__yue`...) names a language
    written without spaces between words (`UNSPACED_LANGUAGES`)."""
    if not lang:
        return False
    code = re.split(r"[-_]", lang.strip().lower().removeprefix("__label__"), maxsplit=1)[0]
    return code in UNSPACED_LANGUAGES


def has_cjk(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Whether each text holds a Han, kana or hangul character: one column-wise pass (about 1 us per
    KB), so that only those texts are counted."""
    return pc.fill_null(pc.match_substring_regex(texts, _CJK_RE2), False).to_numpy(zero_copy_only=False)


def script_counts(texts: Sequence[str]) -> np.ndarray:
    """(len(texts), 5) int64 counts per text, columns as in `COLUMNS` (see the module docstring),
    for the whole batch at once."""
    n = len(texts)
    if n == 0:
        return np.zeros((0, len(COLUMNS)), np.int64)
    lengths = np.fromiter(map(len, texts), np.int64, n)
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), np.uint32)
    category = _table()[np.minimum(codes, 0xFFFF)]
    category[codes > 0xFFFF] = 0
    category[(codes >= _ASTRAL_HAN[0]) & (codes <= _ASTRAL_HAN[1])] = HAN
    row = np.repeat(np.arange(n), lengths)
    counts = np.bincount(row * 6 + category, minlength=n * 6).reshape(n, 6)
    letter = category == LETTER
    starts = letter.copy()
    starts[1:] &= ~letter[:-1]
    first = np.cumsum(lengths) - lengths  # a word never runs on from the text before
    first = first[lengths > 0]
    starts[first] = letter[first]
    words = np.bincount(row[starts], minlength=n)
    han = counts[:, HAN] + counts[:, JAPANESE_KANJI]
    return np.column_stack([han, counts[:, KANA], counts[:, HANGUL], words, counts[:, JAPANESE_KANJI]]).astype(np.int64)


def _cjk_text(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `script_counts`: whether the text is written mostly in CJK (at least `CJK_PER_WORD`
    CJK characters per word of other scripts), and whether that CJK is Korean (hangul syllables at
    least half of it)."""
    han, kana, hangul, words = (counts[:, i] for i in range(4))
    cjk = han + kana + hangul
    settled = (cjk > 0) & (cjk >= CJK_PER_WORD * words)
    return settled, settled & (hangul >= han + kana)


def script_languages(counts: np.ndarray) -> tuple[list[str | None], np.ndarray]:
    """For each row of `script_counts`: the language its script settles (`zh`, `ja`, `ko`, or None
    when the text is not mostly CJK, so a statistical model must decide), and the share of the text
    written in CJK, counting a word of another script as `CJK_PER_WORD` characters (0 where None).

    - not settled: no CJK character, or fewer than `CJK_PER_WORD` per word of another script;
    - `ko`: hangul syllables are at least half of the CJK characters (Korean text uses a few Han);
    - `ja`: at least `KANA_MIN` kana, and kana at least `KANA_SHARE` of the kana and Han;
    - `zh`: Han characters, kana under `KANA_SHARE` of them and no Japanese-form kanji.
    Left to the model: one kana among few Han ("我の最爱", "nice(1) を参照。"), and Han text without
    kana that holds a Japanese-form kanji (a kanji-only Japanese phrase such as "環境変数"); a
    kanji-only Japanese phrase in forms common to both languages ("制御演算子") reads as `zh`.
    """
    han, kana, hangul, words, japanese_kanji = (counts[:, i] for i in range(len(COLUMNS)))
    settled, ko = _cjk_text(counts)
    kana_share = kana >= KANA_SHARE * (han + kana)
    ja = settled & ~ko & (kana >= KANA_MIN) & kana_share
    zh = settled & ~ko & (han > 0) & ~kana_share & (japanese_kanji == 0)
    langs: list[str | None] = [None] * len(counts)
    for code, rows in (("zh", zh), ("ja", ja), ("ko", ko)):
        for i in np.flatnonzero(rows):
            langs[i] = code
    cjk = han + kana + hangul
    share = np.where(zh | ja | ko, cjk / np.maximum(cjk + CJK_PER_WORD * words, 1), 0.0)
    return langs, share


def written_unspaced(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Whether each text is written mostly in Han and kana, without spaces between words: the texts
    `script_languages` settles as `zh` or `ja`, and those it leaves to a model between the two (a
    lone kana, a Japanese-form kanji), which are unspaced either way. Column-wise: only texts with a
    CJK character are counted."""
    out = np.zeros(len(texts), bool)
    rows = np.flatnonzero(has_cjk(texts))
    if len(rows):
        settled, korean = _cjk_text(script_counts(texts.take(pa.array(rows)).to_pylist()))
        out[rows] = settled & ~korean
    return out
