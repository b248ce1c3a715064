#!/usr/bin/env bash
# Install fbt's build and test dependencies on Debian 12 (bookworm) if any are missing.
# Idempotent: when everything is present it only runs dpkg-query and a python3 import check, and exits.
# Runs apt-get as root, or through sudo when not root. Set FBT_SETUP_EXTRA="pkg ..." to add packages.
# The Python package (docs/python.md) needs, for the python3 first on PATH, numpy, pytest, nanobind,
# scikit-build-core and hypothesis (and matplotlib, for examples/python's loss plot): Debian's packages where they exist, the rest by pip (--user; with
# --break-system-packages only where pip reports an externally managed Python, PEP 668). FBT_SETUP_PYTHON=0
# leaves the Python part out.
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
  python3-dev python3-pip python3-venv python3-numpy python3-pytest   # the Python package (python/, docs/python.md)
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
# The Python package's build and test modules, for the python3 first on PATH (Debian's, or a pyenv/venv one).
python_part() {
  [[ "${FBT_SETUP_PYTHON:-1}" == "0" ]] && return 0
  command -v python3 >/dev/null 2>&1 || return 0
  local mods=(numpy pytest nanobind scikit_build_core hypothesis matplotlib threadpoolctl) pips=(numpy pytest nanobind scikit-build-core hypothesis matplotlib threadpoolctl) need=() i
  for i in "${!mods[@]}"; do
    python3 -c "import ${mods[$i]}" >/dev/null 2>&1 || need+=("${pips[$i]}")
  done
  [[ ${#need[@]} -eq 0 ]] && return 0
  echo "setup.sh: pip-installing ${need[*]} for $(command -v python3)"
  local user=(--user)
  python3 -c 'import sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)' && user=()  # a venv: no --user
  local log
  log=$(python3 -m pip install -q "${user[@]}" "${need[@]}" 2>&1) && return 0
  if grep -q externally-managed <<<"$log"; then
    python3 -m pip install -q "${user[@]}" --break-system-packages "${need[@]}" && return 0
  fi
  echo "$log" >&2
  echo "setup.sh: could not pip-install ${need[*]}; the Python package and its tests are then skipped (docs/python.md)" >&2
  return 0
}

if [[ ${#missing[@]} -eq 0 ]]; then
  python_part
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
python_part
