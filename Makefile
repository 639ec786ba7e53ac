# mbvi — the two commands of the README:
#   make demo   set everything up (the engine compiled for this machine included), then simulate, render and
#               plot a demo scene into out/
#   make test   set everything up, then run the linters and the whole test suite
# Other targets: setup, docs, bench, clean.

PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
PLUGINS = plugins/mbvi-leapfrog plugins/mbvi-quadratic-drag plugins/mbvi-compositions
PYTEST_ARGS ?=

# headless rendering through EGL with Mesa's software renderer (no X server, no Xvfb)
export VTK_DEFAULT_OPENGL_WINDOW ?= vtkEGLRenderWindow
# small dense solves: one BLAS thread each (threads oversubscribe 2 cores when pytest runs 2 workers)
export OPENBLAS_NUM_THREADS ?= 1
export OMP_NUM_THREADS ?= 1

.PHONY: setup demo test lint docs bench clean system-deps

setup: $(STAMP)

system-deps:
	@sh tools/system-deps.sh

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml) tools/system-deps.sh
	@sh tools/system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]" $(addprefix -e ,$(PLUGINS))
	@touch $(STAMP)
	@# the engine compiled for this machine now, not in a first run (not fatal: a loop not compiled here compiles then)
	-$(VENV)/bin/mbvi compile

demo: setup
	$(VENV)/bin/mbvi run scenes/double_pendulum.py --t-end 8 --dt 1e-3 --out out/double_pendulum.npz \
		--render out/double_pendulum.gif --fps 15 --trail --plot out/double_pendulum_energy.png
	$(VENV)/bin/mbvi render out/double_pendulum.npz --out out/double_pendulum.png --trail
	@echo "demo written to out/: double_pendulum.npz, .gif, .png, _energy.png"

lint: setup
	$(VENV)/bin/ruff check mbvi tests scenes benchmarks plugins tools

test: lint
	$(VENV)/bin/pytest -n 2 $(PYTEST_ARGS)

docs: setup
	$(PY) tools/gen_gallery.py
	$(PY) tools/gen_sweep_figures.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: setup
	$(PY) benchmarks/bench_engine.py
	$(PY) benchmarks/bench_open.py
	$(PY) benchmarks/bench_implicit_rigid.py
	$(PY) benchmarks/bench_first_use.py
	$(PY) benchmarks/bench_chain.py
	$(PY) benchmarks/bench_batch.py
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_render.py

clean:
	rm -rf $(VENV) out site .pytest_cache
