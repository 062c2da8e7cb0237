"""Where the package's own files are: its folder, the data files ops read (`assets/`), and the
repository's presets and prompts (`configs/`). One place, so that moving a module moves nothing else.

A config names a file of the installed package as `package://PATH` (`package://assets/seeds/
self_instruct-en.jsonl`), PATH relative to the package folder: it is found from any working folder,
where a relative path would be looked for under the folder the command runs in."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
ASSETS = PACKAGE / "assets"
CONFIGS = PACKAGE.parent / "configs"
PACKAGE_URL = "package://"


def package_path(url: str | os.PathLike) -> str:
    """The local path of a `package://` URL inside the installed package; any other URL (or a
    `pathlib.Path`, which callers of the Python API pass) as a string, unchanged."""
    url = os.fspath(url)
    if url.startswith(PACKAGE_URL):
        return str(PACKAGE / url[len(PACKAGE_URL):])
    return url
