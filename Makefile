# memwall — the two commands: `make demo` and `make test` (see README.md).
# Both install missing Debian packages first (scripts/install-deps.sh).

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 15
CMAKE_FLAGS ?=

.PHONY: all deps torch-deps build demo python test test-release test-asan test-tsan fuzz bench format clean gpu-kit gpu-kit-check

all: build

deps:
	@scripts/install-deps.sh

# memwall's Python environment (torch, torchvision, transformers from PyPI,
# python/requirements.txt) for the tests of `memwall trace` and of the
# PyTorch allocator library, best effort: when it cannot be made those tests
# skip and say so; the rest still runs.
torch-deps: deps
	@scripts/install-deps.sh --torch || \
	  echo "make: memwall's Python environment could not be made; the PyTorch tests will skip"

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job on built-in defaults: how to train Llama-2-7B (full
# fine-tuning, AdamW) on a 24 GB GPU, and how fast it will be.
# It builds only the memwall binary (no tests, no benchmarks).
demo: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target memwall
	$(BUILD)/memwall plan --model llama2-7b --gpu rtx4090 --batch 4 --seq 2048 --optimizer adamw
	$(BUILD)/memwall plan --model llama3-8b --qlora --gpu t4 --batch 1 --seq 2048 --optimizer adamw

# `pip install ./python` into memwall's Python environment, from this build
# (scripts/install-python.sh; docs/python.md), then the Python package's tests.
python: torch-deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target memwall_python
	@scripts/install-python.sh $(BUILD)
	@python/tests/run.sh "$$(scripts/install-deps.sh --print-python)" $(BUILD)/python-tests-summary.txt $(BUILD) >$(BUILD)/python-tests.log 2>&1; \
	  code=$$?; cat $(BUILD)/python-tests-summary.txt; \
	  [ $$code -eq 0 ] || grep -E '^(FAILED|ERROR) ' $(BUILD)/python-tests.log; exit $$code

# The GPU check kit (docs/gpu.md): one folder to copy to a GPU machine and
# run scripts/gpu-check.sh in. gpu-kit-check also runs the kit's check in
# --cpu mode here, in a clean environment with another PyTorch than the
# pinned one (its report in $(BUILD)/gpu-kit-check/report). A kit is made
# again only over a kit (a folder with KIT.json).
KIT ?= $(BUILD)/gpu-kit
gpu-kit: torch-deps build
	@if [ -f $(KIT)/KIT.json ]; then rm -rf $(KIT); fi
	@scripts/gpu-kit.sh --build $(BUILD) $(KIT)

gpu-kit-check: torch-deps build
	@if [ -f $(KIT)/KIT.json ]; then rm -rf $(KIT); fi
	@rm -rf $(BUILD)/gpu-kit-check
	@scripts/gpu-kit.sh --build $(BUILD) --check-cpu $(BUILD)/gpu-kit-check $(KIT)

# The whole suite, then again under AddressSanitizer + UndefinedBehaviorSanitizer,
# the runtime allocator's tests under ThreadSanitizer, then each libFuzzer
# target for a short time.
test: test-release test-asan test-tsan fuzz

# PyTorch first: the build makes the PyTorch allocator library only against
# the torch wheel of memwall's environment (src/alloc/torch). The package
# installed into that environment from this build (pip install ./python;
# python/tests/test_installed.py checks it, or says why it skips). Then the
# summary line of the Python package's tests (ctest PythonPackage.Pytest).
test-release: torch-deps build
	@scripts/install-python.sh $(BUILD) || echo "make: the package memwall was not installed (see above); python/tests/test_installed.py will say so"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@cat $(BUILD)/python-tests-summary.txt 2>/dev/null || true

test-asan: deps torch-deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMWALL_SANITIZE=ON \
	  -DMEMWALL_BUILD_BENCH=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# Only test_alloc, test_runtime, test_runtime_cuda and test_exec_cuda are
# built with -fsanitize=thread: the allocator, the runtime engines and the
# CUDA device memory's stream-ordered frees are the code with concurrent
# callers (tests/alloc/threads_test.cc, tests/runtime, tests/runtime_cuda on
# the fake CUDA driver, tests/exec_cuda with fake events).
test-tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMWALL_TSAN=ON \
	  -DMEMWALL_BUILD_BENCH=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(addprefix test_,$(TSAN_TESTS))
	@$(MAKE) --no-print-directory -j $(JOBS) -O $(addprefix tsan-run-,$(TSAN_TESTS))

# The four run side by side, JOBS at a time, each one's output in one piece
# (-O): test_alloc (30 s) and test_runtime (23 s) are most of it.
TSAN_TESTS = alloc runtime runtime_cuda exec_cuda
tsan-run-%:
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/test_$* --gtest_brief=1

fuzz: deps
	@CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DMEMWALL_BUILD_FUZZ=ON -DMEMWALL_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	@scripts/run-fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(JOBS)

bench: build
	@for b in $(BUILD)/bench/bench_*; do $$b; done

format:
	@clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
