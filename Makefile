# The README's two commands: `make run` and `make test`. Both set up what they need.
PYTHON_SYS ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
# What `make run` needs besides the venv: a JRE for Spark (any java on PATH will do).
DEBS_RUN   := openjdk-17-jre-headless
# Debian packages the test suite needs (installed when absent; CI runs as root).
DEBS_TEST  := openjdk-17-jre-headless redis-server redis-tools nats-server shellcheck chromium telnet tmux nftables curl

.PHONY: run test lint typecheck unit bench fuzz deps debs dist clean

$(STAMP): pyproject.toml setup.py $(wildcard raims_node/*/*.c)
	test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

deps: $(STAMP)

debs:
	@scripts/ensure_debs.sh $(DEBS_TEST)

lint: deps
	$(VENV)/bin/ruff check raims_node spark_app notebooks tests bench

typecheck: deps
	$(VENV)/bin/mypy

unit: deps debs
	$(PY) -m pytest

test: lint typecheck unit

bench: deps
	@set -e; for b in bench/*_bench.py; do echo "== $$b"; $(PY) $$b; done

fuzz: deps
	$(PY) bench/fuzz.py

run: deps
	@command -v java >/dev/null 2>&1 || scripts/ensure_debs.sh $(DEBS_RUN)
	$(PY) spark_app/raims_rollout.py

dist: deps
	scripts/make_dist.sh dist

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
