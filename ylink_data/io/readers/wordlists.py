"""Word list numbering: the label Word shows before each numbered paragraph ("3.", "1.2.", "b)").

A numbered paragraph names a list (`w:numId`) and a level (`w:ilvl`); the list's abstract
definition gives each level a number format and a label pattern (`%1.%2.`). Counters run per list
across the whole document, so a list interrupted by prose continues where it left off, and a
level's counter restarts when a higher level advances, as Word counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from docx.oxml.ns import qn


@dataclass(frozen=True)
class _Level:
    fmt: str  # decimal, lowerLetter, upperRoman, bullet, ...
    text: str  # the label pattern, e.g. "%1.%2."
    start: int


@dataclass
class WordLists:
    levels: dict[str, dict[int, _Level]] = field(default_factory=dict)  # numId -> ilvl -> level
    counters: dict[str, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, doc) -> "WordLists":
        try:
            numbering = doc.part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):
            return cls()
        abstract = {}
        for node in numbering.findall(qn("w:abstractNum")):
            levels = {}
            for lvl in node.findall(qn("w:lvl")):
                levels[_int(lvl.get(qn("w:ilvl")))] = _Level(_val(lvl, "w:numFmt") or "decimal",
                                                              _val(lvl, "w:lvlText") or "", _int(_val(lvl, "w:start"), 1))
            abstract[node.get(qn("w:abstractNumId"))] = levels
        lists = cls()
        for num in numbering.findall(qn("w:num")):
            ref = _val(num, "w:abstractNumId")
            if ref in abstract:
                lists.levels[num.get(qn("w:numId"))] = abstract[ref]
        return lists

    def label(self, num_id: str, ilvl: int) -> str | None:
        """The next label of the list at this level; None for a bullet (or an unknown list)."""
        level = self.levels.get(num_id, {}).get(ilvl)
        if level is None or level.fmt in ("bullet", "none"):
            return None
        counters = self.counters.setdefault(num_id, {})
        counters[ilvl] = counters.get(ilvl, level.start - 1) + 1
        for deeper in [k for k in counters if k > ilvl]:
            del counters[deeper]
        label = level.text
        for i in range(ilvl, -1, -1):  # %10 does not exist: 9 levels
            n = counters.get(i, self.levels[num_id].get(i, level).start)
            fmt = self.levels[num_id].get(i, level).fmt
            label = label.replace(f"%{i + 1}", _format(n, fmt))
        return label.strip() or None


# Beyond these a label is the decimal number: roman numerals stop at 3999 (MMMCMXCIX), letters at
# 780, as Word's own do. Without the cap `w:start="900000000000000"` in a 36 KB file
# wrote one "m" per thousand: a label of 9e11 characters, a run held for ever.
_MAX_ROMAN, _MAX_LETTER = 3999, 780


def _format(n: int, fmt: str) -> str:
    if fmt in ("lowerLetter", "upperLetter") and 1 <= n <= _MAX_LETTER:
        s = ""
        while n > 0:
            n, r = divmod(n - 1, 26)
            s = chr(97 + r) + s
        return s.upper() if fmt == "upperLetter" else s
    if fmt in ("lowerRoman", "upperRoman") and 1 <= n <= _MAX_ROMAN:
        s = ""
        for value, numeral in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
                               (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
            while n >= value:
                s, n = s + numeral, n - value
        return s.upper() if fmt == "upperRoman" else s
    return str(n)


def _val(el, child: str) -> str | None:
    node = el.find(qn(child))
    return node.get(qn("w:val")) if node is not None else None


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
