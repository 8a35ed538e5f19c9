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
if command -v nvidia-smi >/dev/null; then
  say "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
else
  say "nvidia-smi not found: is a GPU runtime selected? (Runtime > Change runtime type > T4 GPU)"
fi

# CMake >= 3.24 and ninja: Colab's Ubuntu 22.04 packages CMake 3.22, so take both from pip.
cmake_ok() {
  command -v cmake >/dev/null &&
    python3 -c 'import sys; v = tuple(map(int, sys.argv[1].split(".")[:2])); sys.exit(v < (3, 24))' \
      "$(cmake --version | head -n 1 | awk '{print $3}')"
}
tools_ok() { cmake_ok && command -v ninja >/dev/null && ninja --version >/dev/null 2>&1; }
if ! tools_ok; then
  python3 -m pip --version >/dev/null 2>&1 ||
    { say "python3 has no pip: install python3-pip (apt), or CMake >= 3.24 and ninja yourself"; exit 2; }
  # Colab's pip (root, no PEP 668 marker) installs into /usr/local/bin, which later cells find too.
  # A system Python marked EXTERNALLY-MANAGED (Debian 12, Ubuntu 24.04) refuses that; there the two
  # go to the user's own site (~/.local): no system package lives there, and every pip that knows
  # the marker (>= 23.0) knows --break-system-packages.
  pip_where=""
  python3 -c 'import os, sys, sysconfig
sys.exit(sys.prefix != sys.base_prefix or
         not os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))' &&
    pip_where="--user --break-system-packages"
  say "installing CMake >= 3.24 and ninja from pip${pip_where:+ ($pip_where)}"
  # shellcheck disable=SC2086
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
    --no-warn-script-location $pip_where "cmake>=3.24" ninja ||
    { say "pip could not install CMake and ninja (see above)"; exit 2; }
  # Wherever that was (/usr/local, ~/.local, a venv, a pyenv), ask the packages for their binaries.
  tools_bin=$(python3 -c 'import cmake, ninja; print(cmake.CMAKE_BIN_DIR + ":" + ninja.BIN_DIR)') ||
    { say "pip installed CMake and ninja, but python3 cannot import them"; exit 2; }
  old_path=$PATH
  export PATH="$tools_bin:$PATH"
  hash -r
  (PATH=$old_path; hash -r; tools_ok) ||
    say "note: a new shell will not find them; before make there, run: export PATH=\"$tools_bin:\$PATH\""
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
