#!/usr/bin/env bash
# The safetensors reader's fuzz target (fuzz/), short form: builds it with clang's libFuzzer, ASan
# and UBSan into BUILD/fuzz and runs it for SECONDS over the seed corpus. A crash, a leak or an
# out-of-bounds read fails the test and leaves the input in BUILD/fuzz/crashes/. Exit 77 (skipped)
# where clang or libFuzzer is missing.
set -euo pipefail
src=$1 build=$2 seconds=${3:-30}
out=$build/fuzz
mkdir -p "$out"
command -v clang++ >/dev/null || { echo "skipped: clang++ is not installed (apt-get install clang libclang-rt-14-dev)"; exit 77; }
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > "$out/probe.cpp"
clang++ -fsanitize=fuzzer "$out/probe.cpp" -o "$out/probe" 2>/dev/null ||
  { echo "skipped: clang++ cannot link libFuzzer (apt-get install libclang-rt-14-dev)"; exit 77; }
cmake -S "$src/fuzz" -B "$out" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$out" >/dev/null
rm -rf "$out/corpus" "$out/crashes"
mkdir -p "$out/corpus" "$out/crashes"
status=0
"$out/fuzz_safetensors" -max_total_time="$seconds" -dict="$src/fuzz/safetensors.dict" \
  -artifact_prefix="$out/crashes/" -print_final_stats=1 "$out/corpus" "$src/fuzz/corpus" > "$out/log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then cat "$out/log"; exit "$status"; fi
tail -n 6 "$out/log"
