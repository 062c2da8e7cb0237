"""What the model is asked for an instruction row: the instruction, then its `input` (when it has
one) after a blank line, as Self-Instruct and Alpaca pose instance inputs. `respond` sends this;
the preference and SFT files write the same text as the prompt, so a trainer sees what the
responses answered."""
from __future__ import annotations


def instruction_prompt(instruction: str, given: str | None) -> str:
    return f"{instruction}\n\n{given}" if given else instruction
