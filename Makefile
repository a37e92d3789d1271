# kiln developer targets. `make test` is the README's test command and what CI runs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0 is pinned here because the CPU build of that release is what the dev and CI
# machines install offline; any torch >= 2.4 works (see pyproject.toml).
TORCH ?= torch==2.13.0

# What the tests need beyond the main job: test tools, the dashboard, RL and model-mode libraries,
# Ray, Anthropic, the profiler's report reader (pyproject.toml's extras).
TEST_EXTRAS ?= dev,ray,anthropic,profile

.PHONY: setup browser sandbox test check demo clean

# The main job: kiln and its base dependencies only (`make demo`).
$(BIN)/kiln: pyproject.toml setup.py
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "kiln needs Python >= 3.11 (PY=python3.11 make ...)")'
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q $(TORCH) -e .
	touch $(BIN)/kiln

# Everything else the tests use, on top of the main job's install.
$(VENV)/.test-extras: $(BIN)/kiln
	$(BIN)/pip install -q -e '.[$(TEST_EXTRAS)]'
	touch $@

setup: $(VENV)/.test-extras sandbox

# The HTML report and `kiln ui` are tested in a real headless Chromium (Debian's package); the UI's tests
# drive it through Playwright (pip, in the dev extra), never through Playwright's own browser download.
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# The OS sandbox's outer layer for LLM-written code (Debian's package; kiln doctor shows the level).
sandbox:
	@command -v bwrap >/dev/null || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }

test: setup browser sandbox
	$(BIN)/ruff check kiln tools agents graphs evals rewards tests
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25 \
	  -m 'not gpu and not live_llm and not serial'
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q --durations=10 -m 'not gpu and not live_llm and serial'

check: setup
	$(BIN)/ruff check kiln tools agents graphs evals rewards tests
	$(BIN)/mypy kiln tools agents graphs evals rewards

demo: $(BIN)/kiln
	$(BIN)/kiln run examples/softmax.py

clean:
	rm -rf $(VENV) runs
