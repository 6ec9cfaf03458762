# One entry point for newcomers and CI. Every target sets itself up: a
# virtual environment with torch 2.13.0 (the CPU build), the C runtime and
# the extension built with CMake against that torch, no build isolation.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
JOBS ?= 2
SETUP_STAMP := $(VENV)/.setup-done
# The packages of pyproject.toml's optional "test" extra (pytest, and
# transformers for tests/test_hf_models.py), read with tomllib so that the
# list lives in one place.
TEST_EXTRA := import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['test']))

.PHONY: all setup build demo test test-c test-py sanitize faultinject bench clean

all: build

$(SETUP_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=23" "setuptools>=64" wheel
	$(PY) -m pip install --quiet "torch==2.13.0" numpy
	$(PY) -m pip install --quiet $$($(PY) -c "$(TEST_EXTRA)")
	touch $@

setup: $(SETUP_STAMP)

build: $(SETUP_STAMP)
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DPython3_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_PREFIX_PATH="$$($(PY) -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
	cmake --build $(BUILD) -j$(JOBS)
	$(PY) -m pip install --quiet --no-build-isolation --no-deps -e .

demo: build
	$(PY) examples/train_gpt.py

test-c: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Two workers (-n), each taking whole files (--dist loadfile), so that a
# file's module fixtures run once and tests that share fixed resources
# (the multi-host test's network namespaces) stay in one process. The
# slowest tests are listed, to watch CI's time.
test-py: build
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile --durations=15

test: test-c test-py

# The runtime's C tests under AddressSanitizer+UBSan, and under
# ThreadSanitizer (streams, events, allocator). The ASan build has the
# fault-injection counter too (it only counts unless NRT_FAULT_AT is set), so
# that faultinject reuses it instead of compiling the runtime again.
ASAN_CONFIG := -DNRT_SANITIZE=address -DNRT_FAULT_INJECTION=ON -DNRT_BUILD_EXTENSION=OFF -DCMAKE_BUILD_TYPE=Debug

sanitize:
	cmake -S . -B $(BUILD)-asan $(ASAN_CONFIG)
	cmake --build $(BUILD)-asan -j$(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j$(JOBS)
	cmake -S . -B $(BUILD)-tsan -DNRT_SANITIZE=thread -DNRT_BUILD_EXTENSION=OFF -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(BUILD)-tsan -j$(JOBS)
	cd $(BUILD)-tsan && ctest --output-on-failure -j$(JOBS)

# Every C test again with the runtime's Nth host or device allocation
# failing, for N = 1, 2, ...: each failure must be a clean error status, with
# no crash, hang or leak (runtime/tests/faultinject.py says what it covers).
faultinject:
	cmake -S . -B $(BUILD)-asan $(ASAN_CONFIG)
	cmake --build $(BUILD)-asan -j$(JOBS)
	$(PYTHON) runtime/tests/faultinject.py $(BUILD)-asan --jobs $(JOBS)

bench: build
	$(PY) benchmarks/dispatch.py

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan torchneuron/*.so
