#!/usr/bin/env bash
# Builds every fuzz target of fuzz/ with clang's libFuzzer, ASan and UBSan into BUILD/fuzz, once, for
# the fuzz.*_reader_short tests that run them (CTest's fixture `fuzz_targets`: tests/CMakeLists.txt).
# Exit 77 (skipped), saying which, only where the toolchain lacks what fuzzing needs: no clang++, or a
# clang++ that cannot link libFuzzer; the reason is left in BUILD/fuzz/skipped for run.sh to repeat.
# A target that fails to configure or build fails this test with the compiler's output, and CTest then
# runs none of the fuzz tests: a reader whose fuzz target no longer builds is not fuzzed, and that must
# not look like a skip.
set -euo pipefail
src=$1 build=$2
out=$build/fuzz
mkdir -p "$out"
rm -f "$out/skipped"
skip() { echo "skipped: $1" | tee "$out/skipped"; exit 77; }
command -v clang++ >/dev/null || skip "clang++ is not installed (apt-get install clang libclang-rt-14-dev)"
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > "$out/probe.cpp"
if ! clang++ -fsanitize=fuzzer "$out/probe.cpp" -o "$out/probe" > "$out/probe.log" 2>&1; then
  cat "$out/probe.log"
  skip "$(command -v clang++) ($(clang++ --version | head -n 1)) cannot link libFuzzer (apt-get install libclang-rt-14-dev)"
fi
cmake -S "$src/fuzz" -B "$out" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$out/configure.log" 2>&1 ||
  { cat "$out/configure.log"; echo "FAILED: the fuzz targets do not configure (above)"; exit 1; }
cmake --build "$out" -j "$(nproc)" > "$out/build.log" 2>&1 ||
  { cat "$out/build.log"; echo "FAILED: the fuzz targets do not build (above)"; exit 1; }
echo "built: $(cd "$out" && ls fuzz_* | tr '\n' ' ')"
