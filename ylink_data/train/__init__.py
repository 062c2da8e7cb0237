"""Training commands over files and runs: a fastText quality classifier (`quality`: `ylink quality
train`, a flow's `quality_train` step) and a BPE tokenizer (`tokenizer`: `ylink tokenizer train`).
They read their examples through the io layer; the learning itself is `text/quality` and `text/tokens`."""
