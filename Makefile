# The two commands of the README: `make run` and `make test`. Both install what is missing first.
JOBS ?= 2
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 15
PREFIX ?= /usr/local

.PHONY: all deps cuda-tools peers build run test test-release test-asan test-fuzz bench install clean

all: build

deps:
	@bash harness/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/tact train --out $(BUILD)/fashion-cnn.safetensors

test: test-release test-fuzz test-asan

cuda-tools:
	@bash harness/cuda-tools.sh >/dev/null

# The benchmarks' current peers (PyTorch from PyPI) in .tools/peers; optional.
peers:
	@bash harness/peers.sh >/dev/null

test-release: build cuda-tools
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps cuda-tools
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTACT_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

test-fuzz: deps
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTACT_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_envelope fuzz_log fuzz_ast fuzz_stages fuzz_api fuzz_loaders fuzz_seed
	bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	$(BUILD)/tact bench runtime

# The header, libtact.so and libtact.a, tact.pc and the CMake package under PREFIX.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
