# irbook: two entry points for a fresh machine with Python 3.11 and the package registries.
#   make book   install everything pinned, execute every notebook and build the course website
#   make test   install everything pinned and run the tests
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
SITE   := book/_build/html
# installed with --no-deps after requirements.txt: their declared dependencies would replace torch (fast-plaid) or pull
# in llama-index, faiss, onnx, nltk and more that the course never imports; what they do import is in requirements.txt
NODEPS := pylate==1.6.0 ragatouille==0.0.9.post2 colbert-ai==0.2.22 llama-index-core==0.14.25 banks==2.5.1

.PHONY: book test test-slow install site-check export lock clean page

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 is pinned inside requirements.txt, so one resolver run installs it with everything else.
$(VENV)/.installed: requirements.txt pyproject.toml Makefile tools/warm_numba.py | $(BIN)/python
	$(BIN)/pip install -r requirements.txt
	$(BIN)/pip install --no-deps $(NODEPS)
	$(BIN)/pip install --no-deps -e .
	# ranx compiles its numba code on first use in every fresh environment; do it once, here
	$(BIN)/python tools/warm_numba.py
	touch $@

install: $(VENV)/.installed

test: install
	# lint and layout first (pyflakes, pycodestyle, isort rules; 88 columns): seconds, not minutes
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# irbook's bytecode, written once here: the tests start the irbook command and other
	# Python processes ~170 times, and where PYTHONDONTWRITEBYTECODE is set each of them
	# compiled irbook's modules from source again (~80 ms of CPU apiece). compileall writes
	# whatever that variable says; a .pyc whose source has changed since is not used
	$(BIN)/python -m compileall -q irbook
	# two workers: one per core (pytest-xdist; worksteal: a worker left idle at the end takes
	# tests from the other's queue); tests marked slow are left to `make test-slow`
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n 2 --dist worksteal --durations=15 tests

# the training- and encoding-heavy tests (CI runs them after the book, whose cache they reuse,
# with SLOW="slow and not book": the book build has just executed those chapters in full)
SLOW ?= slow
test-slow: install
	$(BIN)/python -m compileall -q irbook
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n 2 --dist worksteal -m "$(SLOW)" --durations=15 tests

QUIET := HF_DATASETS_DISABLE_PROGRESS_BARS=1 HF_HUB_DISABLE_PROGRESS_BARS=1

book: install
	rm -rf book/_build
	# progress bars are for people running a notebook; the static site does not need them
	# (Hugging Face's datasets and hub draw their own bars: their switches turn them off).
	# Figures need the inline backend: an inherited MPLBACKEND (e.g. Agg, as CI sets for the tests) would drop every plot.
	# Every notebook is executed into jupyter-book's cache first (tools/execute_book.py: Part I and the reference
	# pages two at a time on one core each, the chapters of Parts II-IV in order), then jupyter-book renders the site.
	$(QUIET) TQDM_DISABLE=1 MPLBACKEND=module://matplotlib_inline.backend_inline PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python tools/execute_book.py book
	$(QUIET) TQDM_DISABLE=1 MPLBACKEND=module://matplotlib_inline.backend_inline PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter-book build -W --keep-going book
	@echo "site: $(SITE)/index.html"

# one chapter as its own small site, for checking a page while writing it: make page NB=13_full_text_search (or NB=api/metrics_io)
PAGE := $(or $(TMPDIR),/tmp)/irbook-page/$(NB)
page: install
	@test -n "$(NB)" -a -f "nbs/$(NB).ipynb" || { echo "usage: make page NB=<notebook stem in nbs/>"; exit 2; }
	rm -rf $(PAGE) && mkdir -p $(PAGE)
	cp book/_config.yml $(PAGE)/ && ln -s $(abspath book/_ext) $(PAGE)/_ext && ln -s $(abspath nbs) $(PAGE)/nbs
	printf 'format: jb-book\nroot: nbs/$(NB)\n' > $(PAGE)/_toc.yml
	$(QUIET) TQDM_DISABLE=1 MPLBACKEND=module://matplotlib_inline.backend_inline PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter-book build -W --keep-going $(PAGE)
	@echo "page: $(PAGE)/_build/html/nbs/$(NB).html"

# checks the built site (run after `make book`)
site-check: install
	IRBOOK_SITE=$(SITE) $(BIN)/python -m pytest tests/test_site.py

export: install
	$(BIN)/nbdev_export && $(BIN)/nbdev_clean

# regenerate the exact pins from the current environment (after adding a dependency to it)
lock: install
	{ echo "# Exact pins for the course (pip freeze of a working environment; regenerate with 'make lock')."; \
	  echo "# torch is pinned here so one resolver run installs it with everything else (an unpinned torch pulls a CUDA build)."; \
	  echo "# pylate, ragatouille, colbert-ai, llama-index-core and banks are not listed: the Makefile installs them after this file with --no-deps."; \
	  $(BIN)/pip freeze --exclude-editable | grep -v -i '^irbook\|^pylate==\|^ragatouille==\|^colbert-ai==\|^llama-index-core==\|^banks==' | sed 's/^torch==\(.*\)+cpu$$/torch==\1/'; } > requirements.txt

clean:
	rm -rf book/_build
