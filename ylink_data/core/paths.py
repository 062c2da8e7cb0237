"""Where the package's own files are: its folder, the data files ops read (`assets/`), and the
repository's presets and prompts (`configs/`). One place, so that moving a module moves nothing else."""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
ASSETS = PACKAGE / "assets"
CONFIGS = PACKAGE.parent / "configs"
