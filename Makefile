# Two commands do all the set-up: `make course` runs the course, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE ?= auto
CELL_TIMEOUT ?= 600

.PHONY: course test lab env clean

course: $(STAMP)  ## prepare data, execute every notebook in the auto profile, write reports/
	$(BIN)/python -m helpers.course.report --profile $(PROFILE)

test: $(STAMP)  ## unit tests of helpers + nbval over every notebook in the smoke profile, offline
	COURSE_PROFILE=smoke COURSE_OFFLINE=1 $(BIN)/python -m pytest tests notebooks \
		--nbval-lax --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT) -p no:cacheprovider

.PHONY: test-gpu
test-gpu: $(STAMP)  ## on a GPU machine: the unit tests with the CUDA ones required (not skipped) + nbval over every notebook, smoke profile, CUDA visible
	COURSE_REQUIRE_CUDA=1 COURSE_PROFILE=smoke COURSE_OFFLINE=1 $(BIN)/python -m pytest tests notebooks \
		--nbval-lax --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT) -p no:cacheprovider

lab: $(STAMP)  ## JupyterLab with this environment's kernel
	$(BIN)/jupyter lab notebooks/

env: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

clean:
	rm -rf reports .pytest_cache
