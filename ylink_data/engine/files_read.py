"""The files a run's ops read, by content: what the run's fingerprint holds of them.

Each op declares the files its parameters name (`Op.files_read`); here each is hashed
(`io.digest.content_digest`: the bytes, not the size or time), so that a model retrained, a benchmark
rewritten in place or a prompt edited between a stop and the resume is another configuration: a
finished run is not "already complete" for it, and an unfinished one is not resumed into a mix of
both versions. A file that is missing or cannot be read is one config error naming the op's key and
the path, found by `ylink validate` and before a run starts.
"""
from __future__ import annotations

from ylink_data.engine.config import PipelineConfig
from ylink_data.core.errors import ConfigError
from ylink_data.core.digest import content_digest
from ylink_data.core.file_errors import file_problem
from ylink_data.core.redaction import redact_url
from ylink_data.ops import op_class


def op_files(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """(config key, path or URL) of every file the ops read, in stage order: `stages[2].tokenize.tokenizer`."""
    return [(f"stages[{i}].{name}.{key}", url)
            for i, (name, params) in enumerate(cfg.ops) for key, url in op_class(name).files_read(params)]


def files_read(cfg: PipelineConfig) -> list[list[str]]:
    """[config key, path or URL without credentials, content digest] of every file the ops read."""
    out, problems = [], []
    for key, url in op_files(cfg):
        shown = redact_url(url)
        try:
            out.append([key, shown, content_digest(url, cfg.storage_options(url))])
        except Exception as exc:  # noqa: BLE001 -- fsspec backends raise their own types; one line each
            problems.append(f"{key}: {file_problem(exc, url, 'give the path or URL of an existing file', shown)}")
    if problems:
        raise ConfigError(problems)
    return out


__all__ = ["op_files", "files_read"]
