"""The files a run's ops read, by content: what the run's fingerprint holds of them.

Each op declares the files its parameters name (`Op.files_read`); here each is hashed
(`io.digest.content_digest`: the bytes, not the size or time), so that a model retrained, a benchmark
rewritten in place or a prompt edited between a stop and the resume is another configuration: a
finished run is not "already complete" for it, and an unfinished one is not resumed into a mix of
both versions. A file that is missing or cannot be read is one config error naming the op's key and
the path, found by `ylink validate` and before a run starts.

The digests the driver took travel to every worker (`expected_files`, in each task's spec), and
`checked_load` loads an op only once the files it reads are what the driver fingerprinted: their
digest (or, for a remote file, the content hash its store keeps) before, and nothing of them moved or
written (their stamps, `core.digest.local_state`) by the end of the op's loading (issue 39 point 3).
A file changed or swapped between the driver and a worker is one line, and the run stops before it
publishes anything: no run is read by two versions of a model, benchmark or list.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from ylink_data.engine.config import PipelineConfig
from ylink_data.core.errors import ConfigError, InputError
from ylink_data.core.digest import content_digest, file_version, local_state
from ylink_data.core.file_errors import file_problem
from ylink_data.core.redaction import redact_url
from ylink_data.ops import op_class

T = TypeVar("T")
# {config key: (content digest, the store's content hash or None)} of the files the run's ops read
Expected = dict[str, tuple[str, str | None]]


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


def expected_files(cfg: PipelineConfig, read: list[list[str]]) -> Expected:
    """What every worker checks the files the ops read against: the driver's digests (`files_read`)
    and, for a remote file, its store's content hash, which a worker can ask for without reading it."""
    urls = dict(op_files(cfg))
    return {key: (digest, file_version(urls[key], cfg.storage_options(urls[key]))) for key, _, digest in read}


def checked_load(cfg: PipelineConfig, stage: int, name: str, params: dict[str, Any], expected: Expected,
                 load: Callable[[], T]) -> T:
    """`load()` (build and set up the op of stage `stage`), between two checks of the files it reads:
    before, that each is what the driver fingerprinted; after, that none moved or changed meanwhile."""
    checks = []
    for key, url in op_class(name).files_read(params):
        full = f"stages[{stage}].{name}.{key}"
        if full not in expected:
            continue
        digest, version = expected[full]
        options = cfg.storage_options(url)
        state = local_state(url)
        now = file_version(url, options) if version is not None else content_digest(url, options)
        if now != (version or digest):
            raise _changed(full, url, "before this worker loaded it")
        checks.append((full, url, options, version, state))
    loaded = load()
    for full, url, options, version, state in checks:
        if (local_state(url) != state) if version is None else (file_version(url, options) != version):
            raise _changed(full, url, "while this worker loaded it")
    return loaded


def _changed(key: str, url: str, when: str) -> InputError:
    return InputError(f"{key}: {redact_url(url)} changed after the run fingerprinted it ({when}): the run stops so "
                      "that no part of it uses another version of the file than run.json names; run again once "
                      "the file stays put")


__all__ = ["op_files", "files_read", "expected_files", "checked_load"]
