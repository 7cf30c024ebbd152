#!/usr/bin/env bash
# examples/fashion_mnist --distributed on 2 ranks, one short epoch: rank 0 alone prints the global
# throughput and saves the model. example.sh program
set -uo pipefail
here=$(dirname "$0")
data=${FLUXION_DATA:-/usr/share/datasets/fashion-mnist}
if [ ! -d "$data" ]; then
  echo "SKIP: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist, or set FLUXION_DATA)"; exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
output=$(bash "$here/run.sh" 2 "$1" --distributed --epochs 1 --test-limit 1000 --limit 2000 --out "$out" 2>&1)
rc=$?
echo "$output"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
[ "$(grep -c 'images/s over 2 processes' <<<"$output")" -eq 1 ] || { echo "FAIL: not one epoch line from rank 0 alone"; exit 1; }
[ -s "$out/fashion_mnist.safetensors" ] || { echo "FAIL: the model was not saved"; exit 1; }
echo "PASS"
