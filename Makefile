# rmqspec — two entry points: `make check` (the main job) and `make test`.
# Both create .venv on first use and install what they need.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HYPOTHESIS_PROFILE ?= ci
export HYPOTHESIS_PROFILE

.PHONY: check test interop lint bench clean venv java chromium realrmq-deps

check: $(STAMP) java
	$(BIN)/rmqspec check

# The tests run in PYTEST_WORKERS processes (pytest-xdist; tests/conftest.py puts the Spark tests
# on one of them), each measured by pytest-cov, which combines their coverage data.
PYTEST_WORKERS ?= auto

test: $(STAMP) java chromium lint
	$(BIN)/coverage erase
	$(BIN)/python -m pytest --ignore=tests/interop -n $(PYTEST_WORKERS) --dist loadgroup --cov --cov-report=
	$(BIN)/coverage report --skip-empty
	@echo "coverage of model/, impl/, properties/ (must stay above 90%):"
	$(BIN)/coverage report --skip-empty --include='model/*,impl/*,properties/*' --fail-under=90 | tail -n 1

# Tests against real Apache RocketMQ 4.9.8 (../shared/realrmq): Java, root (network namespaces) and the
# Debian jar packages its install-deps.sh installs. Not part of `make test` (a fresh clone has no ../shared).
REALRMQ ?= $(abspath ../shared/realrmq)
export REALRMQ

interop: $(STAMP) java realrmq-deps
	$(BIN)/python -m pytest tests/interop -p no:randomly

realrmq-deps:
	@test -d "$(REALRMQ)" || { echo "make interop needs $(REALRMQ) (real RocketMQ 4.9.8 fixture)" >&2; exit 2; }
	@bash "$(REALRMQ)/install-deps.sh"

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP) java
	$(BIN)/python -m bench

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "rmqspec needs Python 3.11+; set PYTHON=python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

java:
	@scripts/ensure-java.sh

# The report test renders report.html in real headless Chromium.
chromium:
	@scripts/ensure-chromium.sh

clean:
	rm -rf $(VENV) build *.egg-info .coverage htmlcov .pytest_cache .hypothesis
