"""Tokenizers (`load`, `train`), token ids as Arrow columns (`encode`), chat templates (`chat`), SFT
examples as token ids (`sft`) and packing (`pack`)."""
