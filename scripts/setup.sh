#!/usr/bin/env bash
# Install fbt's build and test dependencies on Debian 12 (bookworm) if any are missing.
# Idempotent: when everything is present it only runs dpkg-query and exits. Runs apt-get as root,
# or through sudo when not root. Set FBT_SETUP_EXTRA="pkg ..." to add packages (e.g. python3).
set -euo pipefail

packages=(
  cmake make g++                     # build tools (make: cmake's default generator)
  clang-14 libclang-rt-14-dev        # preferred compiler (clang++-14) + its sanitizer runtimes
  libeigen3-dev                      # fbt::fbt (Eigen 3.4)
  libxtensor-dev xtl-dev nlohmann-json3-dev   # fbt::io (xtensor 0.24)
  libgtest-dev                       # unit tests (googletest 1.12)
  libbenchmark-dev                   # benchmarks (google benchmark 1.7)
  libdnnl-dev                        # optional: bf16 matrix products, --precision bf16 (oneDNN 2.6)
  ocl-icd-opencl-dev                 # Debian's oneDNN CMake config requires OpenCL (only a Recommends of libdnnl-dev)
  libopenmpi-dev openmpi-bin         # optional: data-parallel training over MPI (tests/mpi under mpirun)
  python3-matplotlib                 # figures of experiments (scripts/plots.py) and their test
)
# shellcheck disable=SC2206
[[ -n "${FBT_SETUP_EXTRA:-}" ]] && packages+=(${FBT_SETUP_EXTRA})

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup.sh: not a Debian system (no dpkg-query); install by hand: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup.sh: all dependencies are installed"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "setup.sh: missing packages (${missing[*]}) and not root, no sudo; install them as root" >&2
  exit 1
fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
