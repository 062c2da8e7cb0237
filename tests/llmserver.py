"""A real OpenAI-compatible server for the LLM tests, on 127.0.0.1 in a thread of the test process
(aiohttp): POST /v1/chat/completions and GET /v1/models.

It answers deterministically from the prompt. A prompt holding a `<document>...</document>` and
asking for "N question..." (or "N 个问答对") gets N grounded pairs as JSON, `{"pairs": [{"question",
"answer"}]}`: each answer is one sentence of the document, in order, each question names the
sentence's first words. A judge's prompt (`<instruction>` and `<response>`, or `<response_a>` and
`<response_b>`, each on lines of their own) gets JSON: pointwise `{"reason", "score"}` with
`judge_score(response)`, pairwise `{"reason", "winner"}`, the response with the higher score winning
("tie" when equal), or, with `judge_bias="A"`, always the response shown first (position bias).
Anything else gets `echo: <the last message>`. Every answer reports
`usage` tokens (a quarter of the characters, at least 1), summed in `usage_sent`.

Misbehaviour on demand, for the next `times` requests (or those whose prompt matches `match`):

    server.fail("429", times=2, retry_after=1)   # 429 with Retry-After
    server.fail("500")                           # 500
    server.fail("stall", seconds=3)              # answers, but only after `seconds`
    server.fail("malformed")                     # 200 whose content is not JSON
    server.fail("schema")                        # 200 with JSON of the wrong shape
    server.fail("unsupported")                   # a pair whose answer is not in the document
    server.fail("400")                           # a request error (not worth retrying)

With `api_key` set, a request without `Authorization: Bearer <api_key>` gets a 401 that quotes the
key it was sent, as some servers do. `latency` delays every answer. `log` holds every request
(arrival time, status, prompt); `max_in_flight` the most requests it held at once.
"""
from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass, field

import pytest
from aiohttp import web

KINDS = ("429", "500", "stall", "malformed", "schema", "unsupported", "400")
MADE_UP = {"en": "The moon is made of green cheese and orbits a purple giraffe.", "zh": "月亮由绿色奶酪制成，绕着紫色长颈鹿旋转。"}
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_PAIRS_ASKED = re.compile(r"(\d+)\s*(?:question|个问答)")
_DOCUMENT = re.compile(r"<document>\n(.*?)\n</document>", re.S)  # on lines of their own: prompts name the tags too
_HAN = re.compile(r"[\u4e00-\u9fff]")
_RESPONSE = re.compile(r"<response>\n(.*?)\n</response>", re.S)
_RESPONSE_AB = re.compile(r"<response_a>\n(.*?)\n</response_a>.*?<response_b>\n(.*?)\n</response_b>", re.S)
_PLANTED_SCORE = re.compile(r"SCORE=(-?\d+)")


def judge_score(response: str) -> int:
    """The test judge's score of a response: the number after `SCORE=` in it if any (which may be
    outside 1-10, for tests of validation), else 1 + its length in characters modulo 10."""
    planted = _PLANTED_SCORE.search(response)
    return int(planted.group(1)) if planted else 1 + len(response) % 10


@dataclass
class Fault:
    kind: str
    times: int
    match: re.Pattern | None = None
    retry_after: float | None = None
    seconds: float = 0.0


@dataclass
class Request:
    began: float
    prompt: str
    status: int = 0
    kind: str | None = None  # the fault applied, if any
    ended: float = 0.0


@dataclass
class LLMServer:
    latency: float = 0.0
    api_key: str | None = None
    model: str = "ylink-test"
    judge_bias: str | None = None  # "A": pairwise verdicts always for the response shown first
    log: list[Request] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    usage_sent: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})

    def __post_init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- control -------------------------------------------------------------------------------
    def fail(self, kind: str, times: int = 1, match: str | None = None, retry_after: float | None = None,
             seconds: float = 0.0) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(KINDS)}")
        with self._lock:
            self._faults.append(Fault(kind, times, re.compile(match) if match else None, retry_after, seconds))

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self.log.clear()
            self.max_in_flight = 0
            self.usage_sent = {"prompt_tokens": 0, "completion_tokens": 0}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> int:
        return len(self.log)

    # -- life ----------------------------------------------------------------------------------
    def __enter__(self) -> "LLMServer":
        started = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._chat)
            app.router.add_get("/v1/models", self._models)
            runner = web.AppRunner(app, handle_signals=False)
            self._loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            self._runner = runner
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=serve, daemon=True, name="llmserver")
        self._thread.start()
        started.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # -- handlers ------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        entry = Request(time.monotonic(), prompt)
        with self._lock:
            self.log.append(entry)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            fault = self._take_fault(prompt)
        entry.kind = fault.kind if fault else None
        try:
            response = await self._answer(request, body, prompt, fault)
            entry.status = response.status
            return response
        finally:
            entry.ended = time.monotonic()
            with self._lock:
                self.in_flight -= 1

    def _take_fault(self, prompt: str) -> Fault | None:
        for fault in self._faults:
            if fault.times > 0 and (fault.match is None or fault.match.search(prompt)):
                fault.times -= 1
                return fault
        return None

    async def _answer(self, request: web.Request, body: dict, prompt: str, fault: Fault | None) -> web.Response:
        if self.latency:
            await asyncio.sleep(self.latency)
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.api_key is not None and sent != self.api_key:
            return web.json_response({"error": {"message": f"Incorrect API key provided: {sent}"}}, status=401)
        kind = fault.kind if fault else None
        if kind == "429":
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            return web.json_response({"error": {"message": "rate limited"}}, status=429, headers=headers)
        if kind in ("500", "400"):
            return web.json_response({"error": {"message": f"injected {kind}"}}, status=int(kind))
        if kind == "stall":
            await asyncio.sleep(fault.seconds)
        content = self._content(prompt, kind)
        usage = {"prompt_tokens": max(1, len(prompt) // 4), "completion_tokens": max(1, len(content) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        with self._lock:
            for k in ("prompt_tokens", "completion_tokens"):
                self.usage_sent[k] += usage[k]
        return web.json_response({
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage})

    def _content(self, prompt: str, kind: str | None) -> str:
        if kind == "malformed":
            return '{"pairs": [{"question": "unterminated'
        judged = self._judge(prompt)
        if judged is not None:
            return judged
        document, asked = _DOCUMENT.search(prompt), _PAIRS_ASKED.search(prompt)
        if document is None or asked is None:
            return "echo: " + prompt.splitlines()[-1] if prompt else "echo:"
        pairs = grounded_pairs(document.group(1), int(asked.group(1)))
        if kind == "schema":
            return json.dumps({"questions": [p["question"] for p in pairs]}, ensure_ascii=False)
        if kind == "unsupported" and pairs:
            pairs[-1]["answer"] = MADE_UP["zh" if _HAN.search(pairs[-1]["answer"]) else "en"]
        return json.dumps({"pairs": pairs}, ensure_ascii=False)


    def _judge(self, prompt: str) -> str | None:
        both = _RESPONSE_AB.search(prompt)
        if both is not None:
            a, b = (judge_score(r) for r in both.groups())
            winner = self.judge_bias or ("A" if a > b else "B" if b > a else "tie")
            return json.dumps({"reason": f"A scores {a}, B scores {b}.", "winner": winner})
        one = _RESPONSE.search(prompt)
        if one is not None:
            score = judge_score(one.group(1))
            return json.dumps({"reason": f"{len(one.group(1))} characters.", "score": score})
        return None


def sentences(text: str) -> list[str]:
    """The document's sentences long enough to answer a question (20 characters, 8 for Chinese)."""
    out = []
    for s in _SENTENCE_END.split(" ".join(text.split())):
        s = s.strip()
        if s and s not in out and len(s) >= (8 if _HAN.search(s) else 20):
            out.append(s)
    return out


def grounded_pairs(document: str, n: int) -> list[dict[str, str]]:
    """The first `n` sentences of `document` as answers, each with a question naming its first words."""
    pairs = []
    for s in sentences(document)[:n]:
        if _HAN.search(s):
            pairs.append({"question": f"关于“{s[:6]}”，文中怎么说？", "answer": s})
        else:
            pairs.append({"question": f"What does the text say about {' '.join(s.split()[:4])}?", "answer": s})
    return pairs


@pytest.fixture
def llm_server():
    """A fresh test server per test (misbehaviour and counts never leak between tests)."""
    with LLMServer() as server:
        yield server
