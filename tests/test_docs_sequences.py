"""A command sequence a guide page shows runs as shown, back to back, in one folder (the FileQA pair
once failed on its second command, a model run into the first run's folder, unless --fresh was added).
The commands are taken from the page; the page's model server address is replaced by the test
server's (tests/llmserver.py)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from .conftest import REPO
from .llmserver import LLMServer
from .test_docs_recipes import _workdir

PAGE_SERVER = "http://127.0.0.1:8000/v1"


def _block_after(page: str, heading: str) -> str:
    text = (REPO / page).read_text()
    found = re.search(rf"^## {re.escape(heading)}\n.*?^```bash\n(.*?)^```", text, re.M | re.S)
    assert found, f"{page}: no bash block under '## {heading}'"
    return found.group(1)


def test_the_fileqa_commands_run_back_to_back(tmp_path):
    commands = _block_after("docs/guide/sft-and-fileqa.md", "FileQA: documents to question–answer pairs")
    assert commands.count("ylink run") == 2 and PAGE_SERVER in commands
    work = _workdir(tmp_path)
    env = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
           "NO_COLOR": "1"}
    with LLMServer() as server:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", commands.replace(PAGE_SERVER, server.base_url)],
                              cwd=work, env=env, capture_output=True, text=True, timeout=600)
        asked = server.requests
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert asked > 0  # the second command did use the model
