# Two entry points a new machine needs: `make demo` and `make test`.
# Both create .venv and install the project (with its dev tools) on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The package's directories: one changes when a module is added, removed or renamed, which the
# editable install must learn (its "strict" mode links each file, so type checkers follow it).
PACKAGE_DIRS := $(shell find temporal_workflows -type d -not -name __pycache__ 2>/dev/null)
EDITABLE := --config-settings editable_mode=strict

.PHONY: install demo test lint wheel-check clean

$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' $(EDITABLE)
	touch $@

$(VENV)/.installed: $(VENV)/.deps $(PACKAGE_DIRS)
	$(PY) -m pip install -q --no-deps -e . $(EDITABLE)
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m examples.demo

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check temporal_workflows activities bench tests examples worker.py
	$(VENV)/bin/ruff format --check temporal_workflows activities bench tests examples worker.py
	$(VENV)/bin/mypy temporal_workflows activities bench

# Build the wheel, install it in a fresh virtualenv (no checkout on the path) and use it as a
# user would: import, an in-process run, the console script. See tests/wheel_check.py.
wheel-check: install
	$(PY) tests/wheel_check.py

clean:
	rm -rf $(VENV) .temporal .pytest_cache .mypy_cache .ruff_cache build dist
