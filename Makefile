# Two commands do all the set-up: `make course` runs the course, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BROWSER_STAMP := $(VENV)/.installed-browser
# The GPU runner's stack: its newest constraints file pins what the runner has (torch, torchvision, numpy); the course
# is installed with those pins kept (pip moves a venv made for another stack onto them) and then checked against them.
GPU_CONSTRAINTS := $(lastword $(sort $(wildcard constraints/gpu-runner-*.txt)))
GPU_STAMP := $(VENV)/.installed-gpu
PROFILE ?= auto
CELL_TIMEOUT ?= 600
LIMIT ?=  # seconds each notebook may run under `make course` (empty: the profile's notebook_limit_s)
CHROMIUM ?= /usr/bin/chromium
STACK ?=  # make test-versions STACK=colab (or gpu-runner, lower-bounds): one stack; empty: all three
# The course runs from this checkout: `pip install` installs only the library (as `feeding_the_gpu`), so every command
# here, the notebook kernels it starts and their subprocesses import `helpers` and `helpers.course` from this folder.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
# JupyterLab refuses to start as root unless told; containers often run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: course test test-gpu gpu-rehearsal test-lab test-colab test-versions lab env sync-notebooks clean lint

course: $(STAMP)  ## prepare data, execute every notebook in the auto profile, write reports/
	$(BIN)/python -m helpers.course.runner --profile $(PROFILE) $(if $(strip $(LIMIT)),--limit $(LIMIT))

test: $(STAMP)  ## unit tests of helpers + the examples in helpers' docstrings (doctests) + nbval over every notebook in the smoke profile, offline
	COURSE_PROFILE=smoke COURSE_OFFLINE=1 $(BIN)/python -m pytest tests notebooks helpers --doctest-modules \
		--nbval-lax --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT) -p no:cacheprovider

lint: $(STAMP)  ## ruff (the lint rules and the format) over the tree, and mypy over helpers/ ([tool.ruff], [tool.mypy])
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test-lab: $(BROWSER_STAMP)  ## JupyterLab in headless Chromium: Run All on notebooks 00 and 04; screenshots in reports/
	COURSE_LAB_TEST=1 COURSE_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest tests/lab -p no:cacheprovider

test-colab: $(STAMP)  ## Colab's runtime (Python 3.13, constraints/colab-2026-08.txt) runs notebooks 00 and 04 through their setup cell
	$(BIN)/python tools/colab_sim.py

test-versions:  ## the unit tests + nbval (smoke) in fresh venvs for each stack in constraints/ (STACK= one of them)
	$(PYTHON) tools/versions.py $(foreach s,$(STACK),--stack $(s))

lab: $(STAMP)  ## JupyterLab with this environment's kernel, at the repository root, showing notebooks/
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks $(ALLOW_ROOT)

sync-notebooks: $(STAMP)  ## write the Colab badge and setup cell into every notebook from COURSE_REPOSITORY
	$(BIN)/python tools/sync_notebooks.py

test-gpu: $(GPU_STAMP)  ## on a GPU machine, with the GPU runner's pins (constraints/gpu-runner-*.txt): the unit tests with the CUDA ones required (not skipped) + the docstring examples + nbval over every notebook, smoke profile, CUDA visible
	COURSE_REQUIRE_CUDA=1 COURSE_PROFILE=smoke COURSE_OFFLINE=1 $(BIN)/python -m pytest tests notebooks helpers \
		--doctest-modules --nbval-lax --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT) -p no:cacheprovider

gpu-rehearsal: $(STAMP)  ## the GPU check (tools/gpu_check.sh) rehearsed on this machine's CPU: every step runs, CUDA ones count as skipped; summary in reports/gpu-rehearsal/
	PYTHON=$(BIN)/python tools/gpu_check.sh reports/gpu-rehearsal --rehearsal

env: $(STAMP)

# The base list is the library; `course` adds what the notebooks import, `jupyter` the runner and JupyterLab, `test` the tests.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[course,jupyter,test]'
	touch $@

$(GPU_STAMP): pyproject.toml $(GPU_CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c $(GPU_CONSTRAINTS) -e '.[course,jupyter,test]'
	$(BIN)/python tools/versions.py --check-pins $(GPU_CONSTRAINTS)
	touch $@

$(BROWSER_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[course,jupyter,test,browser]'
	touch $@

# Mutation testing of the library (helpers/*.py, not the course layer): mutmut, stopped after MUTATE_LIMIT seconds;
# the surviving mutants go to reports/mutation.md. A subset: make mutate MODULES="metrics resize" TESTS="tests/test_metrics.py"
MUTATE_LIMIT ?= 10800
MUTATION_STAMP := $(VENV)/.installed-mutation
.PHONY: mutate
mutate: $(MUTATION_STAMP)  ## mutation testing of helpers/*.py with mutmut (hours for all of it); survivors in reports/mutation.md
	$(BIN)/python tools/mutate.py --time-limit $(MUTATE_LIMIT) $(if $(strip $(MODULES)),--modules $(MODULES)) \
		$(if $(strip $(TESTS)),--tests $(TESTS))

$(MUTATION_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[course,test,mutation]'
	touch $@

clean:
	rm -rf reports .pytest_cache
