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

# The Node client (clients/node): npm ci, then generate, type-check, lint and compile.
NODE_CLIENT := clients/node
NODE_BUILT := $(NODE_CLIENT)/dist/.built

$(NODE_CLIENT)/node_modules/.installed: $(NODE_CLIENT)/package-lock.json
	cd $(NODE_CLIENT) && npm ci --no-audit --no-fund
	touch $@

$(NODE_BUILT): $(NODE_CLIENT)/node_modules/.installed $(NODE_CLIENT)/package.json \
		$(NODE_CLIENT)/buf.gen.yaml $(NODE_CLIENT)/tsconfig.json $(NODE_CLIENT)/README.md \
		$(wildcard $(NODE_CLIENT)/src/*.ts $(NODE_CLIENT)/test/*.ts protos/contextd/v1/*.proto)
	cd $(NODE_CLIENT) && npm run build
	touch $@

## test: generated code fresh, lint, types, the Node client built, then every test
test: $(VENV)/.dev-deps lint $(NODE_BUILT)
	$(BIN)/python -m pytest

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
	rm -rf $(NODE_CLIENT)/node_modules $(NODE_CLIENT)/dist $(NODE_CLIENT)/src/gen
