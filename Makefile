# Two commands on a fresh machine: `make run` starts the server, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint gen bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.run-deps: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev-deps: $(BIN)/python pyproject.toml clients/python/pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev]" -e ./clients/python
	touch $@ $(VENV)/.run-deps

## run: install into .venv and start the server with its embedded defaults
run: $(VENV)/.run-deps
	$(BIN)/contextd serve

## test: generated code fresh, lint, types, then every test
test: $(VENV)/.dev-deps lint
	$(BIN)/python -m pytest

# The Office add-in page for tests/test_browser_grpc_web.py: npm ci, generate, lint, bundle.
BROWSER_HARNESS := tests/browser
BROWSER_HARNESS_BUILT := $(BROWSER_HARNESS)/dist/.built

$(BROWSER_HARNESS)/node_modules/.installed: $(BROWSER_HARNESS)/package-lock.json
	cd $(BROWSER_HARNESS) && npm ci --no-audit --no-fund
	touch $@

$(BROWSER_HARNESS_BUILT): $(BROWSER_HARNESS)/node_modules/.installed \
		$(addprefix $(BROWSER_HARNESS)/,package.json buf.gen.yaml tsconfig.json build.mjs) \
		$(wildcard $(BROWSER_HARNESS)/src/*.ts protos/contextd/v1/*.proto)
	cd $(BROWSER_HARNESS) && npm run build
	touch $@

test: $(BROWSER_HARNESS_BUILT)

lint: $(VENV)/.dev-deps
	$(BIN)/python scripts/gen_protos.py --check
	$(BIN)/buf lint
	$(BIN)/python scripts/check_breaking.py
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## gen: regenerate the Python code from protos/
gen: $(VENV)/.dev-deps
	$(BIN)/python scripts/gen_protos.py

## bench: run the benchmarks (ratios measured in one run)
bench: $(VENV)/.dev-deps
	$(BIN)/python bench/build_vs_echo.py
	$(BIN)/python bench/trim_vs_langchain.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(BROWSER_HARNESS)/node_modules $(BROWSER_HARNESS)/dist $(BROWSER_HARNESS)/src/gen
