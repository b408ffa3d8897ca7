# Two commands for a fresh machine (Python 3.11+):
#   make book   set up .venv, build the executed book from a clean tree -> _build/html/index.html
#   make test   set up .venv, run the whole test suite (unit tests, every chapter under nbval,
#               the book build with warnings as errors)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2

.PHONY: setup book test check bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

book: setup
	rm -rf _build
	$(VENV)/bin/jupyter-book build . --all --warningiserror --keep-going
	@echo "Book built: open _build/html/index.html"

test: setup
	$(PY) -m pytest -n $(JOBS) --dist loadscope --nbval-lax -p no:cacheprovider

check: setup
	$(PY) -m rcteach check

bench: setup
	$(PY) -m rcteach bench

clean:
	rm -rf _build .pytest_cache
