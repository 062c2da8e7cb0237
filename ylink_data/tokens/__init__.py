"""Training formats: tokenizers (`load`, `train`), token ids as Arrow columns (`encode`), Megatron-LM's
indexed dataset files (`indexed`) and what is built from them."""
