"""How much of an answer its context supports: the share of the answer's units found in the context.

Units are what carries content in each script: Latin-script (and other spaced) words lowercased,
digits included, without common English function words ("the", "of": a made-up answer shares
them with any context); and for Han text, pairs of adjacent characters (a lone character between
punctuation counts alone), since single characters such as 的 是 在 occur in every Chinese text.
An answer copied from its context scores 1.0; a paraphrase keeps most of its content words; a
made-up answer scores low ("The moon is made of green cheese." against an article on rivers:
`tests/test_qa_generate.py` measures both). Language-independent: a Chinese answer quoting an
English name counts both kinds of unit.
"""
from __future__ import annotations

import re

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")
# Function words of English (ours: the most frequent closed-class words); content is the rest.
STOP_WORDS = frozenset("""
a an the and or but nor so yet of to in on at by for with from into onto over under about as than then
is are was were be been being am do does did done has have had having will would shall should can could
may might must it its this that these those there here he she they them his her their we us our you your
i me my not no yes if which who whom whose what when where why how also all any each some such very
""".split())


def units(text: str) -> set[str]:
    out: set[str] = set()
    for run in _HAN_RUN.findall(text):
        out.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    rest = _HAN_RUN.sub(" ", text).lower()
    out.update(w for w in _WORD.findall(rest) if w not in STOP_WORDS)
    return out


def support(answer: str, context: str) -> float:
    """Share of the answer's units (see the module docstring) that occur in `context`; 0.0 for an
    answer without any (a bare "Yes.")."""
    wanted = units(answer)
    if not wanted:
        return 0.0
    return len(wanted & units(context)) / len(wanted)
