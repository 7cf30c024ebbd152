#!/usr/bin/env bash
# One of fluxion's fuzz targets (fuzz/), short form: builds fuzz_NAME with clang's libFuzzer, ASan
# and UBSan into BUILD/fuzz and runs it for SECONDS over the seed corpus fuzz/corpus/NAME (with the
# dictionary fuzz/NAME.dict where there is one). A crash, a leak or an out-of-bounds access fails
# the test and leaves the input in BUILD/fuzz/NAME/crashes/. Exit 77 (skipped), saying which, only
# where the toolchain lacks what fuzzing needs: no clang++, or a clang++ that cannot link libFuzzer.
# A target that fails to configure or build fails the test with the compiler's output: a reader
# whose fuzz target no longer builds is not fuzzed, and that must not look like a skip. The targets
# share one build folder, so CTest may run several at once: configuring and building hold a lock on it.
set -euo pipefail
src=$1 build=$2 name=$3 seconds=${4:-30}
out=$build/fuzz
mkdir -p "$out"
command -v clang++ >/dev/null || { echo "skipped: clang++ is not installed (apt-get install clang libclang-rt-14-dev)"; exit 77; }
status=0
(
  flock 9
  if [ ! -x "$out/probe" ]; then
    echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > "$out/probe.cpp"
    if ! clang++ -fsanitize=fuzzer "$out/probe.cpp" -o "$out/probe" > "$out/probe.log" 2>&1; then
      cat "$out/probe.log"
      echo "skipped: $(command -v clang++) ($(clang++ --version | head -n 1)) cannot link libFuzzer (apt-get install libclang-rt-14-dev)"
      exit 77
    fi
  fi
  # Each step's failure ends the subshell by hand: set -e does not hold inside a subshell that is
  # the left side of ||, and a failed configure would otherwise leave an old target to run.
  cmake -S "$src/fuzz" -B "$out" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$out/configure.log" 2>&1 ||
    { cat "$out/configure.log"; echo "FAILED: the fuzz targets do not configure (above)"; exit 1; }
  rm -f "$out/fuzz_$name"
  cmake --build "$out" --target "fuzz_$name" > "$out/build-$name.log" 2>&1 ||
    { cat "$out/build-$name.log"; echo "FAILED: fuzz_$name does not build (above)"; exit 1; }
) 9>"$out/.lock" || status=$?
[ "$status" -eq 0 ] || exit "$status"
run=$out/$name
rm -rf "$run"
mkdir -p "$run/corpus" "$run/crashes"
dict=()
[ -f "$src/fuzz/$name.dict" ] && dict=(-dict="$src/fuzz/$name.dict")
status=0
"$out/fuzz_$name" -max_total_time="$seconds" "${dict[@]}" -artifact_prefix="$run/crashes/" -print_final_stats=1 \
  "$run/corpus" "$src/fuzz/corpus/$name" > "$run/log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then cat "$run/log"; exit "$status"; fi
tail -n 6 "$run/log"
