# rmqspec — two entry points: `make check` (the main job) and `make test`.
# Both create .venv on first use and install what they need.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HYPOTHESIS_PROFILE ?= ci
export HYPOTHESIS_PROFILE

.PHONY: check test interop lint bench clean venv java chromium interop-deps

check: $(STAMP) java
	$(BIN)/rmqspec check

# The tests run in PYTEST_WORKERS processes (pytest-xdist; tests/conftest.py puts the Spark tests
# on one of them), each measured by pytest-cov, which combines their coverage data.
PYTEST_WORKERS ?= auto

test: $(STAMP) java chromium lint
	$(BIN)/coverage erase
	$(BIN)/python -m pytest --ignore=tests/interop -n $(PYTEST_WORKERS) --dist loadgroup --cov --cov-report= --durations=20
	$(BIN)/coverage report --skip-empty
	@echo "coverage of model/, impl/, properties/ (must stay above 90%):"
	$(BIN)/coverage report --skip-empty --include='model/*,impl/*,properties/*' --fail-under=90 | tail -n 1

# Tests against real Apache RocketMQ, from its official release jars on Maven Central (interop/pom.xml,
# resolved by scripts/real-rocketmq into build/rocketmq), with the Java 4.9.8 and Go v2 clients. Root
# (network namespaces), a JDK, Maven and Go. Tiers (INTEROP): quick = the 4.9.8 tier; 5x = the 5.x tier
# (5.3.3 and 5.5.1: $(INTEROP_5X_ONLY), the 5.3.3 runs of the modules marked ALSO_ON_5X, the wall-clock
# conformance of both; tests/interop/conftest.py); full (the default) = both in one session. CI runs
# quick, then 5x (.ci/run), each within its time budget. rust = rocketmq-rust's conformance report as
# regression checks (docs/conformance/rocketmq-rust.md), against it and real 5.3.3; not in CI: its first
# run builds rocketmq-rust from the Rust crate registry (cargo, about 11 min on 2 cores, cached after).
# Two passes, each with the modules side by side
# in pytest-xdist processes (--dist loadscope: a module's tests and fixtures stay on one): first the
# modules that wait on brokers and wall-clock deadlines (INTEROP_WORKERS of them), then the ones marked
# cpu_heavy (crash states, the Spark cluster, the store differentials), which would make the first
# pass's timings late. Both passes run; make fails if either failed (a tier without cpu_heavy
# modules is no failure).
INTEROP ?= full
INTEROP_WORKERS ?= 3
INTEROP_PYTEST = INTEROP=$(INTEROP) $(BIN)/python -m pytest tests/interop -p no:randomly -v --durations=15 \
  --dist loadscope $(if $(filter quick,$(INTEROP)),$(addprefix --ignore=,$(INTEROP_5X_ONLY)))
INTEROP_5X_ONLY := tests/interop/test_rocketmq5.py tests/interop/test_store_v5.py tests/interop/test_timer_real.py tests/interop/test_serve_java_pop.py

interop: $(STAMP) java interop-deps
	@case "$(INTEROP)" in quick|5x|full|rust) ;; *) echo "INTEROP must be quick, 5x, full or rust"; exit 2;; esac
	$(if $(filter rust,$(INTEROP)),scripts/real-rocketmq resolve --version rust-1.0.0)
	scripts/real-rocketmq resolve --version 4.9.8
	$(if $(filter quick,$(INTEROP)),,scripts/real-rocketmq resolve --version 5.3.3)
	$(if $(filter quick rust,$(INTEROP)),,scripts/real-rocketmq resolve --version 5.5.1)
	status=0; \
	$(INTEROP_PYTEST) -n $(INTEROP_WORKERS) -m "not cpu_heavy" || status=$$?; \
	$(INTEROP_PYTEST) -n 2 -m cpu_heavy || { rc=$$?; [ $$rc -eq 5 ] || status=$$rc; }; \
	exit $$status

interop-deps:
	@scripts/ensure-interop.sh

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
