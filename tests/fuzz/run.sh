#!/usr/bin/env bash
# One of fluxion's fuzz targets (fuzz/), short form: runs BUILD/fuzz/fuzz_NAME, built by build.sh (the
# fixture CTest runs first), for SECONDS over the seed corpus fuzz/corpus/NAME (with the dictionary
# fuzz/NAME.dict where there is one). A crash, a leak or an out-of-bounds access fails the test and
# leaves the input in BUILD/fuzz/NAME/crashes/. Skipped (77) where build.sh was, for its reason.
set -euo pipefail
src=$1 build=$2 name=$3 seconds=${4:-30}
out=$build/fuzz
if [ -f "$out/skipped" ]; then cat "$out/skipped"; exit 77; fi
[ -x "$out/fuzz_$name" ] || { echo "FAILED: $out/fuzz_$name is not built (the test fuzz.build builds it)"; exit 1; }
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
