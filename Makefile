# Two commands matter: `make repro` (the whole pipeline) and `make test` (the fast test suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: repro retrain test test-all bench compare install clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# Stages call `python`: the virtualenv's, first on PATH. dvc.lock then loses the entries of removed stages (DVC
# keeps them, and rewrites the whole lock per stage), and docs/results.md and the README's summary are written.
repro: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	$(BIN)/python tools/prune_lock.py
	$(MAKE) docs

# Every stage re-run for real (dvc repro --force), with progress; a fresh clone's `make repro` re-uses the committed
# results. Then the docs; once committed, `make compare` (HEAD~1 vs HEAD) shows which verdicts moved.
retrain: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python tools/retrain.py
	$(BIN)/python tools/prune_lock.py
	$(MAKE) docs

# docs/results.md (every claim, table and figure) and the README's results summary, from reports/.
.PHONY: docs
docs: $(STAMP)
	$(BIN)/python -m ppml.report.readme README.md reports docs/results.md

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# What changed in the committed reports between two revisions (claims, headline metrics, privacy), as Markdown.
A ?= HEAD~1
B ?= HEAD
compare: $(STAMP)
	$(BIN)/python -m ppml.report.compare "$(A)" "$(B)"

clean-venv:
	rm -rf $(VENV)
