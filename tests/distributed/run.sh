#!/usr/bin/env bash
# Runs a program under `mpirun -np N` on this machine (loopback, oversubscribed): run.sh N program args...
# Exit 77 (CTest's skip) when mpirun is absent.
set -uo pipefail
np=$1; shift
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77
fi
# Shared memory between the ranks; no single-copy mechanism, which containers often forbid.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export FLUXION_NUM_THREADS=1
# In sanitized builds (make sanitize): Open MPI's components leak at exit and are unloaded before
# LeakSanitizer reports, so their frames cannot be suppressed by name; memory errors still abort.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
exec mpirun -np "$np" "$@"
