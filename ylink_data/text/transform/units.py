"""Text units that quality rules count: words, lines, paragraphs and n-grams, per language.

English words (`en`, the default for any other code) are the tokens of datatrove's English word
tokenizer, which is spaCy's rule-based tokenizer for English (`spacy.blank("en")`, no model),
emulated here without spaCy: the text is split on whitespace and each piece is split as spaCy does
(prefixes and suffixes such as brackets, quotes and punctuation peeled off one at a time, a final "."
split off after a lowercase letter, a digit or two capitals, abbreviations like "Mr.", "U.S." and
"e.g." kept whole, "don't" -> "do" "n't", "Smith's" -> "Smith" "'s", "well-known" -> "well" "-"
"known", "1,000" and "3.5" kept whole, URLs kept whole). On the real English text of
bench/bench_purify.py (1.29 million pieces) they split exactly as spaCy 3.8 splits them for 99.98%
of occurrences; what differs is rare special cases ("and/or", "'em", "9am", "(8)"). Each distinct
piece is split once and remembered, so a word costs one dictionary look-up.

Chinese has no spaces between words, so `zh` words come from jieba's segmenter, with whitespace
and punctuation tokens removed; runs of Han characters are cut by rjieba (jieba-rs: the same
dictionary and results, 15-20x faster) when it is installed. Japanese is counted in the same units
(`unit_language` says why), and which units a document gets comes from `unit_languages`: its
language code, else its script (`transform.script`, which language ID's script prior uses too).
"""
from __future__ import annotations

import importlib.abc
import logging
import re
import sys
import unicodedata
from functools import lru_cache
from itertools import chain
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ylink_data.core.startup import startup
from ylink_data.text.transform.script import is_unspaced, written_unspaced

_LINE_BREAKS = re.compile(r"\n+")
_PARAGRAPH_BREAKS = re.compile(r"\n{2,}")

CHINESE = "zh"  # the unit family of languages written without spaces between words (see unit_language)

# ----------------------------------------------------------------------------- English (spaCy's rules)

_Q = "'\"”“`‘´’‚,„»«「」『』（）〔〕【】《》〈〉⟦⟧"
_LOW = "a-z\u00df-\u00f6\u00f8-\u00ff"
_UP = "A-Z\u00c0-\u00d6\u00d8-\u00de"
_CUR = r"\$|£|€|¥|฿|US\$|C\$|A\$|₽|₹|₩|₪|₫|₱|₺|₴|₦"
_UNITS = ("km|km²|km³|m|m²|m³|dm|dm²|dm³|cm|cm²|cm³|mm|mm²|mm³|ha|µm|nm|yd|in|ft|kg|g|mg|µg|t|lb|oz|m/s|"
          "km/h|kmh|mph|hPa|Pa|mbar|mb|MB|kb|KB|gb|GB|tb|TB|T|G|M|K|%")
_PUNCT = "§%=—–…,:;!?¿¡()[]{}<>_#*&。？！，、；：～·" + _Q


def _symbol_class() -> str:
    """A regex class of the "other symbol" characters (Unicode So: spaCy's icon class)."""
    ranges: list[list[int]] = []
    for code in range(0x20000):  # the BMP and plane 1 (emoji): every So character in use
        if unicodedata.category(chr(code)) == "So":
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "[" + "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges) + "]"


_SYMBOL = _symbol_class()
_PREFIX = re.compile(r"\.\.+|US\$|C\$|A\$|\+(?![0-9])|[" + re.escape(_PUNCT + "$£€¥฿₽₹₩₪₫₱₺₴₦") + r"]"
                     r"|" + _SYMBOL)
# `(?<!\.)`: a run of dots is tried from its first one only (`\.\.+$` from every dot of "....a" is
# quadratic); the leftmost match is the same.
_SUFFIX = re.compile(
    r"(?:(?<!\.)\.\.+|'s|'S|’s|’S|[" + re.escape("…,:;!?¿¡()[]{}<>_#*&。？！，、；：～·—–" + _Q) + r"]"
    r"|(?<=[0-9])\+|(?<=°[FfCcKk])\.|(?<=[0-9])(?:" + _CUR + r")|(?<=[0-9])(?:" + _UNITS + r")"
    r"|(?<=[0-9" + _LOW + r"%²\-+)\]" + re.escape(_Q + "{}<>_#*&") + r"])\.|(?<=[" + _UP + r"][" + _UP + r"])\."
    r"|" + _SYMBOL + r")$")
_INFIX = re.compile(r"\.\.+|…|" + _SYMBOL +
                    r"|(?<=[0-9])[+\-*^](?=[0-9-])"
                    r"|(?<=[" + _LOW + re.escape(_Q) + r"])\.(?=[" + _UP + re.escape(_Q) + r"])"
                    r"|(?<=[^\W\d_]),(?=[^\W\d_])"
                    r"|(?<=[^\W_])(?:---|--|——|-|–|—|~)(?=[^\W\d_])"
                    r"|(?<=[^\W_])[:<>=/](?=[^\W\d_])")
# From a token's start (\A); user info as runs of non-@ then @ (`\S+(?::\S*)?@` split a token of
# colons every way: quadratic, issue 39).
_URL = re.compile(r"\A(?:[\w+\-.]{2,}://)?(?:[^\s@]+@+)*(?:[^\W_](?:[\w-]{0,62}[^\W_])?\.)+[a-z]{2,63}\.?"
                  r"(?::\d{2,5})?(?:[/?#]\S*)?$")
# spaCy's English special cases that end in "." (kept as one token).
ABBREV = frozenset("""
._. 10a.m. 10p.m. 11a.m. 11p.m. 12a.m. 12p.m. 1a.m. 1p.m. 2a.m. 2p.m. 3a.m. 3p.m. 4a.m. 4p.m. 5a.m.
5p.m. 6a.m. 6p.m. 7a.m. 7p.m. 8a.m. 8p.m. 9a.m. 9p.m. Adm. Ak. Ala. Apr. Ariz. Ark. Aug. Bros.
Calif. Co. Colo. Conn. Corp. D.C. Dec. Del. Dr. E.G. E.g. Feb. Fla. Ga. Gen. Gov. I.E. I.e. Ia. Id.
Ill. Inc. Ind. Jan. Jr. Jul. Jun. Kan. Kans. Ky. La. Ltd. Mar. Mass. Md. Messrs. Mich. Minn. Miss.
Mo. Mont. Mr. Mrs. Ms. Mt. N.C. N.D. N.H. N.J. N.M. N.Y. Neb. Nebr. Nev. Nov. Oct. Okla. Ore. Pa.
Ph.D. Prof. Rep. Rev. S.C. Sen. Sep. Sept. St. Tenn. Va. Wash. Wis. a. a.m. b. c. co. d. e. e.g. f.
g. h. i. i.e. j. k. l. m. n. o. p. p.m. q. r. s. t. u. v. v.s. vs. w. x. y. z. °C. °F. °K. °c. °f.
°k. ä. ö. ü.
""".split())
# spaCy's special cases without an apostrophe that split in two: word -> length of the first part.
_UNSPLIT = {w: int(n) for w, n in (item.split(":") for item in """
aint:2 arent:3 cannot:3 cant:2 couldnt:5 couldve:5 darent:4 didnt:3 doesnt:4 dont:2 gonna:3 gotta:3
hadnt:3 hasnt:3 havent:4 hed:2 hes:2 howd:3 howll:3 howre:3 hows:3 howve:3 id:1 im:1 isnt:2 itd:2
itll:2 ive:1 maynt:3 mightnt:5 mightve:5 mustnt:4 mustve:4 neednt:4 notve:3 oughtnt:5 shant:3 shes:3
shouldnt:6 shouldve:6 thatd:4 thatll:4 thats:4 thered:5 therell:5 therere:5 theres:5 thereve:5
thesed:5 thesell:5 thesere:5 theseve:5 theyd:4 theyll:4 theyre:4 theyve:4 thisd:4 thisll:4 thiss:4
thosed:5 thosell:5 thosere:5 thoseve:5 wasnt:3 wed:2 werent:4 weve:2 whatd:4 whatll:4 whatre:4
whats:4 whatve:4 whend:4 whenll:4 whenre:4 whens:4 whenve:4 whered:5 wherell:5 wherere:5 wheres:5
whereve:5 whod:3 wholl:3 whos:3 whove:3 whyd:3 whyll:3 whyre:3 whys:3 whyve:3 wont:2 wouldnt:5
wouldve:5 yall:1 youd:3 youll:3 youre:3 youve:3
""".split())}
_PRONOUNS = "i|you|he|she|it|we|they|that|there|who|what|where|how|why|when|here|this|these|those|y|let"
_CONTRACTION = re.compile(r"(?i)^(?:([^\W\d_]+?)(n['’]t)|(" + _PRONOUNS + r")(['’](?:ve|ll|re|d|m|s)))$")
# Pairs spaCy keeps as one token (emoticon special cases) though each character is also split off;
# likewise a word and "." that make an abbreviation after an infix split ("Minneapolis-St.").
_MERGE = {("(", ":"), (")", ":"), (":", ")"), (";", ")"), (":", "("), ("'", "'"), ("[", ":"), ("(", "=")}


def _special(s: str) -> bool:
    return s in ABBREV or _CONTRACTION.match(s) is not None or (s.lower() in _UNSPLIT and (s.islower() or s.istitle()))


def _split_middle(s: str) -> list[str]:
    if s in ABBREV:
        return [s]
    m = _CONTRACTION.match(s)
    if m:
        return [g for g in m.groups() if g]
    cut = _UNSPLIT.get(s.lower())
    if cut and (s.islower() or s.istitle()):
        return [s[:cut], s[cut:]]
    if _URL.match(s):
        return [s]
    out: list[str] = []
    start = 0
    for m in _INFIX.finditer(s):
        if m.start() > start:
            out.append(s[start:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        start = m.end()
    if start < len(s):
        out.append(s[start:])
    return out


_PLAIN_ENDS = frozenset(",;:!?")  # a suffix that splits off after any letter, never part of a special case
_ASCII_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")


def _plain_piece(s: str) -> tuple[str, ...] | None:
    """The tokens of the commonest pieces without the affix loop: letters only ("word"), or letters
    and one of ",;:!?" ("word,"), or lowercase letters and "." ("word.", not an abbreviation like
    "vs."). Letters match none of spaCy's prefix, suffix or infix rules, nor a URL; they are a
    special case only as a `_UNSPLIT` word ("cannot"), which is left to the loop. None: not such a
    piece. Half of a page's distinct pieces are (the cost of a page the cache has not seen)."""
    if s.isalpha():
        head, end = s, ""
    else:
        head, end = s[:-1], s[-1]
        if not head.isalpha():
            return None
        if end == ".":
            if head[-1] not in _ASCII_LOWER or s in ABBREV:
                return None
        elif end not in _PLAIN_ENDS:
            return None
    if head.lower() in _UNSPLIT:
        return None
    return (head, end) if end else (head,)


def split_piece(s: str) -> tuple[str, ...]:
    """spaCy's English tokens of one whitespace-free piece of text."""
    plain = _plain_piece(s)
    return plain if plain is not None else split_affixes(s)


def split_affixes(s: str) -> tuple[str, ...]:
    """`split_piece` for any piece: spaCy's `_split_affixes` loop, then its infixes and special cases."""
    pre: list[str] = []
    suf: list[str] = []
    last = -1
    while s and len(s) != last:
        if _special(s):
            break
        last = len(s)
        m = _PREFIX.match(s)
        pre_len = m.end() if m else 0
        if pre_len and s[pre_len:] and _special(s[pre_len:]):
            pre.append(s[:pre_len])
            s = s[pre_len:]
            break
        m = _SUFFIX.search(s, pre_len)
        suf_len = len(s) - m.start() if m else 0
        if suf_len and s[:-suf_len] and _special(s[:-suf_len]):
            suf.append(s[-suf_len:])
            s = s[:-suf_len]
            break
        if pre_len and suf_len and pre_len + suf_len <= len(s):
            pre.append(s[:pre_len])
            suf.append(s[-suf_len:])
            s = s[pre_len:-suf_len]
        elif pre_len:
            pre.append(s[:pre_len])
            s = s[pre_len:]
        elif suf_len:
            suf.append(s[-suf_len:])
            s = s[:-suf_len]
    tokens = pre + (_split_middle(s) if s else []) + suf[::-1]
    if len(tokens) > 1:
        merged = [tokens[0]]
        for t in tokens[1:]:
            if (merged[-1], t) in _MERGE or (t == "." and merged[-1] + t in ABBREV):
                merged[-1] += t
            else:
                merged.append(t)
        tokens = merged
    return tuple(tokens)


_PIECES: dict[str, tuple[str, ...]] = {}
_PIECES_MAX = 500_000  # distinct pieces remembered (then forgotten all at once)


def english_words(text: str) -> list[str]:
    """datatrove's English word tokens (spaCy's rules, whitespace tokens left out)."""
    pieces = text.split()
    found = list(map(_PIECES.get, pieces))
    if None in found:
        if len(_PIECES) >= _PIECES_MAX:
            _PIECES.clear()
        for i, tokens in enumerate(found):
            if tokens is None:
                piece = pieces[i]
                tokens = _PIECES.get(piece)
                if tokens is None:
                    tokens = _PIECES[piece] = split_piece(piece)
                found[i] = tokens
    return list(chain.from_iterable(found))


# datatrove's PUNCTUATION_SET (its ASCII and common CJK part, plus control characters): a word made
# only of these is not counted as a word by Gopher's word count and mean word length.
PUNCTUATION_CHARS = frozenset(
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
    + "".join(map(chr, (x for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for x in range(a, b))))
    + "؟۔।॥။።፧፨᙮‼‽⁇⁈⁉⸮﹒﹖﹗｡")


@lru_cache(maxsize=1 << 18)  # distinct tokens of a task's pages: 65,536 were too few (the cache thrashed)
def is_punctuation(token: str) -> bool:
    """True when every character is in datatrove's punctuation set (see PUNCTUATION_CHARS)."""
    return all(c in PUNCTUATION_CHARS for c in token)


@lru_cache(maxsize=65536)
def is_punct_token(token: str) -> bool:
    """spaCy's `is_punct`: every character is Unicode punctuation (P*)."""
    return all(unicodedata.category(c)[0] == "P" for c in token)


# spaCy's Sentencizer.default_punct_chars: a token that is one of these ends a sentence.
SENTENCE_PUNCT = frozenset(
    "!.?\u0589\u061f\u06d4\u0700\u0701\u0702\u07f9\u0964\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u1735"
    "\u1736\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e\u1b5f\u1c3b\u1c3c\u1c7e\u1c7f"
    "\u203c\u203d\u2047\u2048\u2049\u2e2e\u2e3c\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce\ua8cf\ua92f"
    "\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e\uff1f\uff61\u3002")


def english_sentence_count(text: str) -> int:
    """Sentences as datatrove counts them in English (spaCy's Sentencizer over the tokens above): a
    new sentence starts at a token that follows a sentence-ending mark and is not punctuation."""
    tokens = english_words(text)
    if not tokens:
        return 0
    count, seen_end = 1, False
    for t in tokens:
        if t in SENTENCE_PUNCT:
            seen_end = True
        elif seen_end and not is_punct_token(t):
            count += 1
            seen_end = False
    return count


# ----------------------------------------------------------------------------- languages


# Japanese gets the Chinese units (jieba words: its kanji runs cut by jieba, each kana a word of its
# own), by language code and by script alike. Neither is Japanese segmentation, but of the two
# units there are it is the least wrong: English units split only on spaces, so a Japanese page is
# a few very long "words" and fails the word rules, as Chinese did before. On 246 real Japanese
# documents (Debian's manpages-ja, troff markup stripped), in English units and in Chinese ones:
# gopher_quality keeps 1 and 79, c4_quality 40 and 231, fineweb_quality 35 and 174, and the four ops
# in a row 0 and 26 (gopher_repetition alone keeps more in English units, 238 and 151: a phrase is
# one "word" there and nothing repeats). Before, a Japanese document got English units when
# language ID had set `ja` and Chinese ones when it went by its script. MinHash's character
# shingles (`dedup.minhash`) are right for Japanese.
@lru_cache(maxsize=1024)
def unit_language(lang: str | None) -> str:
    """The text-unit family for a language code: `zh` (jieba words) for the languages written
    without spaces between words (`script.is_unspaced`: Chinese and its varieties, and Japanese),
    `en` for the rest."""
    return CHINESE if is_unspaced(lang) else "en"


SCRIPT_HEAD_CHARS = 1000  # a document without `lang` goes by the script of its first 1,000 characters


def unit_languages(language: str, texts: pa.Array | pa.ChunkedArray,
                   langs: Sequence[str | None] | None = None) -> list[str]:
    """The text-unit family (`en` or `zh`) an op with `language` (`en`, `zh` or `auto`) uses for each
    text of a batch. `auto`: by the text's language code (`langs`, the `lang` column) where language
    ID set one, else by its script (`script.written_unspaced` on its first `SCRIPT_HEAD_CHARS`
    characters: mostly Han and kana is `zh`). Column-wise: one pass over the texts without a code."""
    if language != "auto":
        return [unit_language(language)] * len(texts)
    out = [unit_language(lang) if lang else None for lang in (langs or [None] * len(texts))]
    unknown = [i for i, family in enumerate(out) if family is None]
    if unknown:
        heads = texts if len(unknown) == len(texts) else texts.take(pa.array(unknown))
        heads = pc.utf8_slice_codeunits(pc.fill_null(heads, ""), 0, SCRIPT_HEAD_CHARS)
        for i, unspaced in zip(unknown, written_unspaced(heads).tolist()):
            out[i] = CHINESE if unspaced else "en"
    return out


class _NoPkgResources(importlib.abc.MetaPathFinder):
    """Makes `pkg_resources` unimportable while jieba is imported (see `loaded_jieba`)."""

    def find_spec(self, name: str, path=None, target=None):
        if name == "pkg_resources" or name.startswith("pkg_resources."):
            raise ModuleNotFoundError(f"No module named {name!r} (ylink imports jieba without it)", name=name)
        return None


@lru_cache(maxsize=None)
def loaded_jieba():
    """The jieba module, its dictionary loaded (once per process), quiet.

    jieba 0.42 reads its dictionary through `pkg_resources` when it can import it, else with
    `open` beside its own files (jieba/_compat.py). setuptools deprecated `pkg_resources` (from 81
    every import warns, once per worker process) and drops it: jieba is imported here with
    `pkg_resources` unimportable, so that it always takes its own way, the same words, no
    warning, whichever setuptools is installed."""
    if "jieba" not in sys.modules and "pkg_resources" not in sys.modules:
        blocker = _NoPkgResources()
        sys.meta_path.insert(0, blocker)
        try:
            import jieba
        finally:
            sys.meta_path.remove(blocker)
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


@lru_cache(maxsize=None)
def _han_segmenter():
    """What cuts a run of Han characters: rjieba (jieba-rs, the same dictionary and HMM, in Rust:
    15-20x faster) when installed, else jieba itself. On the 107,940 Han runs of THUCNews val and
    ChineseWebText both give the same words for every run."""
    try:
        import rjieba
    except ImportError:
        return loaded_jieba().lcut
    return rjieba.cut


@lru_cache(maxsize=None)
def load_segmenter() -> None:
    """Load jieba's dictionary now (about a second), not on the first Chinese document: outside
    any document's time limit, which it would outlast. Once per process: start-up, not a document's work."""
    with startup():
        loaded_jieba()
        _han_segmenter()("预热")


# jieba's own split of a text into blocks (re_han_default): runs of Han characters, ASCII letters,
# digits and +#&._%- are segmented, each on its own; between them every character is a token.
_JIEBA_BLOCK = re.compile("([\u4E00-\u9FD5a-zA-Z0-9+#&\\._%\\-]+)")
_PURE_HAN = re.compile("[\u4E00-\u9FD5]+")
_MIXED: dict[str, list[str]] = {}  # words of blocks with Latin letters or digits, via jieba


def chinese_words(text: str) -> list[str]:
    """jieba's words of `text` (`jieba.lcut`, HMM on), whitespace and punctuation tokens left out.
    Pure Han blocks go to `_han_segmenter`; blocks with Latin letters or digits to jieba itself
    (remembered: "2009", "NBA", "10%" recur)."""
    han = _han_segmenter()
    out: list[str] = []
    for i, block in enumerate(_JIEBA_BLOCK.split(text)):
        if not block:
            continue
        if i % 2 == 0:
            out += [c for c in block if not c.isspace() and not is_symbol(c)]
        elif _PURE_HAN.fullmatch(block):
            out += han(block)
        else:
            tokens = _MIXED.get(block)
            if tokens is None:
                if len(_MIXED) >= 200_000:
                    _MIXED.clear()
                tokens = _MIXED[block] = [w for w in loaded_jieba().lcut(block) if w.strip() and not is_symbol(w.strip())]
            out += tokens
    return out


@lru_cache(maxsize=4096)
def is_symbol(token: str) -> bool:
    """True when every character is punctuation or a symbol (Unicode categories P* and S*)."""
    return all(unicodedata.category(c)[0] in "PS" for c in token)


_RECENT: dict[tuple[str, str], list[str]] = {}
_RECENT_TOKENS = [0]
_RECENT_MAX_TOKENS = 1_000_000  # tokens of recent texts kept (pointers: about 8 MB at most)


def words(text: str, lang: str = "en") -> list[str]:
    """Word tokens. `en`: datatrove's English tokens, punctuation included; `zh`: jieba words
    without whitespace or punctuation tokens.

    The tokens of recent texts are remembered, so ops that run one after another on a batch (the
    Gopher rules, FineWeb's) split each text once. The list returned is shared: do not change it."""
    family = unit_language(lang)
    key = (family, text)
    tokens = _RECENT.get(key)
    if tokens is None:
        if family == CHINESE:
            tokens = chinese_words(text)
        else:
            tokens = english_words(text)
        if _RECENT_TOKENS[0] + len(tokens) > _RECENT_MAX_TOKENS:
            _RECENT.clear()
            _RECENT_TOKENS[0] = 0
        _RECENT[key] = tokens
        _RECENT_TOKENS[0] += len(tokens)
    return tokens


def lines(text: str) -> list[str]:
    """Lines, as `str.splitlines` gives them (empty lines included)."""
    return text.splitlines()


def nonempty_lines(text: str) -> list[str]:
    """Lines split on runs of newlines (no empty lines inside the text)."""
    return _LINE_BREAKS.split(text)


def paragraphs(text: str) -> list[str]:
    """Paragraphs: pieces of the stripped text between blank lines."""
    return _PARAGRAPH_BREAKS.split(text.strip())


def ngrams(tokens: list[str], n: int, sep: str = " ") -> list[str]:
    """Every run of `n` consecutive tokens, joined by `sep`."""
    return [sep.join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
