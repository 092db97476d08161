# The two commands of the README's quick start, and the pieces they are made of.
.PHONY: install install-dev pipeline serve test bench

VENV ?= .venv
export VENV
BIN := $(VENV)/bin
# dvc.yaml's commands run `python`: the environment's, not whatever else is on PATH
export PATH := $(abspath $(BIN)):$(PATH)

install:
	scripts/install.sh

install-dev:
	scripts/install.sh dev

# Install, then run the whole DAG on the bundled sample (or whatever params.yaml says); end on
# the report's headline table and where the report is.
pipeline: install
	$(BIN)/gpt1 dag
	$(BIN)/dvc repro
	@cat reports/headline.txt
	@echo "report: $(CURDIR)/reports/index.html (markdown: $(CURDIR)/reports/summary.md)"

# Serve the Prefect deployments (full-pipeline, finetune, predict, sweep: docs/prefect.md).
serve: install
	$(BIN)/python -m flows.serve

# Install with the dev tools, lint, then the whole test suite.
test: install-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# Every benchmark, one after another (they measure the machine: run nothing else meanwhile);
# tables print and land in bench/results/<name>.json. The full sizes need ../shared/data.
BENCHES := train_step preprocess memory finetune finetune_transformers generate tokenizer loader corpus predict dag
bench: install-dev
	for b in $(BENCHES); do $(BIN)/python -m bench.$$b || exit 1; done
