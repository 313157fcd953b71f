# rcubench: the commands README.md documents.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup up down demo test check lint typecheck pytest layers

setup:  ## install and start everything rcubench needs (idempotent)
	bash scripts/setup.sh

up: setup  ## web on 127.0.0.1:8000, one worker on all queues, beat
	bash scripts/service.sh up

demo: up  ## a real comparison: base vs base + demo/ example patch, verdicts and report URL
	bash scripts/demo.sh

down:  ## stop what `make up` started
	bash scripts/service.sh down

test: setup  ## the whole suite, as CI runs it: lint, types, import contracts, every test
	$(MAKE) --no-print-directory lint typecheck layers pytest

# The developer's loop: the same checks, and the tests that need at most the database
# (the root conftest.py marks `system` every test that builds, boots, spawns, serves or
# deploys). Not `check: setup`: setup acts as root (Debian packages, services, the kernel
# tree) and checks all of it on every run, which the loop need not pay. What the loop needs
# stays where one `make setup` left it: the virtualenv, PostgreSQL and Redis running, the
# .env, the default kernel tree (the preflight tests read it). Run `make setup` again after
# a reboot or a change to requirements/.
check:  ## lint, types, import contracts and the tests that are not `system`: minutes
	$(MAKE) --no-print-directory lint typecheck layers
	$(VENV)/bin/pytest -m "not system" -n auto $(PYTEST_ARGS)

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck:
	$(VENV)/bin/mypy .

layers:
	$(VENV)/bin/lint-imports

# Every test, in two tiers: those that need at most the database on every core (pytest-xdist
# gives each process its own test database), then the system tier one test at a time, as
# its kernel builds and TCG guests take the machine's cores and share session fixtures; its
# 30 longest items close the output, where CI shows it.
pytest:
	$(VENV)/bin/pytest -m "not system" -n auto $(PYTEST_ARGS)
	$(VENV)/bin/pytest -m system --durations=30 $(PYTEST_ARGS)

.PHONY: golden
golden:  ## rewrite the parser golden files (benchmarks/*/fixtures/*.expected.json, *.trace.json), then review the diff
	$(PY) -m benchmarks.golden --update
	$(PY) -m benchmarks.rcutrace.golden --update

.PHONY: api-schema
api-schema:  ## regenerate the committed OpenAPI schema (docs/api/openapi.yaml) after an API change
	$(PY) manage.py spectacular --validate --fail-on-warn --file docs/api/openapi.yaml
