"""A real OpenAI-compatible server for the LLM tests, on 127.0.0.1 in a thread of the test process
(aiohttp): POST /v1/chat/completions and GET /v1/models.

It answers deterministically from the prompt. A prompt holding a `<document>...</document>` and
asking for "N question..." (or "N 个问答对") gets N grounded pairs as JSON, `{"pairs": [{"question",
"answer"}]}`: each answer is one sentence of the document, in order, each question names the
sentence's first words. A judge's prompt (`<instruction>` and `<response>`, or `<response_a>` and
`<response_b>`, each on lines of their own) gets JSON: pointwise `{"reason", "score"}` with
`judge_score(response)`, pairwise `{"reason", "winner"}`, the response with the higher score winning
("tie" when equal), or, with `judge_bias="A"`, always the response shown first (position bias). A
document rubric's prompt (configs/prompts/judge-edu-*.txt: a `<document>` and, outside it, the
`"score"` asked for) gets `{"reason", "score"}` with `edu_score(document)`: the number of educational
terms (EDU_TERMS) among its words, at most 5, or the number planted after `SCORE=`.
A Self-Instruct prompt (configs/prompts/self_instruct-*.txt: "Come up with N
new tasks ... start at K", or its Chinese) gets a numbered list from K (`instruction_list`): a
near-duplicate of the prompt's first example, items the heuristics reject (a banned keyword, a
leading punctuation mark, too short), then distinct tasks drawn from the prompt's hash. An
Evol-Instruct prompt ("#Given Prompt#:") gets the instruction with a requirement added
(`evolved`), behind a "#Rewritten Prompt#:" label as models often write. A request asking about
picking a lock (开锁) gets a refusal. Anything else gets `echo: <the last message>`, and with
`seeded_echo` on, `echo (seed S): ...` for a request with a `seed` (with `vary_by_seed`, followed by S
mod 10 "!"s, so that responses differ in length and so in `judge_score`). Every answer reports
`usage` tokens (a quarter of the characters, at least 1), summed in `usage_sent`.

Misbehaviour on demand, for the next `times` requests (or those whose prompt matches `match`):

    server.fail("429", times=2, retry_after=1)   # 429 with Retry-After
    server.fail("500")                           # 500
    server.fail("stall", seconds=3)              # answers, but only after `seconds`
    server.fail("malformed")                     # 200 whose content is not JSON
    server.fail("schema")                        # 200 with JSON of the wrong shape (a judge's: no score)
    server.fail("unsupported")                   # a pair whose answer is not in the document
    server.fail("400")                           # a request error (not worth retrying)

HTTP 200 answers that are no chat completion (UNUSABLE): "not_json" (an HTML page, as a proxy
sends), "no_choices" (`choices: []`), "empty_choice" (`[{}]`), "null_message" (`message: null`),
"choices_not_list" (`choices: "oops"`), "object_content" (`content` an object), "bad_usage"
(`usage.prompt_tokens: "many"`), "not_utf8" (the answer's bytes in cp1252, with a "café").

Answers that never end in time: "trickle" sends its headers and then the whole answer one byte
every `seconds` (default 1); "endless" sends headers, the start of an answer and then 64 KiB of
content every `seconds` (0: as fast as it can) until the client hangs up (or ENDLESS_CAP_*). For
both, the request's `sent` counts the body bytes written and `hung_up` says the client closed the
connection before the answer ended.

Any answer: `server.answer(content, match=...)` answers with `content` as the message's text (a
well-formed chat completion; JSON's ASCII escapes carry what UTF-8 cannot, a lone surrogate), and
`finish_reason="length"` says it was cut off at max_tokens.

Answers that quote credentials: "quote_auth" answers as usual but quotes the request's credential
headers (CREDENTIAL_HEADERS: Authorization, X-Api-Key), as sent, upper-cased and lower-cased, in its
content (in each question of a pairs answer, so they reach the rows); "401_upper" is a 401 whose
body quotes the key it was sent in upper case.

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

UNUSABLE = ("not_json", "no_choices", "empty_choice", "null_message", "choices_not_list", "object_content",
            "bad_usage", "not_utf8")
KINDS = ("429", "500", "stall", "malformed", "schema", "unsupported", "400", *UNUSABLE, "trickle", "endless",
         "quote_auth", "401_upper", "content")
CREDENTIAL_HEADERS = ("Authorization", "X-Api-Key")
# An endless answer ends after this long, or this many bytes, even if the client never hangs up
# (a client that never does holds a test for minutes, never forever, nor all the machine's memory).
ENDLESS_CAP_S = 120.0
ENDLESS_CAP_BYTES = 128 * 2**20
ENDLESS_CHUNK = 64 * 1024
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


# The test judge's educational terms (edu_score): each a set of word forms, counted once whichever
# form appears. English: school and science words, and the words of explanation and general
# knowledge that news and books use too (so that real text gets every score, see edu_score).
EDU_TERMS_EN = (
    "learn learns learned learning learnt", "student students", "school schools",
    "science sciences scientific scientist scientists", "research researcher researchers",
    "study studies studied studying", "theory theories theoretical", "history historical historic",
    "explain explains explained explaining explanation", "example examples instance",
    "knowledge know known", "education educational teach teacher teachers teaching taught",
    "university universities college", "understand understanding understood", "information data",
    "analysis analyst analysts analyse analyze", "method methods process processes", "system systems",
    "develop developed development developing", "technology technical technique techniques", "evidence",
    "problem problems", "because", "reason reasons", "result results", "cause causes caused", "effect effects",
    "important importance", "compare compared comparison", "increase increased increases", "however",
    "therefore thus", "according", "nature natural", "human humans", "life", "world", "law laws", "government",
    "economy economic economics", "policy policies", "public", "general generally", "means mean meaning",
    "include includes including included", "report reports reported", "expect expects expected expectation",
    "growth grow grows grew", "based basis", "national nation nations", "international")
EDU_TERMS_ZH = ("学习 学生 教育 科学 研究 知识 历史 理论 实验 课程 老师 教师 学校 大学 考试 专家 技术 发展 分析 原因 方法 数据 经济 "
                "影响 理解 了解 世界 文化 社会 系统 结果 因为 提高 重要 信息 过程 变化 标准 发现 介绍 例如 比如 解释 说明 能力 培养 "
                "基础 原理 环境 健康 生活")
EDU_TERMS = tuple(frozenset(forms.split()) for forms in EDU_TERMS_EN) + tuple(
    frozenset([word]) for word in EDU_TERMS_ZH.split())


def edu_score(text: str) -> int:
    """The test judge's educational score of a document (0-5, a document rubric's answer): the
    number after `SCORE=` in it if any (which may be outside 0-5, for tests of validation), else
    the number of EDU_TERMS of which a form is one of the text's words, at most 5.

    The words are those a quality classifier reads (ylink_data/text/quality/preprocess.py `model_line`,
    of the whole text: English lowercased with its punctuation split off, Chinese cut by rjieba),
    so the score is a function of the tokens fastText sees: a classifier trained on these labels
    can learn them (the more so from whole documents: `prefix_chars` 0; by default it reads the
    first 500 English or 150 Chinese characters).

    Measured on real text with these lists (mean; share scored 3 or more; shares of 0, 1, ..., 5):
    Reuters-21578, all 10,788 articles (47% under 500 characters, earnings tables among them): 1.66; 0.28;
    .36 .23 .13 .08 .06 .14. Its 5,760 articles of 500 characters or more: 2.67; 0.49;
    .12 .21 .18 .14 .10 .26. THUCNews (cnews.val.txt, 1,000 articles): 2.80; 0.54;
    .18 .15 .12 .10 .08 .35. Gutenberg (nltk's 14 books, 84 pieces of 2,000 characters): 2.83;
    0.58; .08 .15 .18 .24 .12 .23. Longer texts hold more terms: short notes score low, long
    articles high, as with a real document rubric. A fastText model (softmax, word bigrams, dim 16)
    trained on 80% to tell 3 or more from the rest got 0.87 of the other 20% of those Reuters
    articles right from whole texts, 0.78 from the default prefix; on THUCNews (800 training
    articles) 0.80 and 0.76."""
    planted = _PLANTED_SCORE.search(text)
    if planted:
        return int(planted.group(1))
    from ylink_data.text.quality.preprocess import model_line

    words = set(model_line(text, None, 0).split())
    return min(5, sum(1 for forms in EDU_TERMS if not forms.isdisjoint(words)))


_TASKS_ASKED = re.compile(r"(?:Come up with|请再写出)\s*(\d+)\s*(?:new tasks|个新任务)")
_START = re.compile(r"(?:start at|从)\s*(\d+)\s*(?:and|开始)")
_EXAMPLE = re.compile(r"^(\d+)\. (.+)$", re.M)
_GIVEN = re.compile(r"#(?:Given Prompt|给定提示)#[:：]\n(.*?)\n#", re.S)
_REFUSE = re.compile(r"pick a lock|撬锁|开锁", re.I)
REFUSALS = {"en": "I'm sorry, but I cannot help with that. As an AI, I must follow the law.",
            "zh": "很抱歉，我不能提供这方面的帮助。作为一个人工智能，我无法协助可能违法的行为。"}
# The fillers of the distinct tasks: five slots, so two tasks share little beyond the template.
_EN_TASKS = ("{verb} a {adj} {thing} about {topic} for {who}.",
             "Which {thing} would {who} choose for {topic}, and why is it {adj}? {verb} your answer.",
             "Give three {adj} reasons why {who} should {verb} a {thing} on {topic}.")
_EN = {"verb": ("Write", "Compose", "Draft", "Outline", "Sketch out", "Plan", "Summarise", "Critique"),
       "adj": ("short", "persuasive", "funny", "formal", "step-by-step", "detailed", "gentle", "surprising"),
       "thing": ("letter", "poem", "checklist", "speech", "recipe", "lesson", "story", "budget", "review"),
       "topic": ("urban beekeeping", "tidal energy", "medieval trade fairs", "learning Esperanto",
                 "saving for retirement", "bicycle repair", "volcano safety", "night sky photography tips",
                 "rainwater harvesting", "chess openings", "sourdough baking", "public libraries"),
       "who": ("a retired sailor", "first-year nurses", "a village council", "twelve-year-olds", "new managers",
               "a marathon runner", "hotel receptionists", "software interns")}
_ZH_TASKS = ("请为{who}写一篇关于{topic}的{adj}{thing}。", "{who}在{topic}方面最常犯的错误是什么？用{adj}的语气写一段{thing}。")
_ZH = {"adj": ("简短", "幽默", "正式", "详细", "温和", "生动"),
       "thing": ("书信", "短诗", "清单", "演讲稿", "菜谱", "教案", "故事", "评论"),
       "topic": ("城市养蜂", "潮汐发电", "古代丝绸之路", "学习围棋", "退休理财", "修自行车", "防范电信诈骗",
                 "垃圾分类", "高原徒步", "家庭种菜", "二十四节气", "社区图书馆"),
       "who": ("退休教师", "大一新生", "社区居委会", "小学生", "新任经理", "马拉松跑者", "酒店前台", "实习程序员")}
_EVOL_ADD = {"en": ("Answer in no more than 120 words and give one concrete example.",
                    "Explain your reasoning step by step before giving the final answer.",
                    "Assume the reader is a beginner and avoid technical terms.",
                    "Compare two different approaches and say which one you prefer."),
             "zh": ("请把回答控制在一百二十字以内，并举一个具体的例子。", "请先一步一步说明推理过程，再给出最终答案。",
                    "假设读者是初学者，请避免使用专业术语。", "请比较两种不同的做法，并说明你更倾向哪一种。")}


@dataclass
class Fault:
    kind: str
    times: int
    match: re.Pattern | None = None
    retry_after: float | None = None
    seconds: float | None = None
    content: str | None = None  # "content": the answer's text, as given
    finish_reason: str = "stop"  # "content": why the answer ended ("length": cut off at max_tokens)


@dataclass
class Request:
    began: float
    prompt: str
    status: int = 0
    kind: str | None = None  # the fault applied, if any
    ended: float = 0.0
    sent: int = 0  # body bytes written, for "trickle" and "endless"
    hung_up: bool = False  # the client closed the connection before the answer ended


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
    seeded_echo: bool = False
    vary_by_seed: bool = False  # with seeded_echo: a seeded echo ends in `seed` "!"s (so the judge's score differs)

    def __post_init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- control -------------------------------------------------------------------------------
    def fail(self, kind: str, times: int = 1, match: str | None = None, retry_after: float | None = None,
             seconds: float | None = None, content: str | None = None, finish_reason: str = "stop") -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(KINDS)}")
        with self._lock:
            self._faults.append(Fault(kind, times, re.compile(match) if match else None, retry_after, seconds,
                                      content, finish_reason))

    def answer(self, content: str, match: str | None = None, times: int = 1, finish_reason: str = "stop") -> None:
        """The next `times` requests (matching `match`) are answered with `content` as the message's
        text, in a well-formed chat completion (a lone surrogate in it is sent as its JSON escape),
        ended for `finish_reason` ("length": cut off at max_tokens)."""
        self.fail("content", times=times, match=match, content=content, finish_reason=finish_reason)

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
            response = await self._answer(request, body, prompt, fault, entry)
            entry.status = response.status
            return response
        except asyncio.CancelledError:  # aiohttp cancels a handler whose client hung up
            entry.hung_up = True
            raise
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

    async def _answer(self, request: web.Request, body: dict, prompt: str, fault: Fault | None,
                      entry: Request) -> web.StreamResponse:
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
        if kind == "401_upper":
            return web.json_response({"error": {"message": f"INCORRECT API KEY PROVIDED: {sent.upper()}"}}, status=401)
        if kind == "not_json":
            return web.Response(text="<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html")
        if kind == "endless":
            return await self._endless(request, body, entry, fault.seconds or 0.0)
        if kind == "stall":
            await asyncio.sleep(fault.seconds or 0.0)
        content = (fault.content if kind == "content" else
                   self._content(prompt, kind, body.get("seed") if self.seeded_echo else None))
        if kind == "quote_auth":
            content = _quote_credentials(content, request.headers)
        usage = {"prompt_tokens": max(1, len(prompt) // 4), "completion_tokens": max(1, len(content) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        with self._lock:
            for k in ("prompt_tokens", "completion_tokens"):
                self.usage_sent[k] += usage[k]
        choice = {"index": 0, "message": {"role": "assistant", "content": content},
                  "finish_reason": fault.finish_reason if kind == "content" else "stop"}
        answer = {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                  "model": body.get("model"), "choices": [choice], "usage": usage}
        if kind == "no_choices":
            answer["choices"] = []
        elif kind == "empty_choice":
            answer["choices"] = [{}]
        elif kind == "null_message":
            choice["message"] = None
        elif kind == "choices_not_list":
            answer["choices"] = "oops"
        elif kind == "object_content":
            choice["message"]["content"] = {"text": content}
        elif kind == "bad_usage":
            usage["prompt_tokens"] = "many"
        if kind == "not_utf8":
            choice["message"]["content"] = content + " café"
            return web.Response(body=json.dumps(answer, ensure_ascii=False).encode("cp1252", "replace"),
                                content_type="application/json")
        if kind == "trickle":
            return await self._trickle(request, json.dumps(answer).encode(), entry, fault.seconds or 1.0)
        return web.json_response(answer)  # json.dumps: ASCII, a lone surrogate as its escape

    async def _trickle(self, request: web.Request, data: bytes, entry: Request, every: float) -> web.StreamResponse:
        """The headers at once, then `data` one byte every `every` seconds."""
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": str(len(data))})
        await response.prepare(request)
        for k in range(len(data)):
            if not await _write(response, data[k:k + 1], entry):
                return response
            await asyncio.sleep(every)
        await response.write_eof()
        return response

    async def _endless(self, request: web.Request, body: dict, entry: Request, every: float) -> web.StreamResponse:
        """The headers and the start of an answer, then content without end (see the module docstring)."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        start = f'{{"id": "chatcmpl-test", "model": "{body.get("model")}", "choices": [{{"index": 0, ' \
                '"message": {"role": "assistant", "content": "'
        if not await _write(response, start.encode(), entry):
            return response
        chunk, ends = b"a" * ENDLESS_CHUNK, time.monotonic() + ENDLESS_CAP_S
        while time.monotonic() < ends and entry.sent < ENDLESS_CAP_BYTES:
            if not await _write(response, chunk, entry):
                return response
            await asyncio.sleep(every)
        await response.write(b'"}, "finish_reason": "length"}]}')
        await response.write_eof()
        return response

    def _content(self, prompt: str, kind: str | None, seed: int | None = None) -> str:
        if kind == "malformed":
            return '{"pairs": [{"question": "unterminated'
        judged = self._judge(prompt, kind)
        if judged is not None:
            return judged
        tasks, given = _TASKS_ASKED.search(prompt), _GIVEN.search(prompt)
        if tasks:
            start = _START.search(prompt)
            return instruction_list(prompt, int(tasks.group(1)), int(start.group(1)) if start else 1)
        if given:
            return "#Rewritten Prompt#:\n" + evolved(given.group(1).strip())
        if _REFUSE.search(prompt):
            return REFUSALS["zh" if _HAN.search(prompt) else "en"]
        document, asked = _DOCUMENT.search(prompt), _PAIRS_ASKED.search(prompt)
        if document is None or asked is None:
            last = prompt.splitlines()[-1] if prompt else ""
            if seed is None:
                return "echo: " + last
            return f"echo (seed {seed}): {last}" + ("!" * (seed % 10) if self.vary_by_seed else "")
        pairs = grounded_pairs(document.group(1), int(asked.group(1)))
        if kind == "schema":
            return json.dumps({"questions": [p["question"] for p in pairs]}, ensure_ascii=False)
        if kind == "unsupported" and pairs:
            pairs[-1]["answer"] = MADE_UP["zh" if _HAN.search(pairs[-1]["answer"]) else "en"]
        return json.dumps({"pairs": pairs}, ensure_ascii=False)


    def _judge(self, prompt: str, kind: str | None = None) -> str | None:
        """A judge's answer to a judge's prompt (None for any other prompt); with the "schema" fault,
        JSON without its score or winner (`grade`, `choice`: what a judge that ignores the format says)."""
        score_key, winner_key = ("grade", "choice") if kind == "schema" else ("score", "winner")
        both = _RESPONSE_AB.search(prompt)
        if both is not None:
            a, b = (judge_score(r) for r in both.groups())
            winner = self.judge_bias or ("A" if a > b else "B" if b > a else "tie")
            return json.dumps({"reason": f"A scores {a}, B scores {b}.", winner_key: winner})
        one = _RESPONSE.search(prompt)
        if one is not None:
            score = judge_score(one.group(1))
            return json.dumps({"reason": f"{len(one.group(1))} characters.", score_key: score})
        document = _DOCUMENT.search(prompt)
        # A document rubric: a document, and a "score" asked for outside it (qa_generate's prompts ask for pairs).
        if document is not None and '"score"' in prompt[:document.start()] + prompt[document.end():]:
            score = edu_score(document.group(1))
            return json.dumps({"reason": f"{score} educational terms.", score_key: score})
        return None


async def _write(response: web.StreamResponse, data: bytes, entry: Request) -> bool:
    """Writes `data`; False (and `entry.hung_up`) when the client has closed the connection."""
    try:
        await response.write(data)  # waits while the client's socket is full
    except ConnectionError:
        entry.hung_up = True
        return False
    entry.sent += len(data)
    return True


def _quote_credentials(content: str, headers) -> str:
    """`content` with the request's credential headers quoted as sent, in upper and in lower case: in
    each question of a pairs answer (so that they reach the rows), else at its end."""
    quoted = "; ".join(f"{name}: {v} | {v.upper()} | {v.lower()}" for name in CREDENTIAL_HEADERS
                       if (v := headers.get(name)))
    try:
        data = json.loads(content)
    except ValueError:
        return f"{content} (you sent {quoted})"
    if isinstance(data, dict) and isinstance(data.get("pairs"), list):
        for pair in data["pairs"]:
            pair["question"] = f"{pair['question']} (you sent {quoted})"
        return json.dumps(data, ensure_ascii=False)
    return f"{content} (you sent {quoted})"


def _rng(prompt: str):
    import hashlib
    import random
    return random.Random(hashlib.sha256(prompt.encode()).hexdigest())


def instruction_list(prompt: str, n: int, start: int) -> str:
    """The numbered answer to a Self-Instruct prompt (see the module docstring), `n` items from `start`."""
    examples = [m.group(2) for m in _EXAMPLE.finditer(prompt.split("\n\n", 1)[-1])]
    zh = bool(examples) and sum(bool(_HAN.search(e)) for e in examples) * 2 > len(examples)
    rng = _rng(prompt)
    items = []
    if examples:  # a near-duplicate: the first example with its last word (character) changed
        first = examples[0].rstrip("。？?.!！")
        items.append(first[:-1] + "吗？" if zh else " ".join(first.split()[:-1] + ["today?"]))
    if zh:
        items += [f"请描述一张{rng.choice(_ZH['topic'])}的图片，写三句话。", f"《{rng.choice(_ZH['topic'])}》讲了什么？",
                  "讲笑话。"]
    else:
        items += [f"Describe the picture of {rng.choice(_EN['topic'])} in three sentences.",
                  f'"{rng.choice(_EN["topic"]).capitalize()}" is a phrase: explain where it comes from.', "Tell a joke."]
    while len(items) < n:
        table, fill = (_ZH_TASKS, _ZH) if zh else (_EN_TASKS, _EN)
        items.append(rng.choice(table).format(**{k: rng.choice(v) for k, v in fill.items()}))
    return "\n".join(f"{start + k}. {item}" for k, item in enumerate(items[:n]))


def evolved(instruction: str) -> str:
    """The given instruction with a requirement of its hash added."""
    adds = _EVOL_ADD["zh" if _HAN.search(instruction) else "en"]
    return f"{instruction} {_rng(instruction).choice(adds)}"


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
