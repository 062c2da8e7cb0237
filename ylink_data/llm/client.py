"""One way to call a model: an OpenAI-compatible chat endpoint through the `openai` client, with a
bound on requests in flight, retries with backoff, the response cache and the usage counters.

    client = LLMClient(LLMConfig(...), storage_options)
    replies = client.chat_many([messages, messages, ...])   # concurrently, in order

Concurrency: a pool of `max_concurrency` threads per client, and an op holds one client per Ray
worker, so one worker never has more than `max_concurrency` requests in flight (the cluster: that
times the workers running the op). Threads rather than asyncio: an op's `process` is called from
plain code (a Ray task, a notebook with its own event loop running), and the `openai` client's
connection pool is thread-safe.

Retries (the client's own are off, so each one is counted): HTTP 408, 409, 429 and 5xx, timeouts
and lost connections, up to `max_retries` times. The k-th retry waits what the server's
`Retry-After` (or `retry-after-ms`) asks, else a random time in [0, backoff_s * 2**k] (full jitter,
so that workers that failed together do not come back together), never more than max_backoff_s.
Other errors (400, 401, 404, 422: the request itself is wrong) are not retried. A request given up
on becomes a `Reply` with its error, which the op quarantines: the run goes on.

The API key is sent in the Authorization header and nowhere else: error messages are cleared of it
(a server may quote it back) before they leave this module.
"""
from __future__ import annotations

import email.utils
import importlib
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

from ..redaction import MASK, redact_text
from .cache import CachedAnswer, ResponseCache, request_key
from .config import LLMConfig
from .usage import Usage

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
ERROR_CHARS = 500  # of a server's error body quoted in a quarantine entry
NO_KEY = "no-key"  # the `openai` client wants some key: local servers ignore it


@dataclass
class Reply:
    """The answer to one request: `text` (None if it failed, with `error` saying why). `cached`:
    read from the response cache. An error starting with "timeout" means the server never answered
    in time, which the pipeline quarantines with reason `timeout`."""

    text: str | None
    error: str | None = None
    cached: bool = False
    finish_reason: str | None = None


class _Retry(Exception):
    def __init__(self, message: str, wait_s: float | None = None):
        super().__init__(message)
        self.wait_s = wait_s


class LLMClient:
    def __init__(self, config: LLMConfig, storage_options: dict[str, Any] | None = None):
        self.config = config
        self.usage = Usage()
        self.cache = ResponseCache(config.cache_dir, storage_options) if config.cache and config.cache_dir else None
        n = config.max_concurrency
        import openai  # here, not at import: it takes half a second, and every run registers this op

        self._openai = openai.OpenAI(
            base_url=config.base_url, api_key=config.api_key or NO_KEY, timeout=config.timeout_s, max_retries=0,
            default_headers=config.headers or None,
            http_client=openai.DefaultHttpxClient(limits=_http_library().Limits(max_connections=n,
                                                                                max_keepalive_connections=n)))
        self._pool = ThreadPoolExecutor(n, thread_name_prefix="llm")
        self._params = config.answer_params()
        self._secrets = tuple(v for v in (config.api_key, *config.headers.values()) if v)
        self._rng = random.Random()
        self._rng_lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._openai.close()

    # ------------------------------------------------------------------ asking

    def chat_many(self, requests: list[list[dict[str, Any]]], **request: Any) -> list[Reply]:
        """Replies to each message list, in order, with at most `max_concurrency` in flight.
        `request` adds request fields (`response_format`...), which are part of the cache key."""
        futures = [self._pool.submit(self.chat, messages, **request) for messages in requests]
        return [f.result() for f in futures]

    def chat(self, messages: list[dict[str, Any]], **request: Any) -> Reply:
        params = {k: v for k, v in self._params.items() if k != "model"} | request
        key = request_key(self.config.model, messages, params)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.usage.add("cache_hits")
                return Reply(hit.text, cached=True, finish_reason=hit.finish_reason)
        try:
            answer = self._ask(messages, params)
        except _GiveUp as exc:
            self.usage.add("failed")
            return Reply(None, error=self._clean(str(exc)))
        if self.cache is not None:
            self.cache.put(key, answer)
        return Reply(answer.text, finish_reason=answer.finish_reason)

    def _ask(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> CachedAnswer:
        extra_body = params.get("extra_body") or None
        fields = {k: v for k, v in params.items() if k != "extra_body"}
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            if attempt:
                self.usage.add("retries")
            self.usage.add("requests")
            try:
                return self._once(messages, fields, extra_body)
            except _Retry as exc:
                if attempt + 1 == attempts:
                    raise _GiveUp(f"{exc} (gave up after {attempts} attempts, llm.max_retries={self.config.max_retries})"
                                  ) from None
                time.sleep(self._wait(attempt, exc.wait_s))
        raise AssertionError("unreachable")

    def _once(self, messages: list[dict[str, Any]], fields: dict[str, Any], extra_body: Any) -> CachedAnswer:
        import openai

        try:
            response = self._openai.chat.completions.create(
                model=self.config.model, messages=messages, extra_body=extra_body, **fields)
        except openai.APITimeoutError:
            raise _Retry(f"timeout: no answer from {self.config.base_url} within llm.timeout_s="
                         f"{self.config.timeout_s:g}") from None
        except openai.APIConnectionError as exc:
            raise _Retry(f"cannot reach {self.config.base_url}: {_cause(exc)}") from None
        except openai.APIStatusError as exc:
            message = f"HTTP {exc.status_code} from {self.config.base_url}: {_body(exc)}"
            if exc.status_code in RETRY_STATUS:
                raise _Retry(message, _retry_after(exc.response.headers)) from None
            raise _GiveUp(message) from None
        except openai.APIError as exc:  # a 200 whose body is no chat completion
            raise _GiveUp(f"unusable response from {self.config.base_url}: {exc}") from None
        usage = response.usage
        prompt, completion = (usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else (0, 0)
        self.usage.add("prompt_tokens", prompt)
        self.usage.add("completion_tokens", completion)
        if not response.choices:
            raise _GiveUp(f"response from {self.config.base_url} has no choices")
        choice = response.choices[0]
        return CachedAnswer(choice.message.content or "", choice.finish_reason, prompt, completion)

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        cap = self.config.max_backoff_s
        if retry_after is not None:
            return min(max(retry_after, 0.0), cap)
        with self._rng_lock:
            return min(self._rng.uniform(0, self.config.backoff_s * 2 ** attempt), cap)

    def _clean(self, message: str) -> str:
        for secret in self._secrets:
            message = message.replace(secret, MASK)
        return redact_text(message)


class _GiveUp(Exception):
    pass


def _retry_after(headers: Any) -> float | None:
    """Seconds a 429/503 asks to wait: `retry-after-ms` (OpenAI's), else `Retry-After` as seconds or
    an HTTP date; None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _body(exc: openai.APIStatusError) -> str:
    try:
        text = exc.response.text
    except Exception:  # a streamed or closed body: the status says enough
        text = ""
    text = " ".join(text.split())
    return text[:ERROR_CHARS] + ("..." if len(text) > ERROR_CHARS else "") or exc.message


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)


def _http_library():
    """The HTTP library the installed openai client is built on: httpx, or httpx2 from openai 3 on
    (whose Limits the client's connection pool takes). Asked of openai itself, not assumed."""
    import openai

    return importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
