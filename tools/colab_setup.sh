#!/usr/bin/env bash
# One exercise on a fresh GPU machine: a free Google Colab T4 (docs/colab.md) or any Ubuntu box
# with an NVIDIA driver and the CUDA toolkit. Installs only what is missing, then builds and
# runs the exercise's tests.
#   usage: tools/colab_setup.sh [EX] [CUDA_ARCH]      defaults: 01_vector_add 75 (a T4 is sm_75)
# Safe to run again after editing your code: the second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ex=${1:-01_vector_add}
arch=${2:-75}

say() { echo "colab_setup: $*"; }
sudo=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo="sudo"

# nvcc: Colab has the toolkit in /usr/local/cuda without putting it on PATH.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null || { say "no CUDA toolkit (nvcc) found: install it first"; exit 2; }
say "$(nvcc --version | tail -n 1)"
command -v nvidia-smi >/dev/null && say "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)" \
  || say "nvidia-smi not found: is a GPU runtime selected? (Runtime > Change runtime type > T4 GPU)"

# CMake >= 3.24 and ninja: Colab's Ubuntu 22.04 packages CMake 3.22, so take both from pip.
cmake_ok() {
  command -v cmake >/dev/null &&
    python3 -c 'import sys; v = tuple(map(int, sys.argv[1].split(".")[:2])); sys.exit(v < (3, 24))' \
      "$(cmake --version | head -n 1 | awk '{print $3}')"
}
if ! cmake_ok || ! command -v ninja >/dev/null; then
  say "installing CMake >= 3.24 and ninja from pip"
  python3 -m pip install --quiet "cmake>=3.24" ninja
  export PATH="$(python3 -m site --user-base)/bin:$PATH"
  hash -r
fi
cmake_ok || { say "CMake >= 3.24 is still not on PATH"; exit 2; }
say "$(cmake --version | head -n 1), ninja $(ninja --version)"

# Catch2: Ubuntu's package (v2 on 22.04, v3 on 24.04). Without it the first configure
# downloads Catch2 v3, which also works on an online machine.
if command -v dpkg-query >/dev/null && ! dpkg-query -W -f='${Status}' catch2 2>/dev/null | grep -q "ok installed"; then
  say "installing Catch2 (apt)"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq catch2 >/dev/null; } ||
    say "apt could not install catch2; the configure step will download it instead"
fi

say "make test EX=$ex CUDA_ARCH=$arch${BUILD:+ BUILD=$BUILD}"
make test EX="$ex" CUDA_ARCH="$arch" ${BUILD:+BUILD="$BUILD"}
