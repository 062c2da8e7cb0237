"""Self-Instruct (Wang et al. 2022, `bootstrap_instructions.py`): the in-context examples of one
prompt, the prompt, and the numbered list a model answers with.

Sampling as the reference: `examples` instructions per prompt (8), of which `generated` (2) drawn
from the instructions generated so far (when there are that many) and the rest from the human
seeds, shuffled. The reference continues a raw completion ("9."); chat models are asked for a
numbered list that starts at the next number instead (configs/prompts/self_instruct-<lang>.txt).
"""
from __future__ import annotations

import random
import re
from ylink_data.core.paths import CONFIGS
from pathlib import Path

PROMPTS = CONFIGS / "prompts"
PLACEHOLDERS = ("{examples}", "{count}", "{next}")
# "12. text", "12) text", "12、text" (Chinese), at the start of a line; Markdown bold numbers too.
_ITEM = re.compile(r"^\s*(?:\*\*)?(\d{1,3})(?:\*\*)?\s*[.)、．:：](?:\*\*)?\s*(.*)$")


def load_template(path: Path | str) -> str:
    try:
        template = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"prompt: cannot read {path}: {exc.strerror or exc}") from None
    missing = [p for p in PLACEHOLDERS if p not in template]
    if missing:
        raise ValueError(f"prompt: {path} lacks the placeholder(s) {', '.join(missing)}")
    return template


def sample_examples(rng: random.Random, seeds: list[int], generated: list[int], examples: int,
                    from_generated: int) -> list[int]:
    """Pool indices of one prompt's examples: up to `from_generated` generated, the rest seeds."""
    picked = rng.sample(generated, min(from_generated, len(generated)))
    picked += rng.sample(seeds, min(examples - len(picked), len(seeds)))
    rng.shuffle(picked)
    return picked


def build_prompt(template: str, instructions: list[str], count: int) -> str:
    listed = "\n".join(f"{k}. {' '.join(text.split())}" for k, text in enumerate(instructions, 1))
    return (template.replace("{examples}", listed).replace("{count}", str(count))
            .replace("{next}", str(len(instructions) + 1)))


def parse_list(text: str) -> list[str]:
    """The items of a numbered list, in order, whitespace collapsed; lines that continue an item
    are joined to it, text before the first number (a preamble) is ignored."""
    items: list[list[str]] = []
    for line in text.splitlines():
        m = _ITEM.match(line)
        if m:
            items.append([m.group(2)])
        elif items and line.strip():
            items[-1].append(line)
    out = []
    for parts in items:
        item = " ".join(" ".join(parts).split()).strip().strip("*").strip()
        out.append(item)
    return out
