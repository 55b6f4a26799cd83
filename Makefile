# Benchmark Atlas: `make run` sets up and materializes everything; `make test` sets up and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# A project-local Dagster instance: run history, schedules and logs persist in .dagster_home/.
export DAGSTER_HOME := $(CURDIR)/.dagster_home
# Offline runs read sources from the mirror beside the checkout when it exists (https://HOST/PATH -> mirror/HOST/PATH).
MIRROR_BESIDE := $(abspath $(CURDIR)/../shared/data/mirror)
ifeq ($(origin ATLAS_MIRROR), undefined)
ATLAS_MIRROR := $(if $(wildcard $(MIRROR_BESIDE)),$(MIRROR_BESIDE),)
endif
export ATLAS_MIRROR

.PHONY: setup instance run test dev bench clean-state

setup: $(VENV)/.synced

# uv resolves exactly what uv.lock pins; it is installed into the user's Python when missing.
$(VENV)/.synced: pyproject.toml uv.lock
	@$(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check uv
	$(PYTHON) -m uv sync --frozen --python $(PYTHON)
	@touch $@

instance:
	@mkdir -p $(DAGSTER_HOME)
	@cp dagster.yaml $(DAGSTER_HOME)/dagster.yaml

run: setup instance
	$(BIN)/dagster job execute -m atlas_assets.definitions -j atlas_job

test: setup
	$(BIN)/pytest

dev: setup instance
	$(BIN)/dagster dev -w workspace.yaml

bench: setup
	$(BIN)/python bench/bench_clean_chain.py
	$(BIN)/python bench/bench_fit.py

clean-state:
	rm -rf var .dagster_home
