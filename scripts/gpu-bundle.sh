#!/usr/bin/env bash
# gpu-bundle.sh — packs a release build for a GPU machine that has a driver, CUDA's libraries and a
# python3 with PyTorch, but none of this project's Debian packages and no package manager.
#
# usage: bash scripts/gpu-bundle.sh [BUILD_DIR] [OUT_FILE]
#        (default build/release and gpu-bundle/fluxion-gpu.tar.xz; `make gpu-bundle` builds first)
#
# The bundle holds the build's programs and libraries, stripped, and under bundle-runtime/ the
# shared libraries they need that such a machine may lack: every library ldd resolves outside glibc
# and the CUDA libraries, plus Vulkan's loader, the Khronos validation layer and OpenBLAS, which are
# opened at run time and so invisible to ldd. cuBLAS, cuDNN, NCCL and the driver are left out on
# purpose: they are the GPU machine's own (scripts/gpu-check.sh finds them), and they would not
# fit. scripts/gpu-check.sh unpacks it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
OUT_FILE=${2:-gpu-bundle/fluxion-gpu.tar.xz}
ROOT=$(pwd)
[ -x "$BUILD/bin/fashion_mnist" ] || { echo "gpu-bundle: no build in $BUILD (make build first)" >&2; exit 1; }
ls "$BUILD"/lib/libfluxion-cuda.so >/dev/null || { echo "gpu-bundle: $BUILD has no CUDA plugin" >&2; exit 1; }

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
# The build relative to the source tree; the programs' compiled-in absolute paths (the source and
# build folders) are recorded in bundle-root, which gpu-check.sh links to the tree it runs in.
DEST="$STAGE/tree/$BUILD"
mkdir -p "$DEST" "$STAGE/runtime"
for d in bin lib testplugins testplugins-device; do
  [ -d "$BUILD/$d" ] && cp -a "$BUILD/$d" "$DEST/"
done
# The test programs' data beside the build (tests/, bench/, examples/ travel as source).
find "$DEST" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'file -b "$1" | grep -q ELF && strip --strip-unneeded "$1"' _ {} \;

# Libraries that a machine with only glibc, a driver and CUDA's own libraries lacks.
keep_out='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libcuda|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvidia-[a-z]*|linux-vdso)\.so'
ldd_libs() { find "$DEST" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'file -b "$1" | grep -q ELF && ldd "$1"' _ {} \; 2>/dev/null \
  | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u; }
# OpenBLAS too: libfluxion opens it itself (src/cpu/openblas.cpp), so ldd does not list it.
for lib in $(ldd_libs) /usr/lib/x86_64-linux-gnu/libvulkan.so.1 /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so \
           /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0; do
  base=$(basename "$lib")
  [[ "$base" =~ $keep_out ]] && continue
  case "$lib" in "$ROOT"/*) continue ;; esac  # the build's own
  cp -L "$lib" "$STAGE/runtime/$base"
done
# The libraries these pull in (OpenMPI's, oneDNN's), one level deeper.
for lib in "$STAGE"/runtime/*; do
  ldd "$lib" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ "$base" =~ $keep_out ]] || [ -e "$STAGE/runtime/$base" ] || cp -L "$lib" "$STAGE/runtime/$base"
done
strip --strip-unneeded "$STAGE"/runtime/*.so* 2>/dev/null || true
mkdir -p "$STAGE/runtime/vulkan-layers"
sed 's#"library_path": *"[^"]*"#"library_path": "../libVkLayer_khronos_validation.so"#' \
  /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json > "$STAGE/runtime/vulkan-layers/VkLayer_khronos_validation.json"
# The C++ runtime goes to fallback/, used only where the machine has none: a newer one there must win.
mkdir -p "$STAGE/runtime/fallback"
for base in libstdc++.so.6 libgcc_s.so.1; do
  [ -e "$STAGE/runtime/$base" ] && mv "$STAGE/runtime/$base" "$STAGE/runtime/fallback/"
done
# libglvnd, which NVIDIA's Vulkan driver (libGLX_nvidia.so.0) needs, to glvnd/: used where the
# machine has none. With their own needs (X11's client libraries), glibc's left out.
mkdir -p "$STAGE/runtime/glvnd"
for lib in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libGL.so.1 libOpenGL.so.0; do
  src=/usr/lib/x86_64-linux-gnu/$lib
  [ -e "$src" ] || { echo "gpu-bundle: no $src (apt-get install libglvnd0 libglx0 libegl1 libgl1 libopengl0)" >&2; exit 1; }
  cp -L "$src" "$STAGE/runtime/glvnd/"
  ldd "$src" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r dep; do
    base=$(basename "$dep")
    [[ "$base" =~ $keep_out ]] || [ -e "$STAGE/runtime/glvnd/$base" ] || cp -L "$dep" "$STAGE/runtime/glvnd/"
  done
done
mv "$STAGE/runtime" "$DEST/bundle-runtime"
echo "$ROOT" > "$DEST/bundle-root"

mkdir -p "$(dirname "$OUT_FILE")"
tar -C "$STAGE/tree" -cf - . | xz -T0 -9 > "$OUT_FILE"
cp "$(command -v xz)" "$(dirname "$OUT_FILE")/xz"  # for a machine without the xz command (gpu-check.sh)
size=$(stat -c %s "$OUT_FILE")
echo "gpu-bundle: $OUT_FILE, $((size / 1048576)) MiB ($(tar -tJf "$OUT_FILE" | grep -c -v '/$') files)"
[ "$size" -le $((40 * 1048576)) ] || { echo "gpu-bundle: larger than 40 MiB" >&2; exit 1; }
