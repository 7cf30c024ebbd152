#!/usr/bin/env bash
# Data-parallel scaling from 1 to 2 processes (one thread each) on this machine: fluxion on MPI
# beside PyTorch DDP with Gloo, same models, same global batches. Efficiency = rate(2) / (2 rate(1)).
# fluxion-plain averages after the backward pass instead of during it (AverageGradients::overlap).
# usage: bench/distributed/scaling.sh [BUILD_DIR] [ROUNDS]   (default build/release, 3 rounds;
# each figure is the best of its rounds, as in bench/compare.py, since shared machines drift)
set -euo pipefail
here=$(dirname "$0")
build=${1:-build/release} rounds=${2:-3}
python=${PYTHON:-/usr/bin/python3}  # Debian's python3-torch
export FLUXION_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
declare -A best
keep() { local k="$1 $2 $3"; if [[ -z ${best[$k]:-} || $4 -gt ${best[$k]} ]]; then best[$k]=$4; fi; }
for _ in $(seq "$rounds"); do
  for model in lenet5:300 wide:40; do
    name=${model%:*} steps=${model#*:}
    for np in 1 2; do
      read -r _ _ rate < <(mpirun --bind-to none -np $np "$build/bin/bench_distributed_scaling" $name $steps)
      keep fluxion $name $np $rate
      read -r _ _ rate < <(mpirun --bind-to none -np $np "$build/bin/bench_distributed_scaling" $name $steps plain)
      keep fluxion-plain $name $np $rate
      read -r _ _ rate < <("$python" "$here/scaling_torch.py" $name $steps $np 2>/dev/null)
      keep pytorch $name $np $rate
    done
  done
done
echo "| model | library | 1 process (images/s) | 2 processes (images/s) | efficiency |"
echo "| --- | --- | --- | --- | --- |"
for name in lenet5 wide; do
  for lib in fluxion fluxion-plain pytorch; do
    one=${best[$lib $name 1]} two=${best[$lib $name 2]}
    echo "| $name | $lib | $one | $two | $(( 100 * two / (2 * one) ))% |"
  done
done
