# kiln developer targets. `make test` is the README's test command and what CI runs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0 is pinned here because the CPU build of that release is what the dev and CI
# machines install offline; any torch >= 2.4 works (see pyproject.toml).
TORCH ?= torch==2.13.0

.PHONY: setup browser sandbox test check demo clean

$(BIN)/kiln: pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[dev,ray,anthropic,profile]'
	touch $(BIN)/kiln

setup: $(BIN)/kiln sandbox

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
	$(BIN)/mypy tools

demo: setup
	$(BIN)/kiln run examples/softmax.py

clean:
	rm -rf $(VENV) runs
