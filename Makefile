# Every target creates .venv and installs on its own: two commands on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp

.PHONY: demo test lint bench soak clean azurite

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The peers compared by the benchmarks (pinned in the bench extra).
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# The demo needs only the core dependencies (and duckdb for its last query): no dev extra.
DEMO_STAMP := $(VENV)/.demo-stamp
$(DEMO_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e . duckdb
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m ckpt_archive.demo ./demo-archive
	@echo "The CLI is in the venv: .venv/bin/ckpt-archive threads --url ./demo-archive (or: .venv/bin/ckpt-archive --help)"

# Azurite (Azure blob emulator) for the Azure tests, installed project-locally; skipped without npm
# (the tests then skip the Azure backend, saying why).
AZURITE := .azurite/node_modules/.bin/azurite-blob
$(AZURITE):
	@if command -v npm >/dev/null; then \
		mkdir -p .azurite && cd .azurite && { test -f package.json || echo '{"name": "azurite-local", "private": true}' > package.json; } \
		&& npm install --no-audit --no-fund --silent azurite@3; \
	else echo "npm not found: Azure tests will be skipped"; fi

azurite: $(AZURITE)

# In parallel (pytest-xdist): one worker per core, each test file on one worker (loadfile: a module-scoped
# fixture, an archive built once or a graph run in a fresh process, is built once). `make test TEST_ARGS=`
# runs the suite in one process.
TEST_ARGS ?= -n auto --dist loadfile

test: $(STAMP) $(AZURITE)
	$(PY) -m pytest -q $(TEST_ARGS)

soak: $(STAMP) $(AZURITE)
	$(PY) -m pytest -q -m soak $(TEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check ckpt_archive tests benchmarks
	$(VENV)/bin/ruff format --check ckpt_archive tests benchmarks
	$(VENV)/bin/mypy

# Every benchmark script; tables and plots land in benchmarks/results/. BENCH_ARGS for bench_peers (e.g. --full).
# bench_postgres starts its own PostgreSQL server (apt-get install postgresql; skipped, saying so, without it).
bench: $(BENCH_STAMP)
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_save_cpu.py
	$(PY) benchmarks/bench_peers.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_rtt.py
	$(PY) benchmarks/bench_hint.py --steps 30 --latency-ms 20 --every 1,10 --idle 600
	$(PY) benchmarks/bench_graph.py
	$(PY) benchmarks/bench_langgraph.py
	$(PY) benchmarks/bench_turn.py
	$(PY) benchmarks/bench_postgres.py
	$(PY) benchmarks/bench_prune.py
	$(PY) benchmarks/bench_bytes.py
	$(PY) benchmarks/bench_cold_load.py
	PYTHONPATH=$$PWD $(PY) benchmarks/bench_history.py --cold-at 30,130,250
	PYTHONPATH=$$PWD $(PY) benchmarks/bench_durable.py
	$(PY) benchmarks/bench_blobs.py --langgraph --out benchmarks/results/blobs.json
	$(PY) benchmarks/perf_doc.py

clean:
	rm -rf $(VENV) .azurite demo-archive .pytest_cache .mypy_cache .hypothesis
