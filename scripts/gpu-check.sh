#!/usr/bin/env bash
# gpu-check.sh — the prepared check for a lent GPU machine (issue 24): unpacks the bundle that
# `make gpu-bundle` made (scripts/gpu-bundle.sh), runs the parts asked for, each within its time
# budget, writes one file per part under $OUT (at most 8 files) and prints a short summary last.
#
# usage: bash scripts/gpu-check.sh [PART...]      (default: every part, in this order)
#   probe     the machine: nvidia-smi, driver, glibc, where cuBLAS/cuDNN/Vulkan live, the backends
#   cuda      every test program with CUDA present (Vulkan hidden)
#   nocudnn   the convolution-heavy cross-backend programs on CUDA with cuDNN off (im2col + GEMM)
#   vulkan    the cross-backend test programs on NVIDIA's Vulkan driver (CUDA hidden), validation on
#   sanitizer compute-sanitizer memcheck over the op tests, racecheck over a short subset
#   fashion   fashion_mnist --device CUDA (FASHION_DEVICE), 8 epochs (FLUXION_DATA or gpu-bundle/data)
#   bench     bench/compare.py: fluxion on CPU, CUDA and Vulkan beside PyTorch and JAX
#   profile   where CUDA's time goes in PROFILE_CASES (default the LSTM and encoder steps, eager and
#             compiled): nsys's kernel and API summaries, else ncu's per-kernel durations
#   fluxion   bench_models alone on the cases FLUXION_BENCH_FILTER matches (default every CUDA case)
#   convs     the convolution steps on CUDA with cuDNN's choices printed (FLUXION_CUDNN_VERBOSE), then
#             the same steps with cuDNN off (im2col + GEMM)
#   cpu       bench_models' CPU cases at 1, 2, 4, 8 and 16 threads
# A part's budget can be changed with BUDGET_<part>=seconds; TESTS="test_a test_b" runs only those
# programs in the parts cuda and vulkan (a rerun of what failed). Without a GPU (the fresh-machine check)
# CUDA reports "no driver" and every part still runs; the summary says what ran where.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
OUT=${OUT:-$REPO/gpu-check-out}
mkdir -p "$OUT"
BUNDLE=${BUNDLE:-gpu-bundle/fluxion-gpu.tar.xz}
BUILD=build/release
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(probe cuda vulkan sanitizer fashion bench cpu)
declare -A BUDGET=([probe]=40 [cuda]=150 [nocudnn]=60 [vulkan]=100 [sanitizer]=60 [fashion]=45 [bench]=120 [profile]=150 [fluxion]=90 [convs]=60 [cpu]=60)
SUMMARY=()
say() { SUMMARY+=("$*"); }

# --- the bundle, unpacked into this tree; its programs' compiled-in root linked to it -------------
# The bundle's own xz (Debian's, beside it) where the machine has none: a bare Debian root has
# liblzma but not the xz command.
XZ=$(command -v xz || echo "$(dirname "$BUNDLE")/xz")
if [ ! -x "$BUILD/bin/fashion_mnist" ] || [ "$BUNDLE" -nt "$BUILD/bundle-root" ]; then
  [ -f "$BUNDLE" ] || { echo "gpu-check: no $BUNDLE and no $BUILD (make gpu-bundle)" >&2; exit 1; }
  "$XZ" -dc "$BUNDLE" | tar -xf - || { echo "gpu-check: cannot unpack $BUNDLE" >&2; exit 1; }
  touch "$BUILD/bundle-root"
fi
BUILT_AT=$(cat "$BUILD/bundle-root" 2>/dev/null || echo "$REPO")
if [ "$BUILT_AT" != "$REPO" ] && [ ! -e "$BUILT_AT" ]; then mkdir -p "$(dirname "$BUILT_AT")"; ln -s "$REPO" "$BUILT_AT"; fi
RT=$REPO/$BUILD/bundle-runtime

# --- where this machine keeps what the bundle leaves out ------------------------------------------
find_lib() {  # the folder of the first $1 found: ld.so's cache, then CUDA's and Python's usual places
  local p
  p=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n {print $NF; exit}')
  [ -n "$p" ] || p=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name "$1" 2>/dev/null | head -1)
  [ -n "$p" ] && dirname "$p"
}
LIBS=$RT
for l in libstdc++.so.6 libgcc_s.so.1; do ldconfig -p | grep -q "^[[:space:]]*$l " || LIBS=$LIBS:$RT/fallback; done
ldconfig -p | grep -q "^[[:space:]]*libGLdispatch.so.0 " || LIBS=$LIBS:$RT/glvnd
CUBLAS_DIR=$(find_lib libcublas.so.13); CUDNN_DIR=$(find_lib libcudnn.so.9); NCCL_DIR=$(find_lib libnccl.so.2)
for d in $CUBLAS_DIR $CUDNN_DIR $NCCL_DIR; do LIBS=$LIBS:$d; done
ORIGINAL_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NV_ICD=""
for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
         /etc/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/etc/vulkan/icd.d/nvidia_icd.json; do
  [ -f "$f" ] && { NV_ICD=$f; break; }
done
export VK_LAYER_PATH=$RT/vulkan-layers FLUXION_VULKAN_VALIDATION=1
BIN=$REPO/$BUILD/bin
PY=$(command -v python3)
DATA=${FLUXION_DATA:-$REPO/gpu-bundle/data}
# The kernels with shared memory and warp shuffles: reductions, softmax and the other row-wise ops.
RACECHECK_FILTER=${RACECHECK_FILTER:-'*OtherBackendsMatchCpu/sum*:*OtherBackendsMatchCpu/max*:*OtherBackendsMatchCpu/mean*:*OtherBackendsMatchCpu/*softmax*:*OtherBackendsMatchCpu/logsumexp*'}

budget() { echo "${!1:-${BUDGET[$2]}}"; }  # BUDGET_<part> or the default
deadline_left() { echo $(( DEADLINE - $(date +%s) )); }

# Runs test programs $2.. in parallel (6 at a time) with the environment in $1, each under what is
# left of the part's budget; prints one line per program and the failed tests' names.
run_tests() {
  local envs=$1; shift
  local tmp; tmp=$(mktemp -d)
  printf '%s\n' "$@" | xargs -P 6 -I{} bash -c '
    left=$(( '"$DEADLINE"' - $(date +%s) )); [ $left -gt 5 ] || { echo "{}: no time left" > '"$tmp"'/{}.log; exit 0; }
    env '"$envs"' OMP_WAIT_POLICY=passive FLUXION_NUM_THREADS=2 timeout -k 5 $left '"$BIN"'/{} --gtest_brief=1 > '"$tmp"'/{}.log 2>&1
    echo "rc=$?" >> '"$tmp"'/{}.log'
  local pass=0 fail=0
  for t in "$@"; do
    local rc; rc=$(grep -o '^rc=[0-9]*' "$tmp/$t.log" | tail -1 | cut -d= -f2)
    local n; n=$(grep -c '^\[  FAILED  \]' "$tmp/$t.log")
    local total; total=$(grep -o '^\[==========\] [0-9]* tests\? from' "$tmp/$t.log" | grep -o '[0-9]*' | head -1)
    echo "=== $t: rc=${rc:-none} tests=${total:-?} failed-lines=$n"
    cat "$tmp/$t.log"
    if [ "${rc:-1}" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
  done
  echo "RESULT programs passed=$pass failed=$fail"
  rm -rf "$tmp"
}
CROSS=(test_kernel_contract test_backends test_ops test_ops_strided test_ops_zero_size test_ops_promotion test_ops_attention
       test_half test_half_models test_layers_attention test_layers_recurrent test_mixed_precision_compiled
       test_compile_devices test_fused_kernels test_io_devices test_threads_stress)

unpack_data() {  # the bundle's Fashion-MNIST is recompressed with xz (Makefile): unpacked for the example
  [ -f "$DATA/train-images-idx3-ubyte.xz" ] || return 0
  local raw=/tmp/fashion-data f
  mkdir -p $raw
  for f in "$DATA"/*-ubyte.xz; do [ -f "$raw/$(basename "$f" .xz)" ] || "$XZ" -dc "$f" > "$raw/$(basename "$f" .xz)"; done
  DATA=$raw
}

part_probe() {
  unpack_data
  echo "## date"; date -u; uname -a
  echo "## nvidia-smi"; nvidia-smi 2>&1 | head -25
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm --format=csv 2>&1
  echo "## glibc"; ldd --version 2>&1 | head -1
  echo "## cpu"; grep -m1 'model name' /proc/cpuinfo; nproc
  echo "## python"; [ -n "$PY" ] && $PY -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1 || echo "no python3 with PyTorch"
  echo "## libraries"; echo "cuBLAS: ${CUBLAS_DIR:-not found}"; echo "cuDNN: ${CUDNN_DIR:-not found}"
  echo "system libvulkan: $(ldconfig -p | grep -m1 libvulkan.so.1 || echo none)"; echo "NVIDIA ICD: ${NV_ICD:-not found}"
  echo "system libstdc++: $(ldconfig -p | grep -m1 'libstdc++.so.6' || echo none)"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "## ldd of the plugins"; for f in "$REPO/$BUILD"/lib/*.so "$BIN/fashion_mnist"; do echo "$f"; ldd "$f" | grep -E 'not found|cublas|cudnn|vulkan|stdc'; done
  echo "## the default device, and why (fashion_mnist, one epoch on 512 images)"
  VK_DRIVER_FILES=${NV_ICD:-/none} FLUXION_DATA=$DATA timeout 60 "$BIN/fashion_mnist" --epochs 1 --limit 512 --test-limit 512 \
    --out /tmp/fashion-probe 2>&1 | head -12
  echo "## the seed's forward on each device (gpu_vs_cpu 200)"
  VK_DRIVER_FILES=${NV_ICD:-/none} timeout 60 "$BIN/gpu_vs_cpu" 200 2>&1 | tail -20
}

part_cuda() {  # every test program; Vulkan hidden so that CUDA is the only other backend
  local all=()
  for f in "$BIN"/test_*; do  # the collectives' test runs under mpirun (tests/distributed), not here
    [ "$(basename "$f")" = test_distributed_collectives ] || all+=("$(basename "$f")"); done
  [ -z "${TESTS:-}" ] || read -ra all <<< "$TESTS"
  run_tests "VK_DRIVER_FILES=/nonexistent.json" "${all[@]}"
}

part_nocudnn() {  # CUDA's own convolutions, the path taken where cuDNN is missing or fails
  run_tests "VK_DRIVER_FILES=/nonexistent.json FLUXION_CUDA_DISABLE_CUDNN=1" test_kernel_contract test_ops test_half \
    test_half_models test_ops_strided test_mixed_precision_compiled
}

part_vulkan() {  # the cross-backend programs on NVIDIA's Vulkan driver, CUDA hidden
  [ -n "$NV_ICD" ] || echo "no NVIDIA ICD found: Vulkan runs on whatever the loader finds"
  local programs=("${CROSS[@]}" test_vulkan)
  [ -z "${TESTS:-}" ] || read -ra programs <<< "$TESTS"
  run_tests "CUDA_VISIBLE_DEVICES= VK_DRIVER_FILES=${NV_ICD:-/nonexistent.json}" "${programs[@]}"
}

part_sanitizer() {  # memcheck over the cross-backend cases of MEMCHECK's programs, then racecheck
  command -v compute-sanitizer >/dev/null || { echo "no compute-sanitizer"; return 1; }
  local prog
  for prog in ${MEMCHECK:-test_ops}; do
    echo "## memcheck: $prog (other backends)"
    VK_DRIVER_FILES=/nonexistent.json FLUXION_NUM_THREADS=2 timeout -k 5 $(( $(deadline_left) * 2 / 3 )) compute-sanitizer \
      --tool memcheck --error-exitcode 86 --print-limit 20 "$BIN/$prog" --gtest_brief=1 \
      --gtest_filter="${MEMCHECK_FILTER:-*OtherBackends*:*Contract*}" 2>&1 | tail -40
    echo "RESULT memcheck $prog rc=${PIPESTATUS[0]}"
  done
  echo "## racecheck: test_ops' reductions and softmax on the other backends (short)"
  VK_DRIVER_FILES=/nonexistent.json FLUXION_NUM_THREADS=2 timeout -k 5 $(( $(deadline_left) - 3 )) compute-sanitizer --tool racecheck \
    --error-exitcode 86 --print-limit 20 "$BIN/test_ops" --gtest_brief=1 --gtest_filter="$RACECHECK_FILTER" 2>&1 | tail -30
  echo "RESULT racecheck rc=${PIPESTATUS[0]}"
}

part_fashion() {
  unpack_data
  [ -f "$DATA/train-images-idx3-ubyte.gz" ] || [ -f "$DATA/train-images-idx3-ubyte" ] || { echo "no data in $DATA"; return 1; }
  VK_DRIVER_FILES=/nonexistent.json FLUXION_DATA=$DATA timeout -k 5 "$(deadline_left)" \
    "$BIN/fashion_mnist" --device "${FASHION_DEVICE:-CUDA}" --out /tmp/fashion 2>&1
}

part_bench() {
  # Vulkan timed without the validation layer; one round of 3 repetitions, to fit the budget.
  # PyTorch and JAX with the machine's own library path: the bundle's would hand them another cuDNN.
  VK_DRIVER_FILES=${NV_ICD:-/nonexistent.json} FLUXION_VULKAN_VALIDATION=0 BENCH_REPETITIONS=${BENCH_REPETITIONS:-3} \
    FLUXION_LD_LIBRARY_PATH=$LD_LIBRARY_PATH LD_LIBRARY_PATH=$ORIGINAL_LD_LIBRARY_PATH \
    FLUXION_NUM_THREADS=$(nproc) timeout -k 5 "$(deadline_left)" $PY bench/compare.py "$BUILD" 1 2>&1
}

part_profile() {
  local case tool
  tool=$(command -v nsys || command -v ncu || ls /usr/local/cuda/bin/nsys /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  [ -n "$tool" ] || { echo "neither nsys nor ncu"; return 1; }
  echo "## with $tool"
  for case in ${PROFILE_CASES:-lstm_train_compiled lstm_train encoder_train_compiled encoder_train}; do
    local left; left=$(( $(deadline_left) - 3 )); [ $left -gt 10 ] || { echo "## $case: no time left"; continue; }
    echo "## $case"
    local run=("$BIN/bench_models" "--benchmark_filter=^$case/CUDA/" --benchmark_min_time=0.05)
    if [ "$(basename "$tool")" = nsys ]; then
      VK_DRIVER_FILES=/nonexistent.json timeout -k 5 $left "$tool" profile -o "/tmp/prof-$case" --force-overwrite true \
        --trace cuda "${run[@]}" > /dev/null 2>&1
      "$tool" stats --report cuda_gpu_kern_sum --report cuda_api_sum --format table "/tmp/prof-$case.nsys-rep" 2>&1 |
        cut -c1-220 | grep -v '^ *$' | head -60
    else
      VK_DRIVER_FILES=/nonexistent.json timeout -k 5 $left "$tool" --metrics gpu__time_duration.sum --launch-skip 0 \
        --launch-count 1500 --print-summary per-kernel "${run[@]}" 2>&1 | grep -vE '^(==PROF==|\s*(-+|Section:.*|Metric Name.*)$)' |
        cut -c1-200 | head -400
    fi
  done
}

part_fluxion() {  # quick figures after a change, without the references
  VK_DRIVER_FILES=/nonexistent.json timeout -k 5 $(( $(deadline_left) - 2 )) "$BIN/bench_models" \
    --benchmark_filter="${FLUXION_BENCH_FILTER:-CUDA}" --benchmark_min_time=0.2 --benchmark_min_warmup_time=0.1 2>&1 | grep -E '^[a-z]'
}

part_convs() {  # why the bf16 convolutions are slow (BENCHMARKS.md, "GPU — 2026-11-27")
  local filter='(lenet5|convnet)(_bf16)?_train(_compiled)?/CUDA' left
  left=$(( $(deadline_left) / 2 - 2 ))
  echo "## cuDNN, its choices"
  VK_DRIVER_FILES=/nonexistent.json FLUXION_CUDNN_VERBOSE=1 timeout -k 5 $left "$BIN/bench_models" \
    --benchmark_filter="$filter" --benchmark_min_time=0.2 --benchmark_min_warmup_time=0.1 2>&1 | grep -E '^[a-z]|cuDNN' | sort | uniq -c | sort -rn | cut -c1-600
  echo "## im2col + GEMM (FLUXION_CUDA_DISABLE_CUDNN=1)"
  VK_DRIVER_FILES=/nonexistent.json FLUXION_CUDA_DISABLE_CUDNN=1 timeout -k 5 $(( $(deadline_left) - 2 )) \
    "$BIN/bench_models" --benchmark_filter="$filter" --benchmark_min_time=0.2 --benchmark_min_warmup_time=0.1 2>&1 | grep -E '^[a-z]'
}

part_cpu() {  # how each CPU case scales with threads, fluxion alone (the bench part has PyTorch beside)
  for t in 1 2 4 8 16; do
    [ "$t" -le "$(nproc)" ] || continue
    echo "## $t threads"
    CUDA_VISIBLE_DEVICES= VK_DRIVER_FILES=/nonexistent.json FLUXION_NUM_THREADS=$t timeout -k 5 $(( $(deadline_left) - 2 )) \
      "$BIN/bench_models" --benchmark_filter='CPU' --benchmark_min_time=0.1 2>&1 | grep -E '^[a-z]' 
  done
}

STATUS=0  # 1 when a part failed or a test program failed in it
for part in "${PARTS[@]}"; do
  declare -F "part_$part" >/dev/null || { echo "gpu-check: no part '$part'" >&2; exit 2; }
  b=$(budget "BUDGET_$part" "$part")
  DEADLINE=$(( $(date +%s) + b ))
  start=$(date +%s)
  echo ">>> $part (budget ${b} s)"
  "part_$part" > "$OUT/$part.log" 2>&1
  rc=$?
  grep -qE "^RESULT.*(failed|rc)=[1-9]" "$OUT/$part.log" && rc=1
  [ $rc -eq 0 ] || STATUS=1
  took=$(( $(date +%s) - start ))
  line=$(grep -E '^RESULT|final test accuracy' "$OUT/$part.log" | tr '\n' ' ')
  say "$part: rc=$rc ${took}s ${line}"
done
{
  echo "== gpu-check summary ($(date -u +%FT%TZ))"
  printf '%s\n' "${SUMMARY[@]}"
  for part in "${PARTS[@]}"; do  # the failed tests, by name
    grep -h '^\[  FAILED  \]' "$OUT/$part.log" 2>/dev/null | sort -u | head -40 | sed "s/^/$part /" || true
  done
} | tee "$OUT/summary.txt"
exit $STATUS
