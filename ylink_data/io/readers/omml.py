"""Word equations (OMML `m:oMath`) as LaTeX, through dwml's converter (Apache-2.0).

dwml walks the OMML tree (fractions, scripts, delimiters, n-ary operators, radicals, matrices)
and is what docling's own OMML code derives from. Where it falls short on real files
(../shared/data/documents/docx/docling: equations.docx, omml_func_log.docx,
omml_text_escapes_in_math.docx), `_Latex` below fixes only that:
- characters it has no entry for (π, ×, ≤, ∩, …) stayed Unicode: they go through pylatexenc
  (MIT), math symbols bare (`\\pi `), text-mode ones wrapped (`\\text{\\textellipsis}`);
- en/em dashes and minus signs in a math run are `-`, a caret `^` stays a caret (dwml wrote `\\^`);
- function names outside its short list (log, ln, exp, det...) raised: now `\\log`, or
  `\\operatorname{name}` for a name LaTeX lacks;
- lower limits under anything but lim/max/min raised (argmax, an underbrace): now `base_{lim}`;
- a group character without `m:chr` (Word's default, the underbrace) raised;
- an n-ary without `m:chr` (Word's default, the integral) and ∬ ∭ ∮ ∯ ∰ lost their operator;
- a one-row equation array became `\\begin{array}{c}...\\end{array}`: now just the row.
Anything that still raises falls back to the equation's text as Word shows it (docx.py).
"""
from __future__ import annotations

import re

from dwml.latex_dict import CHARS, CHR, CHR_BO, FUNC_PLACE, T
from dwml.omml import oMath2Latex
from pylatexenc.latexencode import UnicodeToLatexEncoder

_ENCODER = UnicodeToLatexEncoder(replacement_latex_protection="braces-all", unknown_char_policy="keep",
                                 unknown_char_warning=False)
# Math operators that a text encoder would write as text macros (\textendash), and n-ary
# operators dwml's CHR_BO lacks (pylatexenc's names for the last two are not in plain LaTeX).
_MATH_CHARS = {"\u2013": "-", "\u2014": "-", "\u2212": "-", "\u00d7": "\\times "}
_NARY = {"\u222b": "\\int", "\u222c": "\\iint", "\u222d": "\\iiint", "\u222e": "\\oint",
         "\u222f": "\\oiint", "\u2230": "\\oiiint"}
# Function names LaTeX has a command for (\log); others become \operatorname{...}.
_LATEX_FUNCS = frozenset("sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth log ln lg exp "
                         "det gcd deg hom ker dim arg inf sup lim liminf limsup max min Pr".split())
_CHARS: dict[str, str] = {}
_T = "./{http://schemas.openxmlformats.org/officeDocument/2006/math}t"


def omml_to_latex(omath) -> str:
    """The LaTeX of one `m:oMath` element (an lxml element), spaces collapsed. Raises
    `ValueError` where the OMML is beyond what the converter handles: whatever dwml raises, as it
    walks a hostile file's tree with no checks of its own (docx.py then keeps the equation's text)."""
    try:
        latex = str(_Latex(omath))
    except Exception as exc:
        raise ValueError(f"OMML not converted: {type(exc).__name__}: {exc}") from exc
    return re.sub(r"\s+", " ", latex).strip()


def _char(c: str) -> str:
    """One character of a math run as LaTeX (cached: documents repeat the same few symbols)."""
    out = _CHARS.get(c)
    if out is None:
        if c in _MATH_CHARS:
            out = _MATH_CHARS[c]
        elif c in T:  # dwml's own table (mathematical italic letters, arrows, relations)
            out = T[c]
        elif c.isascii():  # LaTeX's specials escaped, but a caret is Word's linear superscript
            out = "\\" + c if c in CHARS and c != "^" else c
        else:
            enc = _ENCODER.unicode_to_latex(c)
            if enc.startswith("{") and enc.endswith("}"):
                enc = enc[1:-1]
            if enc.startswith("\\ensuremath{"):
                out = enc[len("\\ensuremath{"):-1] + " "
            elif enc.startswith("\\"):  # a text-mode macro (\textellipsis, \'e) in math mode
                out = f"\\text{{{enc}}} "
            else:
                out = enc
        _CHARS[c] = out
    return out


class _Latex(oMath2Latex):
    def do_r(self, elm):
        return "".join(_char(c) for c in elm.findtext(_T) or "")

    def do_fname(self, elm):
        parts = []
        for stag, t, _ in self.process_children_list(elm):
            if stag == "r":
                name = t.strip()
                known = name in _LATEX_FUNCS
                parts.append(("\\" + name if known else f"\\operatorname{{{name}}}") + "({fe})")
            else:
                parts.append(str(t))
        out = "".join(parts)
        return out if FUNC_PLACE in out else out + FUNC_PLACE

    def do_func(self, elm):
        c = self.process_children_dict(elm)
        arg = str(c.get("e", ""))
        name = str(c.get("fName", FUNC_PLACE))
        if arg.startswith("\\left(") and arg.endswith("\\right)") and "({fe})" in name:
            name = name.replace("({fe})", "{fe}")  # \log\left(x\right), not \log(\left(x\right))
        return name.replace(FUNC_PLACE, arg)

    def do_limlow(self, elm):
        c = self.process_children_dict(elm, include=("e", "lim"))
        base, lim = str(c.get("e", "")), str(c.get("lim", ""))
        name = base.strip()
        if name in _LATEX_FUNCS:
            return f"\\{name}_{{{lim}}}"
        if name.isalpha() and len(name) > 1:
            return f"\\operatorname{{{name}}}_{{{lim}}}"
        return f"{base}_{{{lim}}}"

    def do_groupchr(self, elm):
        c = self.process_children_dict(elm)
        pr = c["groupChrPr"]
        latex = {"\u23de": "\\overbrace{{{0}}}", "\u23df": "\\underbrace{{{0}}}"}.get(pr.chr or "\u23df")
        if latex is None:  # another character: dwml's table, or the character over/under the text
            return super().do_groupchr(elm) if pr.chr in CHR else str(c["e"])
        return pr.text + latex.format(c["e"])

    def do_nary(self, elm):
        out, op = [], ""
        for stag, t, _ in self.process_children_list(elm):
            if stag == "naryPr":
                chr_ = t.chr or "\u222b"
                op = _NARY.get(chr_) or CHR_BO.get(chr_) or _char(chr_).strip()
            else:
                out.append(str(t))
        return op + "".join(out)

    def do_eqarr(self, elm):
        rows = [t for _, t, _ in self.process_children_list(elm, include=("e",))]
        return rows[0] if len(rows) == 1 else super().do_eqarr(elm)

    tag2meth = {**oMath2Latex.tag2meth, "r": do_r, "fName": do_fname, "func": do_func, "limLow": do_limlow,
                "groupChr": do_groupchr, "nary": do_nary, "eqArr": do_eqarr}

