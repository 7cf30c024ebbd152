#!/usr/bin/env bash
# The README's TensorBoard picture: trains the demo with --logdir, serves the logs with a real
# `tensorboard` on the loopback address and photographs its scalars page with headless Chromium.
# Needs a built tree (make build), Debian's `chromium` and PyPI's `tensorboard` for python3.
# Usage: scripts/tensorboard-screenshot.sh [build dir] [output png]
set -euo pipefail
build=${1:-build/release}
out=${2:-docs/images/tensorboard_scalars.png}
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)"; exit 1; }
python3 -c 'import tensorboard' || { echo "needs tensorboard for python3 (python3 -m pip install tensorboard)"; exit 1; }

work=$(mktemp -d)
port=16006
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
"$build/bin/fashion_mnist" --out "$work" --logdir "$work/runs/lenet5"
python3 -m tensorboard.main --logdir "$work/runs" --host 127.0.0.1 --port $port >"$work/tensorboard.log" 2>&1 &
server=$!
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/data/runs" | grep -q lenet5 && break; sleep 1; done
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1000 \
  --virtual-time-budget=15000 --screenshot="$PWD/$out" "http://127.0.0.1:$port/#scalars" 2>/dev/null
echo "wrote $out: look at it before committing it"
