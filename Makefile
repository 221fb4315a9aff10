# spoolproxy developer tasks. Every target creates .venv with python3.12 when it is missing.
PYTHON ?= python3.12
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test demo demo-trace bench bench-quick clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# one worker per core, whole test files per worker (module fixtures start once); TEST_ARGS adds options
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadfile $(TEST_ARGS)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

demo-trace: $(STAMP)
	$(BIN)/python examples/trace_fix.py

bench: $(STAMP)
	$(BIN)/python -m bench

bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) build *.egg-info
