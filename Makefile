# Every target does its own set-up: a fresh clone needs nothing but python3.
PY      ?= python3
VENV    ?= .venv
BIN      = $(VENV)/bin
STAMP    = $(VENV)/.installed

.PHONY: demo test checks bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,bench]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sparseopt demo

test: $(STAMP)
	$(BIN)/python -m pytest

checks: $(STAMP)
	$(BIN)/python -m theory_checks

bench: $(STAMP)
	$(BIN)/python benchmarks/prox.py

clean:
	rm -rf $(VENV) runs .pytest_cache
