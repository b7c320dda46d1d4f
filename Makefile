# The two commands of the README. Everything installs into .venv; nothing global but the
# browser packages the web UI test needs (Debian's chromium and chromium-driver).
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install browser

demo: install
	$(BIN)/loadline run --shape stepped --time-scale 20 --sim-profile tiny

test: install browser
	$(BIN)/python -m pytest -q

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null)
