"""The fenced blocks of the documentation's pages (README.md and docs/), and running them as a reader
would: tests/test_docs_recipes.py runs the recipes, each in an empty folder of its own;
tests/test_docs_commands.py runs every command block of the other pages, in order, in one folder
laid out as a clone.

A block's marker is an HTML comment on the line before it (invisible on the site and on GitHub):

    <!-- recipe: run -->                    run this bash or python block (it fails on a non-zero exit);
                                            every bash block of a page that is no recipe runs unmarked
    <!-- recipe: file=NAME -->              write this block to NAME (a pipeline YAML, say)
    <!-- recipe: run needs=duckdb -->       run it only where the module is installed (else skipped, said)
    <!-- recipe: run requires=input.paths_from -->  run it once the config key exists (else skipped, said)
    <!-- recipe: not run: REASON -->        a bash block the tests cannot run (a cluster, a training job):
                                            the reason is printed with the test's result
    <!-- recipe: output -->                 (a plain block) what the block run before it prints: its lines
                                            must appear in the output in this order, `...` matching any text
    <!-- recipe: mirror URL=REPO_FILE -->   (anywhere on the page) serve REPO_FILE at URL's path from the
                                            test HTTP server (tests/httpserver.py) and write that server's
                                            address for URL's scheme and host in every block: the page shows
                                            the real URL, the test reads the bundled copy.

A page whose blocks name the model server `http://127.0.0.1:8000/v1` (the address the guides show)
runs them against tests/llmserver.py at that place.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .conftest import REPO
from .httpserver import FileServer
from .llmserver import LLMServer

MARKER = re.compile(r"^\s*<!-- recipe: (.*?) -->\s*$")
FENCE = re.compile(r"^(\s*)```(\w+)?\s*$")  # a block in a list item is indented
PAGE_SERVER = "http://127.0.0.1:8000/v1"
NOT_RUN = "not run:"


@dataclass
class Block:
    lang: str
    code: str
    line: int
    options: dict[str, str] = field(default_factory=dict)
    marked: bool = False


def parse(page: Path) -> tuple[list[Block], list[tuple[str, str]]]:
    """Every fenced block of a page, with its marker's options, and the page's mirrors (URL, file)."""
    lines = page.read_text().splitlines()
    blocks, mirrors = [], []
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        if marker and marker.group(1).startswith("mirror "):
            url, _, local = marker.group(1)[len("mirror "):].partition("=")
            mirrors.append((url.strip(), local.strip()))
        fence = FENCE.match(lines[i])
        if fence:
            end = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "```")
            indent = len(fence.group(1))
            before = MARKER.match(lines[i - 1]) if i else None
            options: dict[str, str] = {}
            if before and before.group(1).startswith(NOT_RUN):
                options = {"not run": before.group(1)[len(NOT_RUN):].strip()}
            elif before:
                options = dict(o.partition("=")[::2] for o in before.group(1).split())
            code = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
            blocks.append(Block(fence.group(2) or "", code, i + 1, options, marked=before is not None))
            i = end
        i += 1
    return blocks, mirrors


def skip_reason(block: Block) -> str | None:
    module = block.options.get("needs")
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    key = block.options.get("requires")
    if key:
        from ylink_data.engine.config import PipelineConfig

        model = PipelineConfig
        for part in key.split("."):
            fields = getattr(model, "model_fields", {})
            if part not in fields:
                return f"the config has no {key} yet (the block runs once it exists)"
            model = fields[part].annotation
    return None


def block_env(home: Path, path: list[str] | None = None) -> dict[str, str]:
    return {"PATH": ":".join([*(path or []), str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
            "PYTHONPATH": str(REPO), "HOME": str(home), "HF_HOME": str(home / "hf"), "HF_DATASETS_OFFLINE": "1",
            "NO_COLOR": "1", **{k: v for k, v in os.environ.items() if k.startswith("YLINK_SHARED")}}


def matches_output(expected: str, output: str) -> str | None:
    """None when every line of `expected` appears in `output`'s lines in that order (`...` in a line
    matches any text), else the first line that does not."""
    got = [line.rstrip() for line in output.splitlines()]
    at = 0
    for line in (x.rstrip() for x in expected.splitlines()):
        if not line:
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in line.split("...")) + "$")
        found = next((k for k in range(at, len(got)) if pattern.match(got[k])), None)
        if found is None:
            return line
        at = found + 1
    return None


def run_blocks(page: Path, work: Path, env: dict[str, str], run_unmarked: bool) -> list[str]:
    """Run a page's blocks in `work`, in order: the marked ones, and with `run_unmarked` every bash
    block without a marker; compare quoted outputs. Returns what was not run and why."""
    blocks, mirrors = parse(page)
    where_page = page.relative_to(REPO) if page.is_relative_to(REPO) else page.name
    skipped: list[str] = []
    served = work.parent / f"served-{page.stem}"
    for url, local in mirrors:
        target = served / urlsplit(url).path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / local, target)
    served.mkdir(parents=True, exist_ok=True)
    uses_model = any(PAGE_SERVER in b.code for b in blocks)
    last_output: str | None = None
    with FileServer(served) as files, (LLMServer() if uses_model else _Nothing()) as model:
        base = files.url("").rstrip("/")
        for block in blocks:
            where = f"{where_page}:{block.line}"
            code = block.code
            for url, _ in mirrors:
                parts = urlsplit(url)
                code = code.replace(f"{parts.scheme}://{parts.netloc}", base)
            if uses_model:
                code = code.replace(PAGE_SERVER, model.base_url)
            if "file" in block.options:
                (work / block.options["file"]).write_text(code)
                continue
            if "output" in block.options:
                assert last_output is not None, f"{where}: an output block with no block run before it"
                missing = matches_output(code, last_output)
                assert missing is None, f"{where}: the page quotes {missing!r}, not in the output:\n{last_output[-3000:]}"
                continue
            if "not run" in block.options:
                assert block.options["not run"], f"{where}: `not run:` without a reason"
                skipped.append(f"{where}: {block.options['not run']}")
                continue
            runs = "run" in block.options or (run_unmarked and block.lang == "bash" and not block.marked)
            if not runs:
                continue
            reason = skip_reason(block)
            if reason:
                skipped.append(f"{where}: {reason}")
                continue
            if block.lang == "bash":
                argv = ["bash", "-euo", "pipefail", "-c", code]
            elif block.lang == "python":
                argv = [sys.executable, "-c", code]
            else:
                raise AssertionError(f"{where}: a run marker on a {block.lang or 'plain'} block (bash or python only)")
            proc = subprocess.run(argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=900)
            last_output = proc.stdout
            assert proc.returncode == 0, f"{where} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}"
    return skipped


class _Nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> None:
        return None
