"""Synthetic instruction data: Self-Instruct prompts and parsing (self_instruct), Evol-Instruct
prompts (evol), the heuristic checks both share (heuristics), refusal phrases (refusals)."""
