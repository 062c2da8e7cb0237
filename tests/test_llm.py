"""The LLM access layer without a pipeline: the `llm:` block as config.py resolves it, and the
client against the real test server (tests/llmserver.py): concurrency bound, retries, the cache,
errors and answers cleared of the key, unusable answers as errors, the client's thread stopped.
The same hostile answers through whole pipeline runs: tests/chaos/test_llm_hostile.py."""
from __future__ import annotations

import re
import threading

import pytest

from tests.llmserver import UNUSABLE, LLMServer, llm_server  # noqa: F401 -- the fixture
from ylink_data.engine.config import load_config
from ylink_data.core.errors import ConfigError
from ylink_data.io.llm.cache import CachedAnswer, ResponseCache, request_key
from ylink_data.io.llm.client import LLMClient
from ylink_data.io.llm.config import LLMConfig
from ylink_data.engine.runner import _fingerprint_params
from ylink_data.core.redaction import MASK, Redactor, redact_text

KEY = "ylinktest-abcdefghij0123456789"  # no well-known token shape: only knowing it masks it


def _cfg(tmp_path, llm, op_llm=None) -> dict:
    params = {"pairs": 2} | ({"llm": op_llm} if op_llm else {})
    return {"input": {"paths": [str(tmp_path)]}, "output": {"path": str(tmp_path / "out")}, "llm": llm,
            "stages": [{"qa_generate": params}]}


def test_llm_block_resolved_per_op(tmp_path, monkeypatch):
    monkeypatch.setenv("YLINK_TEST_LLM_KEY", KEY)
    llm = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "${YLINK_TEST_LLM_KEY}", "seed": 1}
    cfg = load_config(_cfg(tmp_path, llm, op_llm={"model": "judge", "max_concurrency": 3}))
    params = dict(cfg.ops)["qa_generate"]["llm"]
    assert (params["model"], params["api_key"], params["max_concurrency"], params["seed"]) == ("judge", KEY, 3, 1)
    assert params["cache_dir"] == str(tmp_path / "out") + "/llm-cache"
    assert KEY not in str(cfg.redact(cfg.model_dump())) and KEY not in cfg.redact(f"error: {KEY}")
    # The fingerprint holds what changes an answer: not the key, the server or the concurrency.
    other = load_config(_cfg(tmp_path, llm | {"api_key": "other", "base_url": "http://10.0.0.1/v1"},
                             op_llm={"model": "judge", "max_concurrency": 9}))
    fingerprint = _fingerprint_params("qa_generate", dict(cfg.ops)["qa_generate"])
    assert fingerprint == _fingerprint_params("qa_generate", dict(other.ops)["qa_generate"])
    assert fingerprint["llm"] == {"model": "judge", "seed": 1}


@pytest.mark.parametrize("llm, message", [
    ({"model": "m"}, "llm.base_url: qa_generate (stages[0]) calls a model"),
    ({"base_url": "127.0.0.1:8000", "model": "m"}, "llm.base_url: base_url must be an http:// or https:// URL"),
    ({"base_url": "http://h/v1", "model": "m", "max_concurency": 3}, "did you mean 'max_concurrency'"),
])
def test_llm_block_errors_name_the_key(tmp_path, llm, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(_cfg(tmp_path, llm))


def test_concurrency_is_bounded(llm_server):
    llm_server.latency = 0.2
    client = LLMClient(LLMConfig(base_url=llm_server.base_url, model="m", max_concurrency=3))
    replies = client.chat_many([[{"role": "user", "content": f"hello {i}"}] for i in range(12)])
    assert [r.text for r in replies] == [f"echo: hello {i}" for i in range(12)]  # in order
    assert llm_server.max_in_flight == 3  # reached, never passed


def test_retries_and_give_up(llm_server):
    client = LLMClient(LLMConfig(base_url=llm_server.base_url, model="m", max_retries=2, backoff_s=0.01, timeout_s=1))
    llm_server.fail("429", retry_after=1)
    llm_server.fail("500")
    llm_server.fail("stall", seconds=3)
    reply = client.chat([{"role": "user", "content": "once"}])
    assert reply.text is None and "gave up after 3 attempts" in reply.error  # 429, 500, stall: 3 attempts
    assert [r.status for r in llm_server.log[:2]] == [429, 500]
    assert llm_server.log[1].began - llm_server.log[0].ended >= 0.9  # Retry-After: 1, backoff 0.01
    assert client.chat([{"role": "user", "content": "twice"}]).text == "echo: twice"
    llm_server.fail("400", times=5)
    reply = client.chat([{"role": "user", "content": "bad"}])
    assert reply.error.startswith("HTTP 400") and llm_server.requests == 5  # not retried
    assert client.usage.take() == {"llm_requests": 5, "llm_retries": 2, "llm_failed": 2, "llm_prompt_tokens": 1,
                                   "llm_completion_tokens": 2}  # "twice" only: 5 // 4, 11 // 4


def test_timeout_error_and_key_cleared(tmp_path):
    with LLMServer(api_key="the-right-key") as server:
        client = LLMClient(LLMConfig(base_url=server.base_url, model="m", api_key=KEY, max_retries=0))
        reply = client.chat([{"role": "user", "content": "hi"}])
        assert "Incorrect API key provided" in reply.error and KEY not in reply.error  # the server quoted it
        server.fail("stall", seconds=2)
        slow = LLMClient(LLMConfig(base_url=server.base_url, model="m", api_key="the-right-key", max_retries=0,
                                   timeout_s=0.5))
        assert slow.chat([{"role": "user", "content": "hi"}]).error.startswith("timeout")


def test_cache_shared_and_keyed(llm_server, tmp_path):
    config = LLMConfig(base_url=llm_server.base_url, model="m", cache_dir=str(tmp_path / "cache"), seed=1)
    messages = [[{"role": "user", "content": f"q{i}"}] for i in range(4)]
    first = LLMClient(config).chat_many(messages)
    second = LLMClient(config)  # another worker: the same folder
    assert [r.text for r in second.chat_many(messages)] == [r.text for r in first]
    assert llm_server.requests == 4 and second.usage.take() == {"llm_cache_hits": 4}
    LLMClient(config.model_copy(update={"seed": 2})).chat(messages[0])  # another seed is another request
    LLMClient(config.model_copy(update={"base_url": "http://127.0.0.1:9/v1"})).chat(messages[0])  # no server needed
    assert llm_server.requests == 5


def test_unusable_answers_are_errors_and_never_cached(llm_server, tmp_path):
    """Each HTTP 200 that is no chat completion is a reply with an `unusable_response` error quoting
    the body (before: an exception that stopped the run), counts no tokens, and is not cached: asked
    again, the server's next (good) answer is taken."""
    client = LLMClient(LLMConfig(base_url=llm_server.base_url, model="m", cache_dir=str(tmp_path / "cache")))
    for kind in UNUSABLE:
        llm_server.fail(kind)
        reply = client.chat([{"role": "user", "content": kind}])
        assert reply.text is None and reply.error.startswith("unusable_response: HTTP 200 from "), (kind, reply)
        assert "raw: " in reply.error and "\n" not in reply.error
    assert client.usage.take() == {"llm_requests": len(UNUSABLE), "llm_failed": len(UNUSABLE)}
    assert [client.chat([{"role": "user", "content": kind}]).text for kind in UNUSABLE] == [
        f"echo: {kind}" for kind in UNUSABLE]
    assert llm_server.requests == 2 * len(UNUSABLE)


def test_answers_cleared_of_the_key_in_any_case(llm_server, tmp_path):
    """The key quoted back in an answer is masked before the answer is cached or returned, and so is a
    cache entry that holds it (one written before the masking was there)."""
    cache_dir = tmp_path / "cache"
    config = LLMConfig(base_url=llm_server.base_url, model="m", api_key=KEY, cache_dir=str(cache_dir))
    client = LLMClient(config)
    llm_server.fail("quote_auth")
    text = client.chat([{"role": "user", "content": "quote"}]).text
    assert text == f"echo: quote (you sent Authorization: Bearer {MASK} | BEARER {MASK} | bearer {MASK})"
    entries = list(cache_dir.rglob("*.json"))
    assert entries and all(KEY.lower() not in f.read_text().lower() for f in entries)
    old = [{"role": "user", "content": "old"}]
    ResponseCache(str(cache_dir)).put(request_key("m", old, {}), CachedAnswer(f"k={KEY.upper()}", "stop", 1, 1))
    assert client.chat(old).text == f"k={MASK}" and llm_server.requests == 1


def test_known_values_masked_in_any_case_and_alone():
    """redaction.py: a value read from ${VAR} is masked in any case in messages; `mask_known` (what
    answers get) masks the known values and leaves other credential-like text, which is content."""
    assert redact_text(f"key {KEY.upper()} and {KEY.title()}", [KEY]) == f"key {MASK} and {MASK}"
    content = f"{KEY.swapcase()} password=hunter2 Bearer abcdefghijkl sk-{'a' * 24}"
    assert Redactor.knowing([KEY]).mask_known(content) == content.replace(KEY.swapcase(), MASK)


def test_close_stops_the_clients_thread(llm_server):
    before = {t for t in threading.enumerate() if t.name == "llm"}
    client = LLMClient(LLMConfig(base_url=llm_server.base_url, model="m"))
    replies = client.chat_many([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
    assert [r.text for r in replies] == ["echo: a", "echo: b"]
    assert len({t for t in threading.enumerate() if t.name == "llm"} - before) == 1
    client.close()
    assert {t for t in threading.enumerate() if t.name == "llm"} - before == set()
