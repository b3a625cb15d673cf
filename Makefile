# Thin wrappers. `make demo` and `make test` install whatever is missing first (scripts/setup.sh).
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)

.PHONY: all setup ensure-setup configure build test demo bench format clean

all: build

setup:
	scripts/setup.sh

# Runs the installer only when something is missing, so a ready machine needs no network.
ensure-setup:
	@scripts/setup.sh --check || scripts/setup.sh

configure: ensure-setup
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then \
	  cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE); \
	fi

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: build
	examples/bikehire/demo.sh $(BUILD_DIR)/src/skipprd

bench: build
	bench/run.sh $(BUILD_DIR)

format:
	find src tests bench -name '*.cpp' -o -name '*.hpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
