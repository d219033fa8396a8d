# irbook: two entry points for a fresh machine with Python 3.11 and the package registries.
#   make book   install everything pinned, execute every notebook and build the course website
#   make test   install everything pinned and run the tests
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
SITE   := book/_build/html

.PHONY: book test install site-check export clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 is pinned inside requirements.txt, so one resolver run installs it with everything else.
$(VENV)/.installed: requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install -r requirements.txt
	$(BIN)/pip install --no-deps -e .
	touch $@

install: $(VENV)/.installed

test: install
	$(BIN)/python -m pytest tests

book: install
	rm -rf book/_build
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter-book build -W --keep-going book
	@echo "site: $(SITE)/index.html"

# checks the built site (run after `make book`)
site-check: install
	IRBOOK_SITE=$(SITE) $(BIN)/python -m pytest tests/test_site.py

export: install
	$(BIN)/nbdev_export && $(BIN)/nbdev_clean

clean:
	rm -rf book/_build
