"""Conversations to training tokens: a Jinja2 chat template renders the messages to text, the
tokenizer encodes that text, and a loss mask marks the tokens the model learns from — the
assistant turns' content and end-of-turn token (1), nothing else (0).

Rendering follows transformers' `apply_chat_template`: a sandboxed environment
(`ImmutableSandboxedEnvironment`, trim_blocks and lstrip_blocks, the loopcontrols extension),
`raise_exception`, `tojson` and `strftime_now` available, the tokenizer's special tokens
(`bos_token`, `eos_token`, ...) and `add_generation_prompt` passed in. `{% generation %}` blocks
(transformers' assistant-mask markers) render their body. Ids are `Tokenizer.encode(text,
add_special_tokens=False).ids`: the template writes any BOS itself, as transformers tokenizes it.

The mask works for any template because it is found from the rendering itself: for each assistant
message i, the conversation up to i rendered with the generation prompt ends where the answer
starts, and the conversation up to and including i ends after its end-of-turn (the whitespace a
template writes after that, ChatML's newline, is not part of the answer). Both must be prefixes of
the whole rendering, which holds for every template that renders turns in order; one that rewrites
earlier turns (e.g. drops past reasoning) fails that check and the conversation is dropped with
reason `template_not_incremental`. Character spans map to tokens through the tokenizer's offsets: a
token is masked when it overlaps an answer's span (a token that merges a template's space with the
answer's first word belongs to the answer).
"""
from __future__ import annotations

import datetime
import functools
import json
from dataclasses import dataclass, field
from typing import Any

import jinja2
import numpy as np
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ylink_data.core.errors import InputError
from ylink_data.core.storage import filesystem
from ylink_data.core.redaction import redact_url
from ylink_data.text.tokens.chat import Malformed
from ylink_data.core.paths import ASSETS

DEFAULT_TEMPLATE = ASSETS / "chat_templates" / "chatml.jinja"


class _Generation(Extension):
    """`{% generation %}...{% endgeneration %}`: transformers marks assistant text with it for its
    own masks; here the body is just rendered (the mask comes from the rendering, see above)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def _raise_exception(message: str):
    raise jinja2.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=16)
def compile_template(text: str) -> jinja2.Template:
    """The template compiled as transformers compiles chat templates; a syntax error is an InputError."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)  # as transformers does
    try:
        return env.from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(f"chat template does not parse: {exc.message} (line {exc.lineno})") from None


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template with the variables every rendering gets (the tokenizer's special tokens)."""

    text: str
    source: str
    variables: dict[str, Any] = field(default_factory=dict)

    def render(self, messages: list[dict[str, str]], add_generation_prompt: bool = False) -> str:
        return compile_template(self.text).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                  **self.variables)


def load_chat_template(chat_template: str | None = None, tokenizer_config: str | None = None,
                       storage_options: dict | None = None, special_tokens: dict[str, str] | None = None) -> ChatTemplate:
    """The template given inline, or the `chat_template` of a Hugging Face `tokenizer_config.json`
    (path or fsspec URL; a named-template list takes "default"; no key: the `chat_template.jinja`
    beside it, where newer transformers save it), else the bundled ChatML. Special tokens come from
    the config (`bos_token`, `eos_token`, ...), then `special_tokens` override them."""
    if chat_template is not None and tokenizer_config is not None:
        raise InputError("give chat_template or tokenizer_config, not both")
    variables: dict[str, Any] = {}
    if tokenizer_config is not None:
        config = json.loads(_read_text(tokenizer_config, storage_options, "tokenizer_config"))
        if not isinstance(config, dict):
            raise InputError(f"tokenizer_config {redact_url(tokenizer_config)} is not a JSON object")
        variables = {k: _token_text(v) for k, v in config.items()
                     if k.endswith("_token") and _token_text(v) is not None}
        text, source = _config_template(config, tokenizer_config, storage_options), tokenizer_config
    elif chat_template is not None:
        text, source = chat_template, "chat_template"
    else:
        text, source = DEFAULT_TEMPLATE.read_text(encoding="utf-8"), "chatml (bundled)"
    compile_template(text)
    variables.update(special_tokens or {})
    return ChatTemplate(text, redact_url(source), variables)


def _config_template(config: dict, url: str, storage_options: dict | None) -> str:
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if template is None:
        sibling = url.rsplit("/", 1)[0] + "/chat_template.jinja" if "/" in url else "chat_template.jinja"
        try:
            return _read_text(sibling, storage_options, "chat_template.jinja")
        except InputError:
            raise InputError(f"tokenizer_config {redact_url(url)} has no chat_template (nor a chat_template.jinja "
                             f"beside it); give chat_template: in the op") from None
    if not isinstance(template, str):
        raise InputError(f"tokenizer_config {redact_url(url)}: chat_template is a {type(template).__name__}, not text")
    return template


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_text(url: str, storage_options: dict | None, what: str) -> str:
    try:
        fs, path = filesystem(url, storage_options or {})
        return bytes(fs.cat_file(path)).decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {redact_url(url)} does not exist") from None
    except Exception as exc:  # noqa: BLE001 -- fsspec backends raise their own types
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"cannot read {what} {redact_url(url)}: {type(exc).__name__}: {first}") from None


def render_with_spans(template: ChatTemplate, messages: list[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
    """(the rendered conversation, the character span [start, end) of each assistant answer: its
    content and end-of-turn). Raises Malformed("template_not_incremental") when a prefix of the
    conversation does not render to a prefix of the whole (see the module docstring)."""
    text = template.render(messages)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = template.render(messages[:i], add_generation_prompt=True)
        through = template.render(messages[:i + 1]).rstrip()
        if not (text.startswith(before) and text.startswith(through) and len(through) > len(before)):
            raise Malformed("template_not_incremental",
                            f"rendering message {i} alone does not give a prefix of the whole conversation")
        spans.append((len(before), len(through)))
    return text, spans


def span_mask(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> np.ndarray:
    """1 for each token whose character range overlaps a span, else 0 (uint8)."""
    mask = np.zeros(len(offsets), dtype=np.uint8)
    if not offsets:
        return mask
    bounds = np.asarray(offsets, dtype=np.int64)
    for start, end in spans:
        mask[(bounds[:, 0] < end) & (bounds[:, 1] > start)] = 1
    return mask


def encode_rendered(tokenizer, rendered: list[tuple[str, list[tuple[int, int]]]]) -> list[tuple[list[int], np.ndarray]]:
    """(ids, loss mask) per rendered conversation, encoded in one batch (the tokenizers library's
    threads) with offsets; ids are `encode(text, add_special_tokens=False).ids`."""
    encodings = tokenizer.encode_batch([text for text, _ in rendered], add_special_tokens=False) if rendered else []
    return [(e.ids, span_mask(e.offsets, spans)) for e, (_, spans) in zip(encodings, rendered)]
