"""The hand-off to Megatron-LM, as getting-started.md and training.md give it (issue 42 point 5):
`ylink tokenizer train RUN --output FOLDER`, `ylink export megatron RUN --tokenizer FOLDER/tokenizer.json`,
then megatron-core 0.16 itself, on CPU: its tokenizer classes over FOLDER (`MegatronTokenizer.from_pretrained`,
and `HuggingFaceTokenizer`, what `--tokenizer-type HuggingFaceTokenizer --tokenizer-model FOLDER` builds)
know the end-of-document token, and its dataset builder (`BlendedMegatronDatasetBuilder` of `GPTDataset`
over `data-path.txt`) gives a first batch that decodes back to the run's Parquet text."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from .conftest import REPO, SAMPLES

SEQ_LEN = 2048
PIPELINE = """name: handoff
input:
  paths: [{inputs}]
output:
  path: run
stages:
  - extract: {{}}
  - langid: {{languages: [en, zh], min_score: 0.5}}
"""


def _ylink(work: Path, *args: str) -> str:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(work)}
    proc = subprocess.run([sys.executable, "-m", "ylink_data.cli", *args], cwd=work, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def handed_off(tmp_path_factory) -> Path:
    """A run of English and Chinese pages of the bundled crawl, a tokenizer folder trained on it and its
    Megatron files, made by the commands the pages show."""
    work = tmp_path_factory.mktemp("handoff")
    inputs = ", ".join(str(SAMPLES / f) for f in ("CC-MAIN-2020-34-excerpt.warc.gz", "CC-MAIN-2014-35-excerpt.warc",
                                                  "dolma-wget-sample-0001.warc.gz"))
    (work / "pipeline.yaml").write_text(PIPELINE.format(inputs=inputs))
    _ylink(work, "run", "pipeline.yaml", "--no-progress")
    _ylink(work, "tokenizer", "train", "run", "--vocab-size", "4096", "--output", "tokenizer", "--no-progress")
    _ylink(work, "export", "megatron", "run", "--tokenizer", "tokenizer/tokenizer.json", "--output", "megatron",
           "--no-progress")
    return work


def _megatron():
    with warnings.catch_warnings():  # megatron-core warns that Apex/Transformer Engine are absent (CPU)
        warnings.simplefilter("ignore")
        from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
        from megatron.core.tokenizers import MegatronTokenizer
        from megatron.core.tokenizers.text.libraries.huggingface_tokenizer import HuggingFaceTokenizer
    return BlendedMegatronDatasetBuilder, GPTDataset, GPTDatasetConfig, MegatronTokenizer, HuggingFaceTokenizer


def test_megatron_core_tokenizers_know_the_end_of_document_token(handed_off):
    *_, MegatronTokenizer, HuggingFaceTokenizer = _megatron()
    folder = str(handed_off / "tokenizer")
    recorded = json.loads((handed_off / "megatron" / "manifest.json").read_text())["megatron"]["tokenizer"]
    hf = HuggingFaceTokenizer(folder)  # what --tokenizer-type HuggingFaceTokenizer --tokenizer-model FOLDER makes
    assert hf.eos_id == hf.eod == recorded["eod_id"] == 0
    assert hf.pad_id == 1 and hf.vocab_size == recorded["vocab_size"]
    tok = MegatronTokenizer.from_pretrained(folder)  # its metadata file is in the folder: no arguments needed
    assert tok.eod == recorded["eod_id"] and tok.vocab_size == recorded["vocab_size"]
    text = "Common Crawl 的网页，tokenized the same way."
    from tokenizers import Tokenizer

    assert tok.tokenize(text) == Tokenizer.from_file(f"{folder}/tokenizer.json").encode(text).ids
    assert tok.detokenize(tok.tokenize(text)) == text


def _pieces(ids: list[int], eod: int) -> list[list[int]]:
    pieces, current = [], []
    for i in ids:
        if i == eod:
            pieces.append(current)
            current = []
        else:
            current.append(i)
    return [*pieces, current]


def test_gpt_dataset_first_batch_decodes_to_the_parquet_text(handed_off):
    import torch

    BlendedMegatronDatasetBuilder, GPTDataset, GPTDatasetConfig, MegatronTokenizer, _ = _megatron()
    tok = MegatronTokenizer.from_pretrained(str(handed_off / "tokenizer"))
    words = (handed_off / "megatron" / "megatron" / "data-path.txt").read_text().split()
    weights, prefixes = [float(w) for w in words[0::2]], words[1::2]
    assert all(os.path.isabs(p) and Path(p + ".bin").is_file() for p in prefixes)
    config = GPTDatasetConfig(random_seed=1234, sequence_length=SEQ_LEN, blend=(prefixes, weights), split="100,0,0",
                              tokenizer=tok, reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=True,
                              path_to_cache=None)
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [4, 0, 0], lambda: True, config).build()
    batch = next(iter(torch.utils.data.DataLoader(train, batch_size=4)))
    assert batch["tokens"].shape == (4, SEQ_LEN)

    texts = [t for f in sorted((handed_off / "run" / "data").glob("*.parquet"))
             for t in pq.read_table(f, columns=["text"]).column("text").to_pylist()]
    encoded = [tok.tokenize(t) for t in texts]
    whole = 0
    for row, labels, mask in zip(batch["tokens"].tolist(), batch["labels"].tolist(), batch["loss_mask"].tolist()):
        pieces = _pieces(row, tok.eod)
        for k, piece in enumerate(pieces):
            if 0 < k < len(pieces) - 1:  # between two end-of-document tokens: a whole document
                assert tok.detokenize(piece) in texts, f"a document of the batch is no Parquet row: {piece[:20]}"
                whole += 1
            elif k == 0 and len(pieces) > 1:  # the end of a document
                assert any(e[len(e) - len(piece):] == piece for e in encoded if len(e) >= len(piece))
            elif piece:  # the start of one (or a window inside one)
                assert any(piece == e[:len(piece)] or _inside(piece, e) for e in encoded)
        # Megatron's eod_mask_loss finds the documents' ends by the tokenizer's eod: no loss at them
        assert labels[:-1] == row[1:]
        assert [i for i, m in enumerate(mask) if m == 0] == [i for i, t in enumerate(row) if t == tok.eod]
    assert whole >= 1  # the batch holds at least one whole document, decoded to its Parquet text exactly


def _inside(piece: list[int], ids: list[int]) -> bool:
    n = len(piece)
    return any(ids[i:i + n] == piece for i in range(len(ids) - n + 1))
