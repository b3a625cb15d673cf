# Thin wrappers. `make demo` and `make test` install whatever is missing first (scripts/setup.sh).
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
# Tests at a time: more than cores, since the crash and e2e tests spend much of their time waiting
# for the processes they start and kill.
TEST_JOBS ?= $(shell echo $$(( $$(nproc) + 2 )))
# Every build compiles with clang (scripts/setup.sh installs it): one compiler's warnings, and the
# release build compiles in three quarters of gcc's time for the same speed of skipprd
# (docs/ARCHITECTURE.md, "Build time"). `make BUILD_DIR=build-gcc CC_COMPILER=gcc
# CXX_COMPILER=g++ test` builds and tests with gcc in a directory of its own.
CC_COMPILER ?= clang
CXX_COMPILER ?= clang++

.PHONY: all setup ensure-setup configure build test demo bench format clean \
        sanitize tsan fuzz configure-asan configure-tsan build-asan build-tsan

all: build

setup:
	scripts/setup.sh

# Runs the installer only when something is missing, so a ready machine needs no network.
ensure-setup:
	@scripts/setup.sh --check || scripts/setup.sh

configure: ensure-setup
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then \
	  cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	        -DCMAKE_C_COMPILER=$(CC_COMPILER) -DCMAKE_CXX_COMPILER=$(CXX_COMPILER); \
	fi

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(TEST_JOBS)

demo: build
	examples/bikehire/demo.sh $(BUILD_DIR)/src/skipprd

bench: build
	bench/run.sh $(BUILD_DIR)

# ----- sanitizers and fuzzing (docs/ARCHITECTURE.md, "Tests") ---------------------------------
# Own build directories, clang, no jemalloc, no benchmarks. SANITIZER_TEST_SCALE shrinks the heavy
# end-to-end tests' row counts (tests/support/scale.hpp); every test still runs.
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
SANITIZER_BUILD_TYPE ?= Sanitize
SANITIZER_TEST_SCALE ?= 0.1
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= $(JOBS)
# The test binaries built under TSan: everything that starts threads (the sync pass's reader,
# committer, lander and aggregator threads run in the skipprd the e2e tests start; DuckDB's scan
# threads read WAL batches in query_test). Not postgres_workload_test: its threads are the ones
# postgres_e2e_test runs, and under TSan it would add four minutes of waiting for PostgreSQL. Nor
# postgres_sink_e2e_test: its sink runs on the lander thread sinks_e2e_test's sinks run on.
TSAN_TESTS ?= store_test sources_test typed_reading_test aggregates_test iceberg_metadata_test \
              query_test postgres_source_test postgres_e2e_test \
              sync_e2e_test lake_e2e_test aggregates_e2e_test sinks_e2e_test
SANITIZER_CMAKE = -G Ninja -DCMAKE_BUILD_TYPE=$(SANITIZER_BUILD_TYPE) -DCMAKE_C_COMPILER=clang \
                  -DCMAKE_CXX_COMPILER=clang++ -DSKIPPR_JEMALLOC=OFF -DSKIPPR_BENCH=OFF \
                  -DSKIPPR_PYTHON=OFF
supp = $(CURDIR)/tests/sanitizers
# Children (the skipprd the e2e tests start) inherit these. exitcode 86 keeps a sanitizer report
# from passing for an expected exit code 1.
export ASAN_OPTIONS ?= exitcode=86:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS ?= exitcode=86:print_stacktrace=1:halt_on_error=1:suppressions=$(supp)/ubsan.supp
export LSAN_OPTIONS ?= suppressions=$(supp)/lsan.supp:print_suppressions=0
export TSAN_OPTIONS ?= exitcode=86:halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$(supp)/tsan.supp:print_suppressions=0

configure-asan: ensure-setup
	@if [ ! -f $(ASAN_BUILD_DIR)/build.ninja ]; then \
	  cmake -S . -B $(ASAN_BUILD_DIR) $(SANITIZER_CMAKE) -DSKIPPR_SANITIZE=address,undefined -DSKIPPR_FUZZ=ON; \
	fi

build-asan: configure-asan
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)

# ASan + UBSan over every unit and end-to-end test (and the fuzz targets' committed inputs) but
# the loops that kill skipprd at random moments (SyncCrash and LakeCrash also walk the named crash
# points with the real binary). What a random moment adds is when the kill lands, which `make test`
# checks; the code a restart runs after one is the recovery the power-cut tests run here at every
# named crash point and file operation (FaultPowerCut, LandingPowerCut, WalPowerCut, in process).
# Under ASan the loops were a fifth of the stage's test time.
ASAN_SKIPPED_TESTS ?= RandomKills|SigkillAtRandom|SigkillAtARandom|AcrossKills|KillsInTheMiddle
sanitize: build-asan
	cd $(ASAN_BUILD_DIR) && SKIPPR_TEST_SCALE=$(SANITIZER_TEST_SCALE) \
	  ctest --output-on-failure -j $(TEST_JOBS) -E '$(ASAN_SKIPPED_TESTS)'

configure-tsan: ensure-setup
	@if [ ! -f $(TSAN_BUILD_DIR)/build.ninja ]; then \
	  cmake -S . -B $(TSAN_BUILD_DIR) $(SANITIZER_CMAKE) -DSKIPPR_SANITIZE=thread; \
	fi

build-tsan: configure-tsan
	cmake --build $(TSAN_BUILD_DIR) -j $(JOBS) --target skipprd $(TSAN_TESTS)

# TSan over the tests whose code runs threads (ctest labels are the test binaries' names), but
# not the kill-and-crash-point loops among them: they run the same threads as the tests beside
# them, and what they check (nothing lost or doubled across a crash) `make test` checks (and ASan
# too, but for the kills at random moments).
# Under TSan they were a third of the stage. Nor the tests against a PostgreSQL server of code that
# runs on the calling thread (TLS connections, the Iceberg catalog in PostgreSQL), in binaries that
# are here for other tests' threads (the snapshot's parallel ranges, the SQLite catalog's).
TSAN_SKIPPED_TESTS ?= Crash|Kill|PowerCut|PostgresTls|PostgresCatalog
tsan: build-tsan
	cd $(TSAN_BUILD_DIR) && SKIPPR_TEST_SCALE=$(SANITIZER_TEST_SCALE) \
	  ctest --output-on-failure -j $(TEST_JOBS) -L '^($(shell echo $(TSAN_TESTS) | tr ' ' '|'))$$' \
	        -E '$(TSAN_SKIPPED_TESTS)'

# Every fuzz target for FUZZ_SECONDS, FUZZ_JOBS at a time; prints executions per target. New
# inputs collect in $(ASAN_BUILD_DIR)/fuzz/corpus/ (the committed seeds stay as they are).
fuzz: configure-asan
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS) --target fuzzers
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) tests/fuzz/run.sh $(ASAN_BUILD_DIR)

format:
	find src tests bench python/src -name '*.cpp' -o -name '*.hpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
