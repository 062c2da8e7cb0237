"""Evol-Instruct (Xu et al. 2023, "WizardLM"): one evolution step of an instruction, in depth
(`constraints`, `deepen`, `concretise`, `reasoning`: a harder version of it) or in breadth (`breadth`:
a new, rarer instruction of the same domain), with the prompts of configs/prompts/evol_instruct-<lang>.txt.

An evolved instruction fails (the paper's elimination step 4, and ours) when it holds the prompt's
own labels ("#Rewritten Prompt#", "given prompt"...: the model copied the prompt), or when it is
the instruction it came from with nothing added (ROUGE-L F at `unchanged_above` or more). The
paper's other eliminations judge the response (a refusal, only punctuation), which `respond` and
`instruction_filter` do afterwards; its "no information gain" check asks a model, and is left out.
"""
from __future__ import annotations

import re
from ylink_data.core.paths import CONFIGS
from pathlib import Path

PROMPTS = CONFIGS / "prompts"
METHODS = ("constraints", "deepen", "concretise", "reasoning", "breadth")
# Labels a model must not copy into its answer: the paper's list, and the Chinese prompt's own.
COPIED = ("#given prompt#", "#rewritten prompt#", "#created prompt#", "given prompt", "rewritten prompt",
          "created prompt", "#给定提示#", "#改写后提示#", "#新提示#", "给定提示", "改写后提示")
# A label a model often starts its answer with anyway: removed, not counted against it.
# (No two quantifiers over spaces side by side: they would split a run of spaces every way.)
_LEADING_LABEL = re.compile(r"^\s*(?:(?:#\s*)?(?:rewritten|created) prompt(?:\s*#)?|#?(?:改写后提示|新提示)#?)\s*[:：]\s*", re.I)


_SECTION = re.compile(r"^=== (\w+) ===$", re.M)


def load_templates(lang: str, path: Path | str | None = None) -> dict:
    """The prompts of a file of `=== name ===` sections: `depth` (with {method}), `breadth`, and one
    sentence per depth method; text before the first section is a comment."""
    path = Path(path) if path else PROMPTS / f"evol_instruct-{lang}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"evol prompts: cannot read {path}: {exc.strerror or exc}") from None
    parts = _SECTION.split(text)
    sections = {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2])}
    missing = [k for k in ("depth", "breadth", *METHODS[:-1]) if k not in sections]
    if missing:
        raise ValueError(f"evol prompts: {path} has no section(s) {', '.join(f'=== {k} ===' for k in missing)}")
    for key in ("depth", "breadth"):
        if "{instruction}" not in sections[key]:
            raise ValueError(f"evol prompts: {path} section {key} has no {{instruction}} placeholder")
    return {"depth": sections["depth"], "breadth": sections["breadth"],
            "methods": {m: sections[m] for m in METHODS[:-1]}}


def build_prompt(templates: dict, method: str, instruction: str) -> str:
    if method == "breadth":
        return templates["breadth"].replace("{instruction}", instruction)
    return templates["depth"].replace("{method}", templates["methods"][method]).replace("{instruction}", instruction)


def clean(answer: str) -> str:
    """The evolved instruction of a model's answer: a leading "#Rewritten Prompt#:" label removed."""
    return _LEADING_LABEL.sub("", answer.strip()).strip()


def copies_prompt(text: str) -> bool:
    low = text.lower()
    return any(label in low for label in COPIED)
