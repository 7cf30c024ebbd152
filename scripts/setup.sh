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
