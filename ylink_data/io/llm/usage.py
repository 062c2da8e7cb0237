"""What calling a model cost, counted per op into stats.json (the stage's `counters`):

  llm_requests           HTTP requests sent (retries included; cache hits are not requests)
  llm_retries            requests sent again after a 429, a 5xx, a timeout or a lost connection
  llm_cache_hits         answers read from the response cache instead of asked for
  llm_failed             requests given up on (after max_retries, an error not worth retrying, or
                         an answer that is no chat completion)
  llm_prompt_tokens      tokens of the prompts the server answered, as its `usage` reports them
  llm_completion_tokens  tokens of its answers, likewise (cache hits cost nothing and add nothing)
"""
from __future__ import annotations

import threading
from collections import Counter

PREFIX = "llm_"
NAMES = ("requests", "retries", "cache_hits", "failed", "prompt_tokens", "completion_tokens")


class Usage:
    """Counters shared by the threads of one client; `take()` hands them over and starts again, so
    each batch reports what it cost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, name: str, n: int = 1) -> None:
        if name not in NAMES:
            raise KeyError(f"unknown usage counter {name!r} (known: {', '.join(NAMES)})")
        with self._lock:
            self._counts[name] += n

    def take(self) -> dict[str, int]:
        with self._lock:
            out = {PREFIX + k: v for k, v in self._counts.items() if v}
            self._counts.clear()
        return out
