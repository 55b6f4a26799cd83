# Benchmark Atlas: `make run` sets up and materializes everything; `make test` sets up and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# CmdStan for the cmdstanpy engine: an existing one, else install_cmdstan() (network), else built from
# ../shared/tools/cmdstan into .cmdstan/ (~2-3 min once), else none (PyStan). The stamp records which;
# it is redone when the setup script or ../shared's assemble.sh changes (`make cmdstan` redoes it now).
CMDSTAN_STAMP := .cmdstan/setup.json
CMDSTAN_SOURCES := $(wildcard $(abspath $(CURDIR)/../shared/tools/cmdstan/assemble.sh))

# A project-local Dagster instance: run history, schedules and logs persist in .dagster_home/.
export DAGSTER_HOME := $(CURDIR)/.dagster_home
# Offline runs read sources from the mirror beside the checkout when it exists (https://HOST/PATH -> mirror/HOST/PATH).
MIRROR_BESIDE := $(abspath $(CURDIR)/../shared/data/mirror)
ifeq ($(origin ATLAS_MIRROR), undefined)
ATLAS_MIRROR := $(if $(wildcard $(MIRROR_BESIDE)),$(MIRROR_BESIDE),)
endif
export ATLAS_MIRROR

.PHONY: setup cmdstan system-packages instance run test dev bench clean-state

setup: $(VENV)/.synced $(CMDSTAN_STAMP) system-packages

# Debian packages the tests drive: chromium (the browser test, tests/ui), the PostgreSQL server (the
# storage test, tests/ops) and redis-server (the Celery broker of the executor test, tests/ops). Installed
# with apt-get only when missing (root and apt-get needed); elsewhere setup says so and those tests skip,
# naming why. REQUIRE_SYSTEM_PACKAGES=1 (.ci/run) makes that an error.
system-packages:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium fonts-dejavu-core"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -x /usr/bin/redis-server ] || missing="$$missing redis-server"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "setup: installing Debian packages:$$missing"; \
	  apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null && exit 0; \
	  echo "setup: apt-get could not install$$missing"; \
	else \
	  echo "setup: not installing$$missing (needs root and apt-get): the tests that drive them skip"; \
	fi; \
	[ "$${REQUIRE_SYSTEM_PACKAGES:-0}" != 1 ]

# uv resolves exactly what uv.lock pins; it is installed into the user's Python when missing. Bytecode is compiled
# at install: with PYTHONDONTWRITEBYTECODE set (as on this machine) every process would otherwise recompile
# dagster, pandas and great_expectations from source on import.
$(VENV)/.synced: pyproject.toml uv.lock
	@$(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check uv
	$(PYTHON) -m uv sync --frozen --compile-bytecode --python $(PYTHON)
	@touch $@

$(CMDSTAN_STAMP): atlas_assets/model/cmdstan_setup.py $(CMDSTAN_SOURCES) | $(VENV)/.synced
	$(BIN)/python atlas_assets/model/cmdstan_setup.py --stamp $@

cmdstan: $(VENV)/.synced
	$(BIN)/python atlas_assets/model/cmdstan_setup.py --stamp $(CMDSTAN_STAMP)

# INSTANCE_YAML=deploy/dagster.postgres.yaml: run/event/schedule storage in PostgreSQL (DAGSTER_PG_* in the environment).
INSTANCE_YAML ?= dagster.yaml
instance:
	@mkdir -p $(DAGSTER_HOME)
	@cp $(INSTANCE_YAML) $(DAGSTER_HOME)/dagster.yaml

# atlas_job (ingest .. outputs), then every validation fold (one validation_job run per partition) and
# publish_job (summary, publication, report); all recorded on the project instance like UI launches.
run: setup instance
	$(BIN)/dagster job execute -m atlas_assets.definitions -j atlas_job
	@# a cost fit that fails its gates publishes no cost tables; the capability path goes on (said below)
	$(BIN)/dagster job execute -m atlas_assets.definitions -j cost_job || echo "cost_job failed: no cost tables in this publication (see its run in the UI)"
	$(BIN)/python -m atlas_assets.validation.run_studies
	@$(BIN)/python -m atlas_assets.publish.summary

# The suite on TEST_WORKERS processes (pytest-xdist), each test file on one worker so its module fixtures are built
# once: most slow tests wait on subprocesses, servers and a browser. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: setup
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

dev: setup instance
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

bench: setup
	$(BIN)/python bench/bench_clean_chain.py
	$(BIN)/python bench/bench_fit.py

clean-state:
	rm -rf var .dagster_home
