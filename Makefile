# torchimages: build, verify and test PyTorch/CUDA container images.  `make help` lists targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
MATRIX ?= matrix.yaml
TAG ?=
BUILD_ARGS ?=
TEST_ARGS ?=
DOCTOR_ARGS ?=
# pytest's options for test and test-unit: one line per test as it finishes, and the 15 slowest at the end.
PYTEST_ARGS ?= -v --durations=15
# `make test` runs the suite's groups (tests/scheduling.py) on this many workers at once; 0: in one process.
TEST_WORKERS ?= 2
# Hand this machine's pip setup (local wheel folders, file:// indexes, CA bundle) to builds: 1 or 0.
HOST_PIP ?= 1
# `make engine EMULATION=1` also runs `make emulation` (QEMU for the other platform's containers): 1 or 0.
EMULATION ?= 0
# Docker image for bench-compression and bench-pull (their default where empty); `make mutants MUTANTS_ARGS=...`.
IMAGE ?=
MUTANTS_ARGS ?=
# `make bench-build BENCH_ARGS=...`: options of bench/build_vs_install.py (--clean-engine, --skip-install, ...);
# `make bench-matrix BENCH_ARGS=...`: those of bench/default_matrix.py (--keep, selectors).
BENCH_ARGS ?=
# The values a user sets that reach a command are arguments, never shell text: each goes to the recipes unexpanded
# (`$(value ...)`) as the environment variable MAKEARG_<NAME>, and scripts/make_args.py makes it the command's
# arguments (`=NAME`: one argument, left out where empty; `+NAME`: split as a shell splits words, nothing run).
# A `;`, a quote, `$(...)` or a backtick in TAG or BUILD_ARGS is text the tool receives, never a command.
USER_VARIABLES := TAG MATRIX BUILD_ARGS TEST_ARGS DOCTOR_ARGS PYTEST_ARGS TEST_WORKERS IMAGE MUTANTS_ARGS BENCH_ARGS
$(foreach name,$(USER_VARIABLES),$(eval export MAKEARG_$(name) := $$(value $(name))))
unexport $(USER_VARIABLES)
RUN = $(PY) scripts/make_args.py
# The CI workflow teams copy (`make workflow` writes it from the matrix; `make lint` checks it).
WORKFLOW := .github/workflows/images.yml
WITH_SOURCES = $(if $(filter 1,$(HOST_PIP)),eval "$$(scripts/host-pip-sources)";)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# pip notes every project a configured local (file://) index does not hold; those notes are not faults
	$(PY) -m pip install --quiet --editable '.[dev]' 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
	touch $@

.PHONY: help install engine emulation build doctor render check-render workflow reference validate list lint test test-unit test-images bench bench-image bench-compression bench-pull bench-jobs bench-cache bench-build bench-matrix mutants clean

help: ## show this help
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

install: $(VENV)/.installed ## create .venv and install the project with its dev tools

engine: ## make sure a Docker engine with BuildKit answers (as root: installs docker.io, mmdebstrap; starts dockerd); EMULATION=1 also does `make emulation`
	@scripts/start-docker.sh >/dev/null
	@$(if $(filter 1,$(EMULATION)),scripts/setup-emulation.sh,:)

emulation: ## run the other platform's containers under QEMU, linux/arm64 on x86_64 (as root: binfmt_misc, qemu-user-static, its handler)
	@scripts/setup-emulation.sh

build: $(VENV)/.installed engine ## build, verify and tag images: make build TAG=2.7.0-cuda11.8 [BUILD_ARGS=...]
	@if [ -z "$$MAKEARG_TAG" ]; then echo "usage: make build TAG=<tag prefix or glob>, e.g. TAG=2.7.0-cuda11.8 (make list shows tags)"; exit 2; fi
	$(WITH_SOURCES) $(RUN) build.py build --matrix =MATRIX +BUILD_ARGS -- =TAG

doctor: $(VENV)/.installed ## check this machine for the selected images: make doctor TAG=2.14.1-cuda13.0 [DOCTOR_ARGS=--host-only]
	$(RUN) build.py doctor --matrix =MATRIX +DOCTOR_ARGS -- =TAG

render: $(VENV)/.installed ## render images/*/Dockerfile from the matrix and templates
	$(RUN) build.py render --matrix =MATRIX

check-render: $(VENV)/.installed ## fail if the committed Dockerfiles or the CI workflow are stale
	$(RUN) build.py render --matrix =MATRIX --check
	$(RUN) build.py workflow --matrix =MATRIX --check

workflow: $(VENV)/.installed ## write .github/workflows/images.yml (plan, bake and promote per platform, join, keyless signing) from the matrix
	$(RUN) build.py workflow --matrix =MATRIX

reference: $(VENV)/.installed ## write docs/reference/{cli,settings,gpu-archs}.md from the parsers, the settings table and the knowledge base
	$(PY) -m torchimages.cli.reference

validate: $(VENV)/.installed ## check the matrix against the knowledge base
	$(RUN) build.py validate --matrix =MATRIX

list: $(VENV)/.installed ## list image tags (TAG= narrows by prefix)
	$(RUN) build.py list --matrix =MATRIX -- =TAG

lint: $(VENV)/.installed ## ruff, mypy, the layers, the reference pages' freshness, the mutants table against the code, hadolint over every Dockerfile, shellcheck over every step script, actionlint and zizmor (offline) over the CI workflow
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) bench/mutants.py --check
	$(PY) -m torchimages.cli.reference --check
	$(VENV)/bin/hadolint --config .hadolint.yaml images/*/Dockerfile
	$(VENV)/bin/shellcheck --external-sources --shell=bash images/*/steps/*.sh
	$(VENV)/bin/actionlint -shellcheck $(VENV)/bin/shellcheck $(WORKFLOW)
	$(VENV)/bin/zizmor --offline --quiet $(WORKFLOW)

test: $(VENV)/.installed ## lint, render check, unit and end-to-end tests on TEST_WORKERS=2 workers (real Docker builds; the linux/arm64 one under QEMU)
	@EXTRA_PACKAGES="docker-registry skopeo zstd cosign" scripts/start-docker.sh >/dev/null
	@scripts/setup-emulation.sh || echo "make test: no emulation (above): tests/e2e/test_arm64.py will skip, or fail with REQUIRE_DOCKER=1" >&2
	$(MAKE) --no-print-directory lint check-render
	$(WITH_SOURCES) $(RUN) -m pytest -n =TEST_WORKERS --dist loadscope --no-loadscope-reorder +PYTEST_ARGS

test-unit: $(VENV)/.installed ## unit tests only (no Docker)
	$(RUN) -m pytest tests/unit +PYTEST_ARGS

test-images: $(VENV)/.installed ## smoke-test built images: make test-images TAG=... [TEST_ARGS=--gpus all]
	@if [ -z "$$MAKEARG_TAG" ]; then echo "usage: make test-images TAG=<tag prefix>"; exit 2; fi
	$(RUN) build.py test --matrix =MATRIX +TEST_ARGS -- =TAG

bench: $(VENV)/.installed ## print the validate+plan+render figures (see docs/benchmarks.md)
	$(PY) bench/plan_render.py

bench-image: $(VENV)/.installed ## both flavors: stored bytes, cold build, size vs floor, push/pull (slow; empties the build cache)
	@EXTRA_PACKAGES=docker-registry scripts/start-docker.sh >/dev/null
	$(WITH_SOURCES) $(PY) bench/image_build.py

bench-compression: $(VENV)/.installed ## push and pull of the CUDA runtime with gzip vs zstd layers, loopback registry (10-15 min)
	@EXTRA_PACKAGES="docker-registry skopeo zstd" scripts/start-docker.sh >/dev/null
	$(RUN) bench/compression.py =IMAGE

bench-pull: $(VENV)/.installed ## cold pulls of one image (IMAGE) pushed with gzip, then zstd: seconds, layers, largest layer
	@EXTRA_PACKAGES="docker-registry skopeo zstd" scripts/start-docker.sh >/dev/null
	$(RUN) bench/pull.py =IMAGE

bench-jobs: $(VENV)/.installed ## --jobs 1 against --jobs 2 over four cold CPU builds (5-15 min)
	@scripts/start-docker.sh >/dev/null
	$(WITH_SOURCES) $(PY) bench/jobs.py

bench-cache: $(VENV)/.installed ## a second CI run on a fresh engine with and without --cache-from (root; 5-10 min)
	@EXTRA_PACKAGES=docker-registry scripts/start-docker.sh >/dev/null
	$(WITH_SOURCES) $(PY) bench/cache.py

bench-build: $(VENV)/.installed ## the main job (TAG, default 2.11.0-cuda13.0; --no-cache) against a bare uv install of its wheels (BENCH_ARGS=--clean-engine: prunes the build cache)
	@scripts/start-docker.sh >/dev/null
	$(WITH_SOURCES) $(RUN) bench/build_vs_install.py +BENCH_ARGS -- =TAG

bench-matrix: $(VENV)/.installed ## every image of the default matrix this machine can build, one combination at a time, measured, then removed with the build cache (32 min here; a machine of one's own; BENCH_ARGS=--keep, selectors)
	@scripts/start-docker.sh >/dev/null
	$(WITH_SOURCES) $(RUN) bench/default_matrix.py +BENCH_ARGS

mutants: $(VENV)/.installed ## plant each hand-written rule-breaking bug in a copy of the tree, run its unit tests (a few min; docs/mutants.md)
	$(RUN) bench/mutants.py +MUTANTS_ARGS

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
