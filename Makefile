# Two commands on a fresh machine: `make demo` and `make test` (README). Each creates .venv when it is
# missing, installs the project with its test extras and builds the Cython extension in place.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-native test-pure typecheck bench-smoke build bench bench-readme clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip "setuptools>=77" wheel "Cython>=3.0"
	$(PY) -m pip install -q --no-build-isolation -e ".[test,bench,audit]"
	touch $(STAMP)

# An editable install does not rebuild when a .pyx changes, so every run rebuilds in place (cheap when
# nothing changed: cythonize skips up-to-date sources).
build: $(STAMP)
	$(PY) setup.py -q build_ext --inplace

demo: build
	$(PY) -m sharegroup demo

# Property tests draw new examples every run: one seed per `make` run, printed with the command so that
# a failure can be replayed (`make test HYPOTHESIS_SEED=...`).
HYPOTHESIS_SEED ?= $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
PYTEST := $(PY) -m pytest -q -p no:cacheprovider --hypothesis-seed=$(HYPOTHESIS_SEED)

test-native: build
	SHAREGROUP_REQUIRE_NATIVE=1 $(PYTEST) tests

test-pure: build
	SHAREGROUP_PUREPYTHON=1 $(PYTEST) tests

# The twins' static contract: mypy fails when a twin drifts from its Protocol (tests/typecheck_contracts.py),
# and stubtest when a compiled module drifts from its .pyi.
NATIVE_MODULES := sharegroup.tracker._native persister._native_records sharegroup.topics._record_scan
typecheck: build
	$(PY) -m mypy
	$(PY) -m mypy.stubtest --mypy-config-file tests/stubtest_mypy.ini $(NATIVE_MODULES)

# Every benchmark once, with small sizes and timing off, so the benchmarks cannot rot. Writes no JSON and
# leaves the README alone (only `make bench` and `make bench-readme` do those).
bench-smoke: build
	SHAREGROUP_BENCH_SMOKE=1 $(PY) -m pytest -q -p no:cacheprovider bench --benchmark-disable

test: typecheck test-native test-pure bench-smoke

# Every benchmark, timed. The run is stored in $(BENCH_JSON), tracked in git: pytest-benchmark's JSON with
# each benchmark's statistics, the numbers benchmarks compute (extra_info), the machine and the commit. It
# is written to a temporary file first, so a failed run leaves the stored one as it was. Then the README's
# benchmark blocks are regenerated from it (bench/readme_tables.py, as `make bench-readme` does).
BENCH_JSON := bench/results/latest.json

bench: build
	$(PY) -m pytest -q -p no:cacheprovider bench --benchmark-enable --benchmark-columns=min,median,mean,ops --benchmark-sort=name --benchmark-json=$(BENCH_JSON).tmp
	mv $(BENCH_JSON).tmp $(BENCH_JSON)
	$(PY) bench/readme_tables.py --json $(BENCH_JSON) --readme README.md

# The README's benchmark blocks from the stored run, without running anything.
bench-readme: $(STAMP)
	$(PY) bench/readme_tables.py --json $(BENCH_JSON) --readme README.md

clean:
	rm -rf build *.egg-info $$(find sharegroup persister -name "*.so") _native/*.c
