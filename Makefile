# Two entry points a new machine needs: `make demo` and `make test`.
# Both create .venv and install the project (with its dev tools) on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install demo test lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
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

clean:
	rm -rf $(VENV) .temporal .pytest_cache .mypy_cache .ruff_cache
