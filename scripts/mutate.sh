#!/usr/bin/env bash
# Mutation testing: applies each mutant of scripts/mutants.tsv to the source, one at a time,
# builds only the test programs that should catch it, runs them, restores the file, and prints
# whether the tests caught ("killed") the mutant, then the kill rate. Every mutant should be
# killed; a survivor is a gap in the tests (RELIABILITY.md, "Mutants").
#   scripts/mutate.sh [--check] [REGEX]
# REGEX picks the mutants by name (all by default); --check only verifies that each mutant's text
# is found exactly once, without building. BUILD (build/release, configured) and JOBS (2) may be
# set: on a machine without a GPU, a build configured with -DFLUXION_CUDA=OFF spares the mutants of
# the shared formulas their CUDA kernels (which no test runs there). EVERY=1 runs all of a mutant's
# tests, not only up to the first that fails, and names each that catches it: what its line in
# scripts/mutants.tsv should list. A mutant that does not build is reported as such and counted apart, not as killed. Each set
# of tests is first run once without a mutant: tests that fail already would "kill" anything.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/release} jobs=${JOBS:-2} check=0
[ "${1:-}" = "--check" ] && { check=1; shift; }
pick=${1:-.}
[ "$check" -eq 1 ] || [ -f "$build/CMakeCache.txt" ] || { echo "configure $build first (cmake --preset release)"; exit 2; }
mkdir -p "$build/mutate"
work=$(cd "$build/mutate" && pwd)  # absolute: the tests run in $build/tests

# Replaces the one occurrence of OLD in FILE by NEW (exact text); exit 3 unless found exactly once.
replace() {
  python3 - "$@" <<'PY'
import sys
path, old, new, dry = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
text = open(path, encoding="utf-8").read()
if text.count(old) != 1:
    print(f"  {path}: the mutant's text is found {text.count(old)} times, not once: {old!r}")
    sys.exit(3)
if not dry:
    open(path, "w", encoding="utf-8").write(text.replace(old, new, 1))
PY
}

restore_file=""
restore() { [ -n "$restore_file" ] && cp -p "$work/original" "$restore_file" && touch "$restore_file"; restore_file=""; }
trap restore EXIT
trap 'echo "interrupted: the mutated file is restored"; exit 130' INT TERM

# Builds the programs of TESTS (BINARY:FILTER ...) and runs them; prints the first that fails, if
# any, with the tests that failed (with EVERY=1, each that fails). Exit 1 where the build fails.
build_and_run() {
  local label=$1 tests=$2 binaries=() t binary filter status log failed
  for t in $tests; do binaries+=("${t%%:*}"); done
  cmake --build "$build" -j"$jobs" --target "${binaries[@]}" > "$work/$label.build.log" 2>&1 < /dev/null || return 1
  for t in $tests; do
    binary=${t%%:*} filter='*'
    [[ "$t" == *:* ]] && filter=${t#*:}
    status=0 log="$work/$label.$binary.log"
    (cd "$build/tests" && OMP_WAIT_POLICY=passive FLUXION_NUM_THREADS=2 timeout 900 \
      "../bin/$binary" --gtest_filter="$filter") > "$log" 2>&1 || status=$?
    # gtest exits 1 on a failed test; a crash (signal), a timeout (124) or an abort count too.
    if [ "$status" -ne 0 ]; then
      # gtest's summary names each failed test once, after its last "[==========]" line
      failed=$(awk '/^\[==========\]/ { summary = 1 } summary && /^\[  FAILED  \] [A-Za-z]/ { sub(/,$/, "", $4); print $4 }' "$log" |
        sort -u | awk '{ n++; if (n <= 4) s = s (n > 1 ? " " : "") $0 } END { if (n > 4) s = s " and " n - 4 " more"; print s }')
      echo "$binary ($filter), exit $status${failed:+: $failed}"
      [ "${EVERY:-0}" = 1 ] || return 0
    fi
  done
}

declare -A baseline  # TESTS -> "ok" once they pass without a mutant (else every mutant would look killed)
ran=0 killed=0 unbuilt=0 stale=0 broken=0 survivors=()
while IFS=$'\t' read -r name file old new tests; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  [[ "$name" =~ $pick ]] || continue
  if ! replace "$file" "$old" "$new" 1; then stale=$((stale + 1)); continue; fi
  [ "$check" -eq 1 ] && { echo "ok      $name"; continue; }
  start=$SECONDS
  if [ -z "${baseline[$tests]:-}" ]; then
    if ! failed=$(build_and_run "baseline" "$tests") || [ -n "$failed" ]; then
      echo "BROKEN  $name: its tests fail without the mutant (${failed:-the build fails}; $work/baseline.*.log)"
      broken=$((broken + 1)); continue
    fi
    baseline[$tests]=ok
  fi
  cp -p "$file" "$work/original"
  restore_file=$file
  replace "$file" "$old" "$new" 0
  if ! caught=$(build_and_run "$name" "$tests"); then
    echo "UNBUILT $name (does not compile: $work/$name.build.log)"
    unbuilt=$((unbuilt + 1)); restore; continue
  fi
  restore
  ran=$((ran + 1))
  if [ -n "$caught" ]; then
    killed=$((killed + 1)); echo "killed  $name by ${caught//$'\n'/; }, $((SECONDS - start)) s"
  else
    survivors+=("$name"); echo "SURVIVED $name ($tests), $((SECONDS - start)) s"
  fi
done < scripts/mutants.tsv

[ "$stale" -eq 0 ] || echo "$stale mutant(s) no longer match the source: mend scripts/mutants.tsv"
[ "$check" -eq 1 ] && exit $((stale > 0))
echo "killed $killed of $ran mutants ($(( ran ? 100 * killed / ran : 0 ))%); $unbuilt did not build, $broken not run (tests failing without them)"
echo "(the sources are restored; the binaries last built hold a mutant until they are built again)"
[ "${#survivors[@]}" -eq 0 ] || echo "survivors: ${survivors[*]}"
[ "$killed" -eq "$ran" ] && [ "$unbuilt" -eq 0 ] && [ "$stale" -eq 0 ] && [ "$broken" -eq 0 ]
