#!/usr/bin/env python3
"""Build the bundled chat sample ``samples/chat/`` from the Self-Instruct seed tasks.

The 175 seed tasks of yizhongw/self-instruct (Apache-2.0; human-written instructions, each with one
input/output instance; snapshotted under ``<repo>/../shared/data/instruction_seeds``) are written
in the three chat formats ylink reads, in task order:

* ``alpaca.jsonl``: tasks 0-59, one row each: ``{"id", "instruction", "input", "output"}``.
* ``messages.jsonl`` (OpenAI) and ``sharegpt.jsonl``: tasks 60-117 and 118-174, as multi-turn
  conversations of 2, 3, 4, 2, 3, 4... consecutive tasks: each task is one user turn (the
  instruction, and its input after a blank line when there is one) answered by its output. Every
  turn is real, written by the Self-Instruct authors; the conversations as wholes are assembled
  here (consecutive tasks are unrelated), since no permissively licensed multi-turn chat data was
  available. ``seed_ids`` names the tasks of each row.
* ``tokenizer.json``: a 2,000-token byte-level BPE trained on the sample's own text with the
  ChatML special tokens (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ``<|pad|>``), so that
  ``pipelines/sft.yaml`` runs without a model download. A toy: use your model's tokenizer.json.

Byte-for-byte reproducible. Usage::

    python samples/build_sample_chat.py [--shared DIR] [--out DIR]
"""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEEDS = "instruction_seeds/self_instruct/seed_tasks.jsonl"
TURNS = (2, 3, 4)  # exchanges per conversation, cycled
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]


def user_turn(task: dict) -> str:
    instance = task["instances"][0]
    return "\n\n".join(part for part in (task["instruction"], instance["input"]) if part.strip())


def conversations(tasks: list[dict]) -> list[list[dict]]:
    groups, at = [], 0
    for size in itertools.cycle(TURNS):
        if at >= len(tasks):
            return groups
        groups.append(tasks[at:at + size])
        at += size


def build(shared: Path, out: Path) -> None:
    tasks = [json.loads(line) for line in (shared / SEEDS).read_text(encoding="utf-8").splitlines()]
    assert len(tasks) == 175 and all(len(t["instances"]) == 1 for t in tasks)
    out.mkdir(parents=True, exist_ok=True)
    rows = {
        "alpaca.jsonl": [{"id": t["id"], "instruction": t["instruction"], "input": t["instances"][0]["input"],
                          "output": t["instances"][0]["output"]} for t in tasks[:60]],
        "messages.jsonl": [{"seed_ids": [t["id"] for t in group], "messages": [
            m for t in group for m in ({"role": "user", "content": user_turn(t)},
                                       {"role": "assistant", "content": t["instances"][0]["output"]})]}
            for group in conversations(tasks[60:118])],
        "sharegpt.jsonl": [{"seed_ids": [t["id"] for t in group], "conversations": [
            m for t in group for m in ({"from": "human", "value": user_turn(t)},
                                       {"from": "gpt", "value": t["instances"][0]["output"]})]}
            for group in conversations(tasks[118:])],
    }
    for name, lines in rows.items():
        (out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    texts = [part for t in tasks for part in (t["instruction"], t["instances"][0]["input"], t["instances"][0]["output"])]
    (out / "tokenizer.json").write_text(train_tokenizer(texts), encoding="utf-8")


def train_tokenizer(texts: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok.to_str()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "samples" / "chat")
    args = parser.parse_args()
    build(args.shared, args.out)
