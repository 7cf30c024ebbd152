# The two commands of the README: `make demo` (the main job) and `make test` (every test).
# Both install what is missing first (scripts/setup.sh) and build with the `release` preset.
BUILD := build/release
JOBS ?= $(shell nproc)
# bash with pipefail, so that a configure piped through grep still fails the target when it fails.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: demo test build setup sanitize tsan bench fresh-check gpu-bundle clean

setup:
	@bash scripts/setup.sh

build: setup
	@# CMake's own chatter hidden; fluxion's lines say what was found and what is skipped, and why.
	cmake --preset release | { grep "^-- fluxion:" || true; }
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/bin/fashion_mnist

# ctest runs JOBS test programs at once, each with threads of its own: more threads than cores, where
# OpenMP's default of spinning while idle made steps up to 80 times slower (README, "Threads").
test: build
	cd $(BUILD) && OMP_WAIT_POLICY=passive ctest --output-on-failure -j$(JOBS) --timeout 900

# Every test under AddressSanitizer and UndefinedBehaviorSanitizer (the `dev` preset; its test preset
# sets OMP_WAIT_POLICY=passive and LeakSanitizer's suppressions for the Vulkan driver, tests/lsan.supp).
sanitize: setup
	cmake --preset dev | { grep "^-- fluxion:" || true; }
	cmake --build build/dev -j$(JOBS)
	ctest --preset dev -j$(JOBS) --timeout 1800

# The threaded parts under ThreadSanitizer (the `tsan` preset): the threads stress test and the tests
# of the data loader's prefetching, devices and their queues, backends and their allocators, training,
# and the Vulkan plugin's own (its queue, staging and allocator, on lavapipe under the validation layer);
# of test_ops, every op on Vulkan against the CPU (its PyTorch and finite-difference cases run on the
# CPU alone, in one thread).
TSAN_TESTS := test_threads_stress test_data test_device test_io_devices test_backends test_train test_vulkan
tsan: setup
	cmake --preset tsan | { grep "^-- fluxion:" || true; }
	cmake --build build/tsan -j$(JOBS) --target $(TSAN_TESTS) test_ops
	ctest --preset tsan -j$(JOBS) --timeout 1800 -L '^($(subst $() ,|,$(TSAN_TESTS)))$$'
	ctest --preset tsan -j$(JOBS) --timeout 1800 -L '^test_ops$$' -R 'OtherBackendsMatchCpu'

# Side-by-side benchmarks against PyTorch (Debian's, and the current one from pip) and JAX (pip);
# figures go to BENCHMARKS.md by hand.
bench: setup
	python3 -c 'import torch, jax' 2>/dev/null || python3 -m pip install --quiet torch 'jax[cpu]'
	cmake --preset bench | { grep "^-- fluxion:" || true; }
	cmake --build build/bench -j$(JOBS)
	python3 bench/compare.py build/bench

# The README's `make test` on a bare Debian 12 root made by debootstrap (as root; see the script).
fresh-check:
	bash scripts/fresh-machine-check.sh test

# The release build packed for a lent GPU machine (gpu-bundle/fluxion-gpu.tar.xz, with Fashion-MNIST's
# files beside it), which scripts/gpu-check.sh unpacks and runs there (README, "GPU machines").
gpu-bundle: build
	bash scripts/gpu-bundle.sh $(BUILD) gpu-bundle/fluxion-gpu.tar.xz
	@# Fashion-MNIST recompressed with xz: 26 MB where gzip's are 31, so that the bundle, the data and
	@# the source tree fit the 64 MiB a lent machine's call carries.
	mkdir -p gpu-bundle/data && rm -f gpu-bundle/data/*.gz && for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do \
	  gzip -dc "$$f" | xz -T0 -9 > gpu-bundle/data/$$(basename "$$f" .gz).xz; done

clean:
	rm -rf build
