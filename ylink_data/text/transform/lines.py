"""C4's line rules (Raffel et al. 2020, section 2.2, as datatrove's C4QualityFilter applies them):
what ends a sentence, the policy phrases, and which lines the rules remove. `c4_quality` applies them
with its parameters; `dedup.keep` counts the lines they would remove (a copy's boilerplate)."""
from __future__ import annotations

import unicodedata

EN_END_PUNCTUATION = (".", "?", "!", '"', "'")  # datatrove's END_PUNCTUATION
ZH_END_PUNCTUATION = EN_END_PUNCTUATION + ("。", "！", "？", "”", "’", "」", "』", "）", "》", "．")
ELLIPSES = ("...", "…")
POLICY_PHRASES = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
                  "use cookies")  # datatrove's POLICY_SUBSTRINGS (from TFDS c4_utils)
MIN_WORDS = 3  # C4's (datatrove's min_words_per_line)
ZH_MIN_CHARS = 6  # c4_quality's zh_min_chars_per_line: C4's 3 words x 1.86 characters a Chinese word


def content_chars(line: str) -> int:
    """Characters that are neither whitespace nor punctuation/symbols."""
    return sum(1 for c in line if not c.isspace() and unicodedata.category(c)[0] not in "PS")


def ends_sentence(line: str, zh: bool) -> bool:
    """Whether a (stripped) line ends with terminal punctuation, not an ellipsis (C4: a line that
    trails off is a teaser)."""
    return line.endswith(ZH_END_PUNCTUATION if zh else EN_END_PUNCTUATION) and not line.endswith(ELLIPSES)


def removed_by_c4(line: str, zh: bool) -> bool:
    """Whether C4's line rules with their defaults remove a (stripped, non-empty) line: no terminal
    punctuation, fewer than 3 words (Chinese: 6 characters), "javascript", or a policy phrase."""
    if not ends_sentence(line, zh):
        return True
    if (content_chars(line) < ZH_MIN_CHARS) if zh else (len(line.split(None, MIN_WORDS)) < MIN_WORDS):
        return True
    lower = line.lower()
    return "javascript" in lower or any(p in lower for p in POLICY_PHRASES)
