# Two commands for a fresh machine (Python 3.11+):
#   make book   set up .venv, build the executed book from a clean tree -> _build/html/index.html
#   make test   set up .venv, run the whole test suite (unit tests, every chapter under nbval,
#               the book build with warnings as errors)
#   make vendor  (run by `make book` and the book test) fetch MathJax 3, RequireJS and the widget
#               embedder from the npm registry into vendor/ (git-ignored): the built HTML serves
#               them itself, so it works with no network.  Needs npm.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2

# Front-end files the static book serves itself (see _config.yml: html_static_path, mathjax_path,
# nb_ipywidgets_js).  Not `_static/`: Jupyter Book 1 would add every .js there to every page.
VENDOR       := vendor
NPM_PACKAGES := mathjax@3.2.2 requirejs@2.3.8 @jupyter-widgets/html-manager@1.0.15

.PHONY: setup setup-assign vendor book test check bench clean assignments

setup: $(VENV)/.installed $(VENV)/.configured

# The optional extra for the otter-grader course assignments (assignments/, tests/test_assignments.py).
setup-assign: $(VENV)/.assign-installed

$(VENV)/.assign-installed: $(VENV)/.installed requirements-assign.txt
	$(PY) -m pip install --quiet -r requirements-assign.txt
	touch $@

# Student notebooks and autograder zips of the three assignments -> _build/assignments/<name>/
assignments: setup-assign
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m rcteach assign -o _build/assignments

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# Settings copied into the venv (venv-config/ mirrors its layout): JupyterLab opens .md chapters as
# notebooks on double-click (share/jupyter/lab/settings/overrides.json: the Jupytext Notebook
# viewer) and does not mark them modified on opening (etc/jupyter/jupyter_server_config.py), and
# kernels draw inline figures at retina resolution (etc/ipython/ipython_kernel_config.json), in
# JupyterLab and in the book build alike.
$(VENV)/.configured: $(VENV)/.installed $(shell find venv-config -type f)
	cp -R venv-config/. $(VENV)/
	touch $@

vendor: $(VENDOR)/.installed

$(VENDOR)/.installed: Makefile
	rm -rf $(VENDOR)
	npm install --silent --no-audit --no-fund --ignore-scripts --prefix $(VENDOR)/npm $(NPM_PACKAGES)
	mkdir -p $(VENDOR)/static/js $(VENDOR)/static/mathjax
	cp $(VENDOR)/npm/node_modules/requirejs/require.js $(VENDOR)/static/js/
	cp $(VENDOR)/npm/node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js \
	   $(VENDOR)/npm/node_modules/@jupyter-widgets/html-manager/dist/*.woff* \
	   $(VENDOR)/npm/node_modules/@jupyter-widgets/html-manager/dist/*.ttf $(VENDOR)/static/js/
	cd $(VENDOR)/npm/node_modules/mathjax/es5 && cp -r tex-mml-chtml.js input output ui a11y adaptors sre \
	   ../../../../static/mathjax/
	touch $@

book: setup vendor
	rm -rf _build
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(VENV)/bin/jupyter-book build . --all --warningiserror --keep-going
	@echo "Book built: open _build/html/index.html"

# Each of the $(JOBS) workers (and the kernels it starts) gets one BLAS/OpenMP thread: with
# more, dense eigensolvers on 2 cores slow down many times over.
test: setup setup-assign
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS) --dist loadscope --nbval-lax -p no:cacheprovider

check: setup
	$(PY) -m rcteach check

bench: setup
	$(PY) -m rcteach bench

clean:
	rm -rf _build .pytest_cache $(VENDOR)
