#!/usr/bin/env bash
# Installs what building, testing and the demo need on a fresh Debian machine; does nothing for
# packages already present. Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake pkg-config          # compiler and build
  libopenblas-openmp-dev libdnnl-dev        # BLAS for matmul, oneDNN for convolutions (OpenMP threads)
  ocl-icd-opencl-dev                        # Debian's oneDNN CMake config requires OpenCL's headers and loader
  libgtest-dev libbenchmark-dev             # tests and benchmarks
  zlib1g-dev nlohmann-json3-dev             # .gz data sets, safetensors headers
  libtomlplusplus-dev                       # LocalPreferences.toml (the gpu_backend preference)
  python3 python3-numpy python3-torch python3-torchvision  # PyTorch reference values, interoperability, torchvision models
  clang libclang-rt-14-dev                  # libFuzzer for the safetensors reader's fuzz target
  dataset-fashion-mnist                     # the main job's data
  libopenmpi-dev openmpi-bin                # fluxion::distributed (data-parallel training) and its mpirun tests
  libvulkan-dev glslc                       # the Vulkan backend plugin: headers, loader, shader compiler
  mesa-vulkan-drivers vulkan-validationlayers  # its tests: lavapipe (Vulkan on the CPU), validation
  libprotobuf-dev protobuf-compiler libpng-dev  # TensorBoard's event files (protocol buffers) and PNG images
  libonnx-dev                               # fx::onnx: ONNX's protocol buffers and its checker
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# TensorBoard's own reader checks the event files fluxion writes (tests/test_tensorboard.cpp). It is
# on PyPI only: installed into the python3 on PATH where that python's pip may install; elsewhere
# (Debian's python3 has no pip and refuses one) those tests skip and say so.
if ! python3 -c 'import tensorboard' 2>/dev/null; then
  if python3 -m pip --version >/dev/null 2>&1 && python3 -m pip install --quiet tensorboard >/dev/null 2>&1; then
    echo "setup: installed tensorboard (PyPI) for $(command -v python3)"
  else
    echo "setup: tensorboard not installed for $(command -v python3); test_tensorboard's reading tests will skip"
  fi
fi

# ONNX Runtime runs the models fx::onnx::save writes, and onnx's Python checker checks them
# (tests/test_onnx.cpp); PyPI only, installed as tensorboard is, else those tests skip and say so.
if ! python3 -c 'import onnx, onnxruntime' 2>/dev/null; then
  if python3 -m pip --version >/dev/null 2>&1 && python3 -m pip install --quiet onnx onnxruntime >/dev/null 2>&1; then
    echo "setup: installed onnx and onnxruntime (PyPI) for $(command -v python3)"
  else
    echo "setup: onnx/onnxruntime not installed for $(command -v python3); test_onnx's ONNX Runtime tests will skip"
  fi
fi
