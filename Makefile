# Two commands for a fresh machine (Python 3.11+):
#   make book   set up .venv, build the executed book from a clean tree -> _build/html/index.html
#   make test   set up .venv, lint (ruff), run the whole test suite (unit tests, docstring examples,
#               the book build, which executes every chapter, with warnings as errors)
#   make pdf    the whole book as one PDF, _build/pdf/book.pdf (after the HTML build; scripts/book_pdf.py)
#   make chapters  every chapter under nbval, one test per chapter
#   make vendor  (run by `make book` and the book test) fetch MathJax 3, RequireJS and the widget
#               embedder from the npm registry into vendor/ (git-ignored): the built HTML serves
#               them itself, so it works with no network.  Needs npm (from the system package
#               manager, e.g. `sudo apt-get install npm`); without npm an existing complete vendor/
#               is kept.  The new vendor/ is built aside and swapped in only once complete.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# pip byte-compiles what it installs (about 100 s of the setup's 200 s of CPU).  Not skipped: the grading
# sandbox mounts the venv read-only, so a sandboxed process would compile every module it imports again
# (a CI rehearsal with --no-compile took 25.6 min against 23, its grading fixtures twice as slow), and
# compiling afterwards on both cores (compileall -j 0) costs as much wall as pip's serial compile.
PIP    := $(PY) -m pip install --quiet
JOBS   ?= 2

# Front-end files the static book serves itself (see _config.yml: html_static_path, mathjax_path,
# nb_ipywidgets_js).  Not `_static/`: Jupyter Book 1 would add every .js there to every page.
VENDOR       := vendor
NPM_PACKAGES := mathjax@3.2.2 requirejs@2.3.8 @jupyter-widgets/html-manager@1.0.15

.PHONY: setup setup-assign setup-cluster vendor book pdf test chapters check bench clean assignments

setup: $(VENV)/.installed $(VENV)/.configured

# The optional extra for the otter-grader course assignments (assignments/, tests/test_assignments.py).
setup-assign: $(VENV)/.assign-installed

$(VENV)/.assign-installed: $(VENV)/.installed requirements-assign.txt
	$(PIP) -r requirements-assign.txt
	touch $@

# The optional extra for dask sweeps (rcteach.sweep.executor_from, tests/test_grid_sweep.py).
setup-cluster: $(VENV)/.cluster-installed

$(VENV)/.cluster-installed: $(VENV)/.installed requirements-cluster.txt
	$(PIP) -r requirements-cluster.txt
	touch $@

# Student notebooks and autograder zips of the three assignments -> _build/assignments/<name>/
assignments: setup-assign
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m rcteach assign -o _build/assignments

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -r requirements.txt
	touch $@

# Settings copied into the venv (venv-config/ mirrors its layout): JupyterLab opens .md chapters as
# notebooks on double-click (share/jupyter/lab/settings/overrides.json: the Jupytext Notebook
# viewer) and does not mark them modified on opening (etc/jupyter/jupyter_server_config.py), and
# kernels draw inline figures at retina resolution (etc/ipython/ipython_kernel_config.json), in
# JupyterLab and in the book build alike.
$(VENV)/.configured: $(VENV)/.installed $(shell find venv-config -type f)
	cp -R venv-config/. $(VENV)/
	touch $@

# The files the book serves from vendor/static (checked again at build time by book/_ext/offline_html.py).
VENDOR_FILES := $(addprefix $(VENDOR)/static/,js/require.js js/embed-amd.js mathjax/tex-mml-chtml.js)
NPM_HINT := npm is not installed. It fetches MathJax, RequireJS and the widget embedder that the offline \
  book serves itself. Install it with the system package manager (Debian/Ubuntu: sudo apt-get install npm; \
  Fedora: sudo dnf install nodejs-npm; macOS: brew install node), then run make again.

vendor: $(VENDOR)/.installed

# Built in .vendor.new and swapped in only when complete: a failed or interrupted download never
# removes a working vendor/.  Without npm, a complete vendor/ is kept (with a note), else it stops.
$(VENDOR)/.installed: Makefile
	@if ! command -v npm >/dev/null 2>&1; then \
	  if ls $(VENDOR_FILES) >/dev/null 2>&1; then \
	    echo "make vendor: note: $(NPM_HINT) Keeping the existing, complete $(VENDOR)/." >&2; exit 0; \
	  fi; \
	  echo "make vendor: error: $(NPM_HINT)" >&2; \
	  for f in $(VENDOR_FILES); do [ -e "$$f" ] || echo "  missing: $$f" >&2; done; \
	  exit 1; \
	fi; \
	set -e; new=.vendor.new; rm -rf $$new; \
	npm install --silent --no-audit --no-fund --ignore-scripts --prefix $$new/npm $(NPM_PACKAGES); \
	mkdir -p $$new/static/js $$new/static/mathjax; \
	cp $$new/npm/node_modules/requirejs/require.js $$new/static/js/; \
	cp $$new/npm/node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js \
	   $$new/npm/node_modules/@jupyter-widgets/html-manager/dist/*.woff* \
	   $$new/npm/node_modules/@jupyter-widgets/html-manager/dist/*.ttf $$new/static/js/; \
	(cd $$new/npm/node_modules/mathjax/es5 && cp -r tex-mml-chtml.js input output ui a11y adaptors sre \
	   ../../../../static/mathjax/); \
	touch $$new/.installed; \
	rm -rf .vendor.old; if [ -e $(VENDOR) ]; then mv $(VENDOR) .vendor.old; fi; \
	mv $$new $(VENDOR); rm -rf .vendor.old

book: vendor setup
	rm -rf _build
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) scripts/build_book.py . --all --warningiserror --keep-going
	@echo "Book built: open _build/html/index.html"

# The whole book as one PDF, _build/pdf/book.pdf: the HTML build's chapters (built first if there is
# none) in one page by the singlehtml builder, which executes nothing again, printed by chromium.
pdf: setup
	@[ -e _build/.doctrees/environment.pickle ] || $(MAKE) book
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) scripts/book_pdf.py

# First the linter (ruff, < 1 s; pyproject.toml: [tool.ruff]), then the tests.  Each of the $(JOBS)
# workers (and the kernels it starts) gets one BLAS/OpenMP thread: with more, dense eigensolvers on
# 2 cores slow down many times over.
# --no-loadscope-reorder keeps the collection order (conftest.py puts the book module first; xdist
# would otherwise start the modules with most tests first, and the book build last).
# The chapters run once, in the book build (execution with raise_on_error: a cell that fails fails
# the build, naming its chapter); `make chapters` runs them one by one under nbval instead.
test: setup setup-assign setup-cluster
	$(VENV)/bin/ruff check rcteach tests conftest.py book/_ext scripts
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS) --dist loadscope --no-loadscope-reorder -p no:cacheprovider --durations=30

# Every chapter under nbval, each a test of its own (cells assert what they compute).
chapters: setup
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS) --nbval-lax -p no:cacheprovider book

check: setup
	$(PY) -m rcteach check

bench: setup
	$(PY) -m rcteach bench

clean:
	rm -rf _build .pytest_cache $(VENDOR) .vendor.new .vendor.old
