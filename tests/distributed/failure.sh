#!/usr/bin/env bash
# A rank that fails mid-step (an uncaught exception, exit, or a hang) must end the whole job with
# an error within a time limit, never leave the others waiting: failure.sh throw|exit|hang scenarios
set -uo pipefail
here=$(dirname "$0")
how=$1 scenarios=$2
limit=60
export FLUXION_DISTRIBUTED_TIMEOUT=5  # how long the surviving rank waits in a collective
start=$(date +%s)
output=$(timeout $limit bash "$here/run.sh" 2 "$scenarios" fail "$how" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$output"
echo "failure.sh: mpirun exited with $rc after ${elapsed} s"
[ $rc -eq 77 ] && exit 77
if [ $rc -eq 124 ]; then echo "FAIL: the job still ran after $limit s: a rank hangs"; exit 1; fi
if [ $rc -eq 0 ]; then echo "FAIL: the job reported success although rank 1 failed"; exit 1; fi
if grep -q "which it should not have" <<<"$output"; then echo "FAIL: a rank finished training alone"; exit 1; fi
case $how in
  throw) expected="injected failure on rank 1" ;;
  exit) expected="did not take part within 5 s" ;;  # rank 1 waits in MPI_Finalize: rank 0's timeout ends it
  hang) expected="did not take part within 5 s" ;;
esac
grep -qF "$expected" <<<"$output" || { echo "FAIL: the output does not say '$expected'"; exit 1; }
echo "PASS"
