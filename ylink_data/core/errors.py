"""Errors meant for a person at a terminal: one line that names the thing and the fix."""
from __future__ import annotations

import difflib
from typing import Any


class YlinkError(Exception):
    """Base of every error ylink reports as a one-line message (exit code 2)."""


class ConfigError(YlinkError):
    """The pipeline configuration is invalid. `problems` holds one line per problem."""

    def __init__(self, problems: list[str] | str, source: str | None = None):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        where = f"{source}: " if source else ""
        if len(self.problems) == 1:
            super().__init__(f"{where}{self.problems[0]}")
        else:
            body = "\n  ".join(self.problems)
            super().__init__(f"{where}{len(self.problems)} problems:\n  {body}")


class InputError(YlinkError):
    """An input cannot be listed or opened at all (missing path, no permission, unknown bucket)."""


class RunStateError(YlinkError):
    """The output folder holds a run that this invocation must not silently overwrite."""


class OutputError(YlinkError):
    """The output folder cannot be written: read-only, no permission, or no space left."""


class ClusterError(YlinkError):
    """The Ray cluster of `ray.address` cannot be reached, was lost, or has no CPU left for the run."""


class DocumentError(Exception):
    """One document could not be processed, and the message already says why (the extractor's
    process answers "ValueError: ..." for a page it raised on): quarantined with the message as it
    is, where other exceptions get their type name in front."""


def format_loc(loc: tuple | list) -> str:
    """Where a problem is in a YAML document, as a reader writes it: `stages[2].gopher.min_words`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def did_you_mean(word: str, choices: Any) -> str:
    """"; did you mean 'x'?" for the choice closest to a misspelt `word`, or "" when none is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
