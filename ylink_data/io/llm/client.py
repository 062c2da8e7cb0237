"""One way to call a model: POST /chat/completions of an OpenAI-compatible server, with a bound on
requests in flight, a deadline per request, retries with backoff, the response cache and the usage
counters.

    client = LLMClient(LLMConfig(...), storage_options)
    replies = client.chat_many([messages, messages, ...])   # concurrently, in order

Concurrency: the requests of a client run on one event loop in a thread of its own, at most
`max_concurrency` at once (a request keeps its place through its retries and their waits), and an
op holds one client per worker, so one worker never has more than `max_concurrency` requests in
flight (the cluster: that times the workers running the op).
`chat` and `chat_many` are plain blocking calls: an op's `process` is called from plain code (a Ray
task, a notebook with its own event loop running).

Deadline: `timeout_s` bounds each request whole, from connecting to the last byte of the answer;
a server that sends its headers and then a byte a second, or never stops sending, is cut off there
(the request is cancelled and its connection closed) and the attempt counts as a timeout. The body
read is bounded too (MAX_BODY_BYTES, ERROR_BYTES of an error), so an endless answer never grows
memory.

Retries: HTTP 408, 409, 429 and 5xx, timeouts and lost connections, up to `max_retries` times. The
k-th retry waits what the server's `Retry-After` (or `retry-after-ms`) asks, else a random time in
[0, backoff_s * 2**k] (full jitter, so that workers that failed together do not come back
together), never more than max_backoff_s. Other errors (400, 401, 404, 422: the request itself is
wrong) are not retried. A request given up on becomes a `Reply` with its error, which the op
quarantines (reason `timeout` for an error starting "timeout"): the run goes on. Except when the
server cannot be reached: when more than `max_unreachable_share` (default 0.5) of the requests one
`chat_many` sent could not connect after every retry (refused, no route, unknown host, no
connection within the deadline), it raises ServerUnreachable instead (one line: the server's URL
without credentials, the count), so the task stops unfinished and a rerun asks again; a row is
never quarantined, in a run recorded as complete, for a server that was down. Other failures do
not count: a connection lost once the prompt was sent (a server that crashes on it) or a timeout
(a prompt too long to answer in time) may be the row's own.

Unusable answers: an HTTP 2xx whose body is not a chat completion (not JSON, not UTF-8, no choice,
no message, a content that is no string, token counts that are no counts, larger than
MAX_BODY_BYTES) is given up on at once with an error starting "unusable_response" that quotes the
body (RAW_CHARS of it); the op quarantines the row with reason `unusable_response`. Such a body is
not cached: a rerun asks again. The body is read by this module, not by the `openai` SDK (whose
HTTP library it uses), because the SDK reads bodies whole and passes malformed ones on.

Credentials: the API key is sent in the Authorization header and nowhere else. Whatever the server
says, the configured secrets (api_key and the header values, in any case) are masked in its answers
before they are cached or returned, and in error messages before they leave this module.
"""
from __future__ import annotations

import asyncio
import email.utils
import importlib
import json
import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Annotated, Any, Coroutine, TypeVar

from pydantic import BaseModel, Field, ValidationError

from ylink_data.core.errors import YlinkError
from ylink_data.core.redaction import Redactor, redact_url
from ylink_data.io.llm.cache import CachedAnswer, ResponseCache, request_key
from ylink_data.io.llm.config import LLMConfig
from ylink_data.io.llm.usage import Usage

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
ERROR_CHARS = 500  # of a server's error body quoted in a quarantine entry
RAW_CHARS = 2000  # of an unusable answer's body quoted in a quarantine entry
# The most of a body read: an answer of 128k tokens of Chinese, each character escaped as \uXXXX in
# JSON, is under 2 MiB; beyond 16 MiB a server is not answering a chat request. An error body is
# only quoted (ERROR_CHARS), so little of it is read.
MAX_BODY_BYTES = 16 * 2**20
ERROR_BYTES = 16 * 2**10
NO_KEY = "no-key"  # sent as the key when none is set (as the `openai` client did): local servers ignore it
T = TypeVar("T")


@dataclass
class Reply:
    """The answer to one request: `text` (None if it failed, with `error` saying why). `cached`:
    read from the response cache. An error starting with "timeout" means the server never answered
    in time, which the pipeline quarantines with reason `timeout`; one starting with
    "unusable_response", a 2xx that is no chat completion, with reason `unusable_response`."""

    text: str | None
    error: str | None = None
    cached: bool = False
    finish_reason: str | None = None
    unreachable: bool = False  # failed: the server could not be reached (after the retries)


# What is read of a chat completion (everything else is ignored); anything else is unusable.
Count = Annotated[int, Field(ge=0, strict=True)]


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _Usage(BaseModel):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None


class _Completion(BaseModel):
    choices: Annotated[list[_Choice], Field(min_length=1)]
    usage: _Usage | None = None


class ServerUnreachable(YlinkError):
    """Too many requests of one call could not reach the server: the task stops, unfinished."""


class _Retry(Exception):
    def __init__(self, message: str, wait_s: float | None = None, unreachable: bool = False):
        super().__init__(message)
        self.wait_s, self.unreachable = wait_s, unreachable


class _GiveUp(Exception):
    def __init__(self, message: str, unreachable: bool = False):
        super().__init__(message)
        self.unreachable = unreachable


class LLMClient:
    def __init__(self, config: LLMConfig, storage_options: dict[str, Any] | None = None):
        self.config = config
        self.usage = Usage()
        self.cache = ResponseCache(config.cache_dir, storage_options) if config.cache and config.cache_dir else None
        self._url = f"{config.base_url}/chat/completions"
        self._where = redact_url(config.base_url)  # the server as messages name it: no user:password
        self._headers = {"Authorization": f"Bearer {config.api_key or NO_KEY}", "Content-Type": "application/json",
                         "Accept": "application/json", **config.headers}
        self._params = config.answer_params()
        self._secrets = Redactor.knowing(secret_values(config))
        self._rng = random.Random()
        self._rng_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def close(self) -> None:
        with self._start_lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or self._pid != os.getpid():  # none started, or a forked parent's
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    # ------------------------------------------------------------------ asking

    def chat_many(self, requests: list[list[dict[str, Any]]], **request: Any) -> list[Reply]:
        """Replies to each message list, in order, with at most `max_concurrency` in flight.
        `request` adds request fields (`response_format`...), which are part of the cache key."""
        async def many() -> list[Reply]:
            return list(await asyncio.gather(*(self._chat(messages, request) for messages in requests)))

        return self._reached(self._run(many()))

    def chat(self, messages: list[dict[str, Any]], **request: Any) -> Reply:
        return self._reached([self._run(self._chat(messages, request))])[0]

    def _reached(self, replies: list[Reply]) -> list[Reply]:
        """`replies`, unless more than `max_unreachable_share` of the requests sent (cache hits are not
        sent) could not reach the server: then ServerUnreachable, one line with the server and the
        count. A row whose request never reached the server has nothing wrong with it: quarantined,
        it would be lost to a run recorded as complete; raised, its task stops unfinished and a rerun
        asks again (what was answered comes from the cache)."""
        sent = [r for r in replies if not r.cached]
        lost = [r for r in sent if r.unreachable]
        if lost and len(lost) > self.config.max_unreachable_share * len(sent):
            why = " ".join(lost[-1].error.split())[:300]
            raise ServerUnreachable(
                f"{len(lost)} of {len(sent)} requests could not reach the model server at {self._where} ({why}); "
                f"nothing of this task is recorded as done: start the server or fix llm.base_url, then run again "
                f"to ask again (llm.max_unreachable_share={self.config.max_unreachable_share:g})")
        return replies

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._started())
        try:
            return future.result()
        except BaseException:  # interrupted (Ctrl-C, a time limit): nothing stays in flight
            future.cancel()
            raise

    def _started(self) -> asyncio.AbstractEventLoop:
        """The client's event loop, started on first use in the process that uses it (a forked child
        has no copy of the parent's thread: it starts its own)."""
        with self._start_lock:
            if self._loop is None or self._pid != os.getpid():
                self._pid = os.getpid()
                import openai  # here, not at import: it takes half a second, and every run registers the ops

                n = self.config.max_concurrency
                self._library = _http_library()
                limits = self._library.Limits(max_connections=n, max_keepalive_connections=n)
                self._loop = asyncio.new_event_loop()
                self._http = openai.DefaultAsyncHttpxClient(timeout=self.config.timeout_s, limits=limits)
                self._slots = asyncio.Semaphore(n)
                self._thread = threading.Thread(target=self._loop.run_forever, name="llm", daemon=True)
                self._thread.start()
            return self._loop

    async def _shutdown(self) -> None:
        await self._http.aclose()
        await asyncio.get_running_loop().shutdown_default_executor()

    async def _chat(self, messages: list[dict[str, Any]], request: dict[str, Any]) -> Reply:
        params = {k: v for k, v in self._params.items() if k != "model"} | request
        key = request_key(self.config.model, messages, params)
        if self.cache is not None:
            hit = await asyncio.to_thread(self.cache.get, key)
            if hit is not None:  # masked again: an entry written before a key was known, or by older code
                self.usage.add("cache_hits")
                return Reply(self._mask(hit.text), cached=True, finish_reason=self._mask(hit.finish_reason))
        try:
            async with self._slots:  # held through retries and their waits, as a thread of a pool would be
                answer = await self._ask(messages, params)
        except _GiveUp as exc:
            self.usage.add("failed")
            return Reply(None, error=self._secrets.redact_text(str(exc)), unreachable=exc.unreachable)
        if self.cache is not None:
            await asyncio.to_thread(self.cache.put, key, answer)
        return Reply(answer.text, finish_reason=answer.finish_reason)

    async def _ask(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> CachedAnswer:
        fields = {k: v for k, v in params.items() if k != "extra_body"}
        # ASCII JSON (`\uXXXX` escapes): a text with a lone surrogate is still a request the server can refuse.
        body = json.dumps({"model": self.config.model, "messages": messages, **fields,
                           **(params.get("extra_body") or {})}).encode()
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            if attempt:
                self.usage.add("retries")
            self.usage.add("requests")
            try:
                return await self._once(body)
            except _Retry as exc:
                if attempt + 1 == attempts:
                    raise _GiveUp(f"{exc} (gave up after {attempts} attempts, llm.max_retries={self.config.max_retries})",
                                  exc.unreachable) from None
                await asyncio.sleep(self._wait(attempt, exc.wait_s))
        raise AssertionError("unreachable")

    async def _once(self, body: bytes) -> CachedAnswer:
        try:  # cancelled at the deadline wherever it is: connecting, waiting, reading
            status, headers, data, whole = await asyncio.wait_for(self._post(body), self.config.timeout_s)
        except asyncio.TimeoutError:
            raise self._timeout() from None
        if not 200 <= status < 300:
            quoted = self._quote(data, whole, ERROR_CHARS, squeeze=True)
            message = f"HTTP {status} from {self._where}: {quoted}"
            if status in RETRY_STATUS:
                raise _Retry(message, _retry_after(headers))
            raise _GiveUp(message)
        try:
            if not whole:
                raise ValueError(f"a body of over {MAX_BODY_BYTES // 2**20} MiB")
            completion = _Completion.model_validate_json(data)
        except ValueError as exc:  # pydantic's ValidationError is one: not JSON, not UTF-8, not this shape
            raise _GiveUp(f"unusable_response: HTTP {status} from {self._where} is no chat completion "
                          f"({_why(exc)}); raw: {self._quote(data, whole, RAW_CHARS)!r}") from None
        choice, usage = completion.choices[0], completion.usage or _Usage()
        prompt, completion_tokens = usage.prompt_tokens or 0, usage.completion_tokens or 0
        self.usage.add("prompt_tokens", prompt)
        self.usage.add("completion_tokens", completion_tokens)
        return CachedAnswer(self._mask(choice.message.content or ""), self._mask(choice.finish_reason), prompt,
                            completion_tokens)

    async def _post(self, body: bytes) -> tuple[int, Any, bytes, bool]:
        """(status, headers, body, whole): the body read up to its bound (`whole`: all of it)."""
        library = self._library
        try:
            async with self._http.stream("POST", self._url, content=body, headers=self._headers) as response:
                limit = MAX_BODY_BYTES if response.is_success else ERROR_BYTES
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > limit:  # the rest is never read: leaving the block closes the connection
                        return response.status_code, response.headers, bytes(data[:limit]), False
                return response.status_code, response.headers, bytes(data), True
        except library.TimeoutException as exc:
            raise self._timeout(unreachable=isinstance(exc, library.ConnectTimeout)) from None
        except library.RequestError as exc:  # every failure to send or to read the answer
            # Failing to connect is never the request's doing; a connection lost later may be (a
            # server that crashes on one prompt), so only the first counts as unreachable.
            raise _Retry(f"cannot reach {self._where}: {type(exc).__name__}: {exc}",
                         unreachable=isinstance(exc, library.ConnectError)) from None

    def _timeout(self, unreachable: bool = False) -> _Retry:
        return _Retry(f"timeout: no complete answer from {self._where} within "
                      f"llm.timeout_s={self.config.timeout_s:g}", unreachable=unreachable)

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        cap = self.config.max_backoff_s
        if retry_after is not None:
            return min(max(retry_after, 0.0), cap)
        with self._rng_lock:
            return min(self._rng.uniform(0, self.config.backoff_s * 2 ** attempt), cap)

    def _mask(self, text: str | None) -> str | None:
        return None if text is None else self._secrets.mask_known(text)

    def _quote(self, data: bytes, whole: bool, chars: int, squeeze: bool = False) -> str:
        """The first `chars` characters of a body (whitespace runs made one space with `squeeze`), its
        secrets masked first. A body cut short loses as many characters as the longest secret has,
        so that no secret cut in two shows its first half."""
        text = data.decode("utf-8", "replace")
        if not whole and self._secrets.known:
            text = text[:-len(self._secrets.known[0])]
        text = self._secrets.mask_known(text)
        if squeeze:
            text = " ".join(text.split())
        return text[:chars] + ("..." if len(text) > chars or not whole else "") or "(empty body)"


def secret_values(config: LLMConfig) -> list[str]:
    """What the client masks wherever a server may quote it: the key, each header's value and, of a
    value such as "Bearer <token>", the token."""
    values = [v for v in (config.api_key, *config.headers.values()) if v]
    return values + [v.split()[-1] for v in values if len(v.split()) > 1]


def _why(exc: ValueError) -> str:
    """One line: the first problem pydantic found, with where (`choices.0.message: Field required`)."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else first["msg"]
    return str(exc)


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


def _http_library():
    """The HTTP library the installed openai client is built on: httpx, or httpx2 from openai 3 on
    (its Limits, its errors). Asked of openai itself, not assumed."""
    import openai

    return importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
