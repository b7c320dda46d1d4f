# The two commands of the README. Everything installs into .venv; nothing global but the
# browser packages the web UI test needs (Debian's chromium and chromium-driver).
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint-layers install browser

# A stepped test (2, 4, 8, 16... users until the SLO breaks) against the small simulated engine,
# 20x faster than real time (about a minute); the report is in model time.
# Exit code 1 means "the SLO failed", which a stepped test driven to its break point does by design.
demo: install
	@$(BIN)/loadline run --shape stepped --time-scale 20 --sim-profile tiny --scenario single \
	  -- --step-start-users 2 --event-interval 1 --max-tokens 64; \
	  code=$$?; [ $$code -le 1 ] || exit $$code

test: install browser lint-layers
	$(BIN)/python -m pytest -q

# The inner loop: unit tests only (in process, under a minute).
test-fast: install lint-layers
	$(BIN)/python -m pytest -q tests/unit

# The import contracts of pyproject.toml ([tool.importlinter]): layers point one way, and the
# load side (workers, the master's runtime) never imports pandas or matplotlib.
lint-layers: install
	$(BIN)/lint-imports --no-cache

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null)
