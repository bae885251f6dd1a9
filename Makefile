# The only entry point. The README's two commands are `make book` and `make test`;
# both create .venv when it is missing (or when requirements.txt / pyproject.toml changed).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Front-end packages (plotly.js, onnxruntime-web and @huggingface/tokenizers for chapter 09's
# live box, axe-core for the tests) from npm, pinned in
# package-lock.json; the build copies what pages need into _build/html/_static/vendor/.
NODE_STAMP := node_modules/.installed
BUILD  := _build
PORT   ?= 8000

# Nothing may reach a model hub; pages and tests run on the CPU, deterministically.
# (No MPLBACKEND here: pages rely on the kernel's inline backend for glued figures.)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONHASHSEED := 0

# The execution cache keys on each page's code, not on the library it imports, so a change in
# lib/ would leave stale outputs. We hash lib/ (its code and the quiz's .css and .js) and clear
# the cache (and Sphinx's doctrees, so unchanged pages are re-read) whenever that hash differs
# from the last successful build's.
LIB_HASH = $$(find lib \( -name '*.py' -o -name '*.css' -o -name '*.js' \) -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)

# The stage table make test ends with (standard library only: it also times the venv's creation).
STAGE  = $(PYTHON) tests/support/stages.py
# Two pytest workers on two cores, whose OpenMP threads wait without spinning (README.md,
# "Tests", says why).
PYTEST = env OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder

.PHONY: help venv learner-env node book runs sweep test test-fast test-js lint notebooks serve clean print-lib-hash bench bench-library bench-book bench-weights bench-live bench-mqar

help:
	@echo "make book       build the book into _build/html (creates .venv if needed)"
	@echo "make test       lint, library tests, zero-warning book build, built-HTML and browser tests"
	@echo "make test-js    the browser code's pure parts under node --test (make test runs it)"
	@echo "make runs       build the book, then execute the page runs the tests read, two at a time"
	@echo "make test-fast  lint and the library tests only: no book build, no browser, no slow runs"
	@echo "make sweep      the full seed sweep: every trained page under seeds 1 to 4 (after changing"
	@echo "                one, or the library it trains with; make test runs one seed per configuration)"
	@echo "make notebooks  build the book, then write every page as a Jupyter notebook into notebooks/"
	@echo "make serve      serve _build/html on http://localhost:$(PORT)"
	@echo "make bench      library, book and live-box measurements below, about 6 minutes (tables in benchmarks/results/)"
	@echo "make bench-library  the library against PyTorch/transformers: medians and ratios"
	@echo "make bench-book     cold, no-change and one-page-changed builds; each page's run time;"
	@echo "                    each chapter's words of prose (after make book)"
	@echo "make bench-weights  compressed bytes each built page downloads (first visit, next page)"
	@echo "make bench-live     chapter 09's live attention box in Chromium: download, first map, per sentence"
	@echo "make bench-mqar     chapter 22's five models on MQAR at widths 16, 32, 64, seeds 0-2: recall,"
	@echo "                    parameters, state sizes; about 5.5 minutes (not in make bench)"
	@echo "make clean      remove _build/ and notebooks/ (keeps .venv)"

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-compile -r requirements.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps -e .
	@# Byte-compiled on every core (pip compiles one file at a time: about 80 s of CPU here).
	@# As pip does, files that do not compile are passed over (torch ships Python 3.12 syntax
	@# in its test helpers), so compileall's exit status is not read.
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true
	@touch $(STAMP)

node: $(NODE_STAMP)

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm not found: the book needs Node.js 18+ and npm (e.g. apt-get install nodejs npm) to install the front-end packages in package.json"; exit 1; }
	npm ci --no-audit --no-fund --ignore-scripts
	@touch $(NODE_STAMP)

book: $(STAMP) $(NODE_STAMP)
	@mkdir -p $(BUILD)
	@hash=$(LIB_HASH); if [ "$$(cat $(BUILD)/.lib-hash 2>/dev/null)" != "$$hash" ]; then \
	  echo "lib/ changed since the last build: clearing the execution cache so every page re-runs"; \
	  rm -rf $(BUILD)/.jupyter_cache $(BUILD)/.doctrees; fi; \
	$(BIN)/jupyter-book build . -n -W --keep-going && echo "$$hash" > $(BUILD)/.lib-hash

print-lib-hash:
	@echo $(LIB_HASH)

lint: $(STAMP) $(NODE_STAMP)
	$(BIN)/ruff check lib tests book/_ext benchmarks
	$(BIN)/ruff format --check lib tests book/_ext benchmarks
	npx --no-install eslint book/_static tests/js

# The browser code's pure parts (book/_static/live/), unit-tested under Node's own runner.
test-js: $(NODE_STAMP)
	node --test tests/js/

# The learner's environment (requirements-learn.txt alone), cached in ~/.cache/attention-lab/ by
# its hash: make test builds it beside .venv (pip installs on one core each, so two at once take
# the time of one); tests/runs/test_learner_environment.py reads it.
learner-env:
	$(PYTHON) tests/support/learner_env.py

# Every page run the tests read (learners' notebooks, portability run, seed sweep, the rerun of
# the book's seed; tests/support/runs.py declares them), executed two at a time into
# _build/runs/, keyed by their inputs, so each is executed once and no test executes a page.
runs: book
	$(BIN)/python tests/support/runs.py

# The full seed sweep (tests/support/runs.py, `sweep`): each trained page under seeds 1 to 4, the
# foreign configurations and the build's, where `make test` runs one seed per foreign
# configuration. Run it after changing a trained page or the library it trains with; the margins
# the pages state are measured over it. Its runs are stored beside the others.
sweep: book
	ATTENTION_LAB_SWEEP=full $(BIN)/python tests/support/runs.py
	ATTENTION_LAB_SWEEP=full $(PYTEST) tests/runs/test_seed_sweep.py

# Each stage timed (tests/support/stages.py; the browser stage also lists its 15 slowest tests,
# its largest cost after the page runs), its tests on both cores (pytest-xdist; a test
# module's tests on one worker, so module fixtures such as a browser are shared: conftest.py);
# the table at the end.
# The book is built with zero warnings, or it fails.
test:
	@$(STAGE) reset
	@$(STAGE) run "venv, learner env beside it" -- $(MAKE) --no-print-directory -j2 venv learner-env
	@$(STAGE) run "npm ci" -- $(MAKE) --no-print-directory node
	@$(STAGE) run "lint" -- $(MAKE) --no-print-directory lint
	@$(STAGE) run "node tests" -- $(MAKE) --no-print-directory test-js
	@$(STAGE) run "build (pages executed 2 at a time)" -- $(MAKE) --no-print-directory book
	@$(STAGE) run "page runs for the tests" -- $(MAKE) --no-print-directory runs
	@$(STAGE) run "library and page-source tests" -- \
	  $(PYTEST) -m "not book and not browser and not slow"
	@$(STAGE) run "built site, learners' notebooks" -- \
	  $(PYTEST) -m "book and not browser and not slow"
	@$(STAGE) run "portability run, seed sweep" -- \
	  $(PYTEST) tests/runs/test_portability.py tests/runs/test_seed_sweep.py
	@$(STAGE) run "learner environment" -- $(PYTEST) tests/runs/test_learner_environment.py
	@$(STAGE) run "browser" -- $(PYTEST) -m "browser" --durations=15
	@$(STAGE) table

# An author's shortcut while changing lib/ or tests/: lint and the tests that need neither the
# built book nor Chromium nor the slow runs (markers in pyproject.toml). `make test` runs them all.
test-fast: lint test-js
	$(PYTEST) -m "not book and not browser and not slow"

# The learners' notebooks need the build's numbers (figures, equations, glued values), so the
# book is built first; labs become workbooks that stop at the stub
# (book/_ext/attention_book/notebook_converter.py). NOTEBOOKS_DIR=dir writes elsewhere. The built
# book ships the same notebooks in _notebooks/.
notebooks: book
	@PYTHONPATH=book/_ext$${PYTHONPATH:+:$$PYTHONPATH} $(BIN)/python -m attention_book.notebook_converter "$${NOTEBOOKS_DIR:-notebooks}"

# Measured comparisons: median times over interleaved runs, as ratios to the reference; then
# the book's own build times (in a temporary copy, so _build/ is untouched).
bench: bench-library bench-book bench-live

bench-library: $(STAMP)
	$(BIN)/python benchmarks/library.py

bench-book: book $(NODE_STAMP)
	$(BIN)/python benchmarks/book.py
	$(BIN)/python benchmarks/word_counts.py

# Chapter 09's live attention box in headless Chromium: the click's download, the time to the
# first map, the time per sentence of 16 and 64 tokens (needs `make book`).
bench-live: book
	PYTHONPATH=tests$${PYTHONPATH:+:$$PYTHONPATH} $(BIN)/python benchmarks/live_attention.py

# Compressed bytes each built page downloads, first visit and next page (needs `make book`).
bench-weights: $(STAMP)
	PYTHONPATH=tests$${PYTHONPATH:+:$$PYTHONPATH} $(BIN)/python benchmarks/page_weights.py

# Chapter 22's five models on MQAR at widths 16, 32 and 64 over seeds 0-2: recall (mean and
# range), parameters, each layer's state or K/V cache size. Not in `make bench`: about 5.5
# minutes alone (2026-12-04, one thread, 2 loaded cores), nearly `make bench`'s time again.
bench-mqar: $(STAMP)
	$(BIN)/python benchmarks/mqar.py

serve:
	@test -d $(BUILD)/html || { echo "no _build/html yet: run 'make book' first"; exit 1; }
	@echo "serving _build/html on http://localhost:$(PORT) (Ctrl-C stops)"
	$(BIN)/python -m http.server $(PORT) --bind 127.0.0.1 --directory $(BUILD)/html

clean:
	rm -rf $(BUILD) notebooks .pytest_cache .hypothesis
