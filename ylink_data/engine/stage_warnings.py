"""Pipelines that run but most likely do not do what was meant: one line each, printed by `ylink
validate` and at the start of a run, never errors (a pipeline may mean it).

- A text filter (an op that `reads_text`: gopher, c4, fineweb, badwords, langid...) on HTML-bearing
  input (WARC, ARC, .html files) with no op that `makes_text` (extract) before it: it measures markup
  (the FineWeb preset on raw WARC kept 0 of 182 pages).
- An op pinned to one language's units (`language: en` or `zh`, as the presets in configs/filters/
  are) after a `langid` that keeps other languages: those are measured in the wrong units and mostly
  dropped (`language: en` counts a Chinese page as a few long "words").
"""
from __future__ import annotations

from ylink_data.engine.config import PipelineConfig
from ylink_data.io.listing import InputFile
from ylink_data.io.readers import split_extension
from ylink_data.io.readers.registry import reader_for
from ylink_data.ops import op_class


def stage_warnings(cfg: PipelineConfig, files: list[InputFile]) -> list[str]:
    return _text_filters_on_html(cfg, files) + _pinned_language_after_langid(cfg)


def _text_filters_on_html(cfg: PipelineConfig, files: list[InputFile]) -> list[str]:
    formats = {cfg.input.format} if cfg.input.format != "auto" else \
        {split_extension(f.url)[0] for f in files if not f.run_shard}
    html = sorted(f for f in formats if f is not None and reader_for(f).holds_html)
    if not html:
        return []
    for i, (name, _) in enumerate(cfg.ops):
        if op_class(name).makes_text:
            return []
        if op_class(name).reads_text:
            return [f"warning: {name} (stage {i + 1}) reads plain text, but the input is {'/'.join(html)} (HTML) and no "
                    f"`extract` comes before it: it would measure markup; add `- extract: {{}}` before it"]
    return []


def _pinned_language_after_langid(cfg: PipelineConfig) -> list[str]:
    """One line per (langid, pinned language): the ops pinned to that language after it."""
    pinned: dict[tuple[int, str], list[str]] = {}
    others_of: dict[tuple[int, str], str] = {}
    kept: frozenset[str] | None = None  # None: a langid keeping every language
    langid_at = None
    for i, (name, params) in enumerate(cfg.ops):
        if name == "langid":
            kept = frozenset(params["languages"]) if params.get("languages") is not None else None
            langid_at = i
            continue
        language = params.get("language")
        if langid_at is None or language not in ("en", "zh") or "language" not in _parameters(name):
            continue
        # `en` units (space-separated words) suit every language but Chinese; `zh` units only Chinese.
        others = None if kept is None else (kept - {language} if language == "zh" else kept & {"zh"})
        if others is None or others:
            pinned.setdefault((langid_at, language), []).append(f"{name} (stage {i + 1})")
            others_of[(langid_at, language)] = "every language" if others is None else ", ".join(sorted(others))
    return [f"warning: {', '.join(ops)} measure{'s' if len(ops) == 1 else ''} every document as {language} "
            f"(language: {language}), but langid (stage {at + 1}) keeps {others_of[(at, language)]} too: those "
            f"would be measured in {language} units and mostly dropped; use language: auto (each document by "
            f"its lang), or keep only {language} in langid.languages"
            for (at, language), ops in pinned.items()]


def _parameters(name: str) -> set[str]:
    import inspect

    return set(inspect.signature(op_class(name).__init__).parameters)
