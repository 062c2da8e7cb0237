"""'Did you mean' hints for a misspelt name (a config key, an op, a column, a field), one rule for
every error message that names a choice."""
from __future__ import annotations

import difflib
from typing import Any


def did_you_mean(word: str, choices: Any) -> str:
    """"; did you mean 'x'?" for the closest of `choices`, or "" when none is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
