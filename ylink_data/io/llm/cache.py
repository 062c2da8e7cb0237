"""The response cache: every answer a server gave, kept by what was asked, so that a resumed or
rerun pipeline never pays for the same request twice.

Content-addressed: an entry's name is the sha256 of (model, messages, parameters that change an
answer) in canonical JSON, `<dir>/<first 2 hex>/<sha256>.json`. The server's address, the key and
the concurrency are not in it (io/llm/config.py `ANSWER_KEYS`): the same model asked the same thing
answers alike wherever it runs. An entry is written atomically (a temporary name then a rename
locally; object stores publish an upload whole), so Ray workers sharing the folder, even asking
the same thing at the same moment, never read half an entry: two writers write the same request's
answer and either one wins. An entry holds its request's key and a checksum of its content
(`io.digest.seal`): one that fails them is asked again, never used. Nothing in an entry names the
server or holds a credential: the client masks the configured secrets in an answer before it is kept
(a server may quote the key back).

Only chat completions the server gave are kept, whether the op can use their content or not: an
answer an op cannot parse or store is quarantined again on a rerun, for free (io/llm/answer.py). An
entry of another shape (no text, counts that are no counts) is a miss: asked again, overwritten. A
body that is no chat completion (`unusable_response`, io/llm/client.py) is not kept: a rerun asks again. Delete the folder,
or set `llm.cache: false`, to ask again; a different `seed` or `temperature` is a different key.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from ylink_data.core.digest import seal, unseal
from ylink_data.core.storage import atomic_write, filesystem, join

FORMAT = 1  # in every entry and in the key: a change of layout never reads old entries wrongly


@dataclass
class CachedAnswer:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


def request_key(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """sha256 of the request as canonical JSON (sorted keys, no whitespace, UTF-8)."""
    body = {"format": FORMAT, "model": model, "messages": messages, "params": params}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class ResponseCache:
    """Entries under one folder (any fsspec URL); `get` and `put` are safe from many threads and
    processes at once."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None):
        self.url = url
        self.fs, self.root = filesystem(url, storage_options or {})

    def _path(self, key: str) -> str:
        return join(self.root, key[:2], f"{key}.json")

    def get(self, key: str) -> CachedAnswer | None:
        """The answer kept for `key`; None when there is none, or none that passes its checksum (a
        damaged or edited entry, one filed under another request's name, one from before entries had
        a checksum): that request is asked again, and its entry overwritten."""
        try:
            entry = unseal(json.loads(self.fs.cat_file(self._path(key))))
        except FileNotFoundError:
            return None
        except ValueError:  # not JSON (nor UTF-8)
            return None
        if entry is None or entry.get("format") != FORMAT or entry.get("key") != key:
            return None
        text, finish, counts = entry.get("text"), entry.get("finish_reason"), (entry.get("prompt_tokens", 0),
                                                                               entry.get("completion_tokens", 0))
        # An entry of another shape (damaged, or written by other code) is a miss, asked again and
        # overwritten, rather than an error in every rerun. Its text is the op's to judge (io/llm/answer.py).
        if not isinstance(text, str) or not isinstance(finish, str | None) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
            return None
        return CachedAnswer(text, finish, *counts)

    def put(self, key: str, answer: CachedAnswer) -> None:
        data = json.dumps(seal({"format": FORMAT, "key": key, **asdict(answer)}), ensure_ascii=False).encode()
        with atomic_write(self.fs, self._path(key)) as f:
            f.write(data)
