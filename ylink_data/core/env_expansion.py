"""`${VAR}` references in the parts of a YAML document that may hold credentials (storage options,
`llm:` blocks), read from the environment; what was read is remembered, to be masked wherever shown."""
from __future__ import annotations

import os
import re
from typing import Any

# `${VAR}`, or `${VAR:-default}` as in the shell: the default when VAR is unset or empty (written in
# the YAML, so no credential: a local server's address that `ylink validate` can check).
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^{}]*))?\}")  # a default ends at "{" too: linear


class EnvExpansion:
    """`${VAR}` in storage options and `llm:` blocks reads the environment, so credentials stay out of YAML files.
    `values` collects what was put in: each is treated as a credential from then on. Values shared
    by YAML aliases are expanded once per use: the loader already bounds what aliases add."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def expand(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.expand(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        if isinstance(value, str):
            return _ENV_REF.sub(self._lookup, value)
        return value

    def _lookup(self, match: re.Match) -> str:
        found = os.environ.get(match.group(1), "")
        if found:
            self.values.add(found)
            return found
        return match.group(2) or ""
