"""qa_generate: grounded question-answer pairs written by a model, `pairs` per chunk.

Each chunk (a row, usually from `chunk`) is sent to the pipeline's model (`llm:`, through
ylink_data/io/llm/: bounded concurrency, retries, response cache, usage counted in stats.json) with the
prompt of its language: `configs/prompts/qa_generate-zh.txt` for Chinese (the row's `lang`, else its
script, text/transform/script.py), `-en.txt` for every other language (it asks for the text's own
language); `prompt:` names another file of the same form. The answer is asked for as JSON,
`{"pairs": [{"question", "answer"}]}`, and checked (pydantic).

Each pair becomes one row (fan-out, ids `<chunk id>#<k>`): `question`, `answer`, `context` (the
chunk's text), `chunk_id`, and `answer_support`, the share of the answer's content found in the
chunk (text/transform/grounding.py); `text` is the question and answer, and `source`, `url`, `lang` and
`metadata` (page range, heading path) are the chunk's. A pair whose support is under
`min_support` is dropped as `qa_generate:unsupported` (kept in rejected/ with its support); a
chunk whose answer holds no pair is dropped as `qa_generate:none`, an empty chunk as `empty`.
An answer that is not JSON, not of that shape, or that cannot be stored (io/llm/answer.py: a lone
surrogate, a 5,000-digit number, JSON nested thousands deep) quarantines the chunk with the reason
and the raw answer (its first RAW_CHARS characters), reason `unusable_response`; a cached one does
again on a rerun, never stopping it. So does a request that failed after `llm.max_retries`
(reason `timeout` when the server never answered in time). The run goes on either way.
Rows that are question-answer pairs already (qa_extract's, `unmatched: keep`) pass through as they
are, so one pipeline keeps the pairs documents hold and asks the model about the rest.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NamedTuple

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ylink_data.io.llm.answer import Unparseable, Unusable, json_answer, read
from ylink_data.io.llm.config import LLMOverride
from ylink_data.ops.llm_op import LLMOp
from ylink_data.text.transform import grounding
from ylink_data.text.transform.script import is_unspaced, script_counts, script_languages
from ylink_data.ops import register
from ylink_data.ops.base import BatchResult, Fraction, fan_out, named_files, pair_rows
from ylink_data.core.paths import CONFIGS

PROMPTS = CONFIGS / "prompts"
SCRIPT_HEAD_CHARS = 1000  # a chunk without `lang` goes by the script of its first characters
COLUMNS = {"question": pa.string(), "answer": pa.string(), "context": pa.large_string(), "chunk_id": pa.string(),
           "answer_support": pa.float64()}


class Pair(NamedTuple):
    """A question-answer pair of a model's answer (a tuple: io/llm/answer.py checks it storable)."""

    question: str
    answer: str


class _Pair(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)


class _Pairs(BaseModel):
    model_config = ConfigDict(extra="ignore")
    pairs: list[_Pair]


def parse_pairs(text: str) -> list[Pair]:
    """The pairs of a model's answer: JSON `{"pairs": [...]}` (a bare list of pairs too, and inside a
    ```json fence, as models often write it); Unparseable says why not."""
    data = json_answer(text)
    if isinstance(data, list):
        data = {"pairs": data}
    try:
        return [Pair(p.question.strip(), p.answer.strip()) for p in _Pairs.model_validate(data).pairs]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise Unparseable(f'not {{"pairs": [{{"question", "answer"}}]}}: {where}: {first["msg"]}') from None


def load_prompt(path: Path | str, placeholders: dict[str, str] | None = None) -> str:
    """A prompt template read now (a missing file is a config error before any request is paid
    for), with each of `placeholders` ({name: what goes there}; qa_generate's chunk by default)."""
    try:
        template = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"prompt: cannot read {path}: {exc.strerror or exc}") from None
    for name, what in (placeholders or {"text": "the chunk"}).items():
        if "{" + name + "}" not in template:
            raise ValueError(f"prompt: {path} has no {{{name}}} placeholder (where {what} goes)")
    return template


@register
class QAGenerate(LLMOp):
    """`pairs` question-answer pairs per chunk from the pipeline's model; see the module docstring.
    `min_support` 0.5 (ours): answers copied or closely paraphrased from their chunk score 0.8-1.0,
    the made-up answers of tests/test_qa_generate.py under 0.2. `json_mode` asks the server for JSON
    (`response_format: json_object`, which vLLM, SGLang, llama.cpp, Ollama and OpenAI accept); turn it
    off for a server that refuses it."""

    name = "qa_generate"

    @classmethod
    def files_read(cls, params: dict) -> list[tuple[str, str]]:
        return named_files("prompt", params.get("prompt"))

    @classmethod
    def columns_read(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return []

    @classmethod
    def columns_added(cls, params: dict[str, Any]) -> dict[str, pa.DataType]:
        return dict(COLUMNS)

    def __init__(self, pairs: Annotated[int, Field(ge=1, le=50)] = 3, prompt: str | None = None,
                 min_support: Fraction = 0.5, json_mode: bool = True, llm: LLMOverride | None = None):
        self.pairs, self.min_support, self.json_mode = pairs, min_support, json_mode
        self.prompt = prompt
        self.llm = llm.model_dump() if isinstance(llm, LLMOverride) else llm
        # Read now: a missing file or placeholder is a config error, before any request is paid for.
        self.templates = ({"en": load_prompt(prompt), "zh": load_prompt(prompt)} if prompt else
                          {lang: load_prompt(PROMPTS / f"qa_generate-{lang}.txt") for lang in ("en", "zh")})

    def _messages(self, text: str, lang: str) -> list[dict[str, str]]:
        prompt = self.templates[lang].replace("{pairs}", str(self.pairs)).replace("{text}", text)
        return [{"role": "user", "content": prompt}]

    def process(self, table: pa.Table) -> BatchResult:
        texts = table.column("text").to_pylist()
        ids = table.column("id").to_pylist()
        langs = prompt_languages(texts, table.column("lang").to_pylist() if "lang" in table.column_names else None)
        pairs_already = pair_rows(table)  # qa_extract's pairs pass through (pipelines/fileqa.yaml)
        asked = [i for i, t in enumerate(texts) if t and t.strip() and not pairs_already[i]]
        request = {"response_format": {"type": "json_object"}} if self.json_mode else {}
        replies = self.client.chat_many([self._messages(texts[i], langs[i]) for i in asked], **request)
        answers = dict(zip(asked, replies))
        children: list[list[dict] | None] = []
        dropped: list[str | None] = []
        errors: list[str | None] = []
        counts = {"pairs_asked": self.pairs * len(asked), "unparseable": 0}

        def keep_row(reason: str | None = None, error: str | None = None) -> None:
            children.append(None)
            dropped.append(reason)
            errors.append(error)

        for i, text in enumerate(texts):
            reply = answers.get(i)
            if pairs_already[i]:
                keep_row()
                continue
            if reply is None:
                keep_row(reason=f"{self.name}:empty")
                continue
            if reply.error is not None:
                keep_row(error=reply.error)
                continue
            pairs = read(reply, parse_pairs)
            if isinstance(pairs, Unusable):
                counts["unparseable"] += 1
                keep_row(error=pairs.error)
                continue
            if not pairs:
                keep_row(reason=f"{self.name}:none")
                continue
            rows = []
            for pair in pairs:
                score = grounding.support(pair.answer, text)
                rows.append({"text": f"{pair.question}\n{pair.answer}", "question": pair.question,
                             "answer": pair.answer, "context": text, "chunk_id": ids[i],
                             "answer_support": round(score, 4)})
                dropped.append(None if score >= self.min_support else f"{self.name}:unsupported")
                errors.append(None)
            children.append(rows)
        out, parents = fan_out(table, children, COLUMNS)
        counters = {k: v for k, v in counts.items() if v} | self.client.usage.take()
        return BatchResult(out, dropped=dropped, errors=errors if any(errors) else None, counters=counters,
                           parents=parents)


def prompt_languages(texts: list[str | None], langs: list[str | None] | None) -> list[str]:
    """`zh` for Chinese chunks (their `lang`, else their script), `en` (the default prompt) for the rest."""
    out = []
    unknown = []
    for i, text in enumerate(texts):
        lang = langs[i] if langs else None
        if lang:
            out.append("zh" if is_unspaced(lang) and not lang.lower().startswith(("ja", "jpn")) else "en")
        else:
            out.append("en")
            unknown.append(i)
    if unknown:
        counts = script_counts([(texts[i] or "")[:SCRIPT_HEAD_CHARS] for i in unknown])
        for i, lang in zip(unknown, script_languages(counts)[0]):
            if lang == "zh":
                out[i] = "zh"
    return out
