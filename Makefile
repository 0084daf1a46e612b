# udm developer entry points. `make demo` and `make test` are all a fresh
# machine needs (Python 3.11, Java 17, make): both create and reuse .venv.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.udm-installed
PLUGINS := $(wildcard plugins/*/pyproject.toml)
# each holds its part of the udm namespace: sdk/udm/sdk is udm.sdk, ...
ROOTS := sdk host testing cli templates

.PHONY: venv demo test lint typecheck unit docs docs-serve bench lock clean

venv: $(STAMP)

# editable installs of the project and its plugins. setuptools reports each
# with an "Editable installation" BuildBackendWarning block that asks nothing
# of the user (udm's parts live in four import roots, which setuptools serves
# through an import hook); the filter keeps it out of `make` output, other
# warnings still show.
EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation

$(STAMP): pyproject.toml requirements.lock $(PLUGINS)
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=python3"; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(EDITABLE) -e .
	@# the import roots as plain path entries, which mypy, pyright and
	@# import-graph tools read (they do not run setuptools' import hook)
	@printf '%s\n' $(addprefix $(CURDIR)/,$(ROOTS)) > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/udm-roots.pth"
	@for p in $(dir $(PLUGINS)); do \
		echo "installing plugin $$p"; \
		$(EDITABLE) -e $$p || exit 1; \
	done
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/udm-cli run examples/demo.py --output out

LINT_PATHS := $(wildcard sdk host testing cli tests benchmarks examples plugins templates/udm/templates/*/hooks docs/examples docs/pictures.py)

# ruff, then the architecture contracts of .importlinter (layers, no cycles,
# the plan knows no engine)
lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/lint-imports

# mypy reads the import roots (mypy_path in pyproject.toml)
typecheck: $(STAMP)
	$(BIN)/mypy -p udm.sdk -p udm.host -p udm.testing

unit: $(STAMP)
	$(BIN)/pytest -q

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .build/site

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

test: lint typecheck unit docs

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

lock: $(STAMP)
	{ echo "# Pinned dependencies for udm development (pip freeze of a working venv). Regenerate: make lock"; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^udm'; } > requirements.lock

clean:
	rm -rf .build out site .pytest_cache .mypy_cache .ruff_cache
