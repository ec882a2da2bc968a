#!/usr/bin/env bash
# Installs every Debian package memwall needs, idempotently: quick and quiet
# when everything is present. Pass --torch to also create memwall's Python
# environment (PyTorch, torchvision and transformers from PyPI, pinned in
# python/requirements.txt): `memwall trace`, the PyTorch allocator library
# and their tests use it, with pytest for the Python package's own tests
# (python/tests). --deepspeed (implies --torch) also installs
# DeepSpeed into that environment, the peer of `memwall bench cpu-adam`
# (its CPU Adam compiles on first use, about a minute, cached by torch).
#
# Note [Python environment]: the environment is a virtual environment under
# ${XDG_CACHE_HOME:-$HOME/.cache}/memwall/venv-KEY, KEY the first 16 hex
# digits of the SHA-256 of python/requirements.txt (CMakeLists.txt computes
# the same key, and `memwall trace` looks there). It lives outside the
# checkout so that every clone on the machine (CI's included) shares one
# download; a file .memwall-complete marks it usable, written only after pip
# installed everything and the packages import. A half-made environment
# (no network, a full disk, an interrupt) lacks the marker and is made again
# on the next run; a lock keeps two runs from making it at once.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
with_torch=0
with_deepspeed=0
deepspeed_pin="deepspeed==0.19.8"
# The test runner of python/tests, beside the pinned requirements rather than
# among them: adding it there would change the environment's key and make a
# new environment of several GB where one package is missing.
pytest_pin="pytest==9.2.0"
# nanobind, for the Python extension memwall_core (python/bindings), beside
# the pinned requirements for the same reason.
nanobind_pin="nanobind==3.1.0"
# scikit-build-core, which builds `pip install ./python` (python/pyproject.toml)
# without build isolation (no download per install), for the same reason.
skbuild_pin="scikit-build-core==1.1.2"
# The second environment of the GPU kit's CPU check (--other-torch;
# scripts/gpu-kit.sh --check-cpu): another PyTorch than the pinned one, the
# version GPU machines lent to this work were seen with, so that the kit's
# build against a torch other than the pinned one is tried here.
other_torch_pins=(torch==2.11.0 torchvision==0.26.0)
with_other_torch=0
for arg in "$@"; do
  case "$arg" in
    --torch) with_torch=1 ;;
    --other-torch) with_other_torch=1 ;;
    --deepspeed) with_torch=1; with_deepspeed=1 ;;
    --print-python)
      key=$(sha256sum "$root/python/requirements.txt" | cut -c1-16)
      echo "${XDG_CACHE_HOME:-$HOME/.cache}/memwall/venv-$key/bin/python"
      exit 0
      ;;
    *)
      echo "install-deps: unknown option '$arg' (known: --torch, --deepspeed, --other-torch, --print-python)" >&2
      exit 2
      ;;
  esac
done

packages=(
  build-essential cmake make git ccache
  clang lld libclang-rt-14-dev   # libFuzzer and sanitizer runtimes
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  coinor-libcbc-dev              # CBC, the MILP solver of the checkmate planner
  liburing-dev                   # io_uring, the NVMe engine (src/runtime)
  fio                            # the NVMe engine's peer in `memwall bench offload`
)
if [[ $with_torch -eq 1 ]]; then
  packages+=(python3 python3-venv
             python3-dev                 # Python.h, for the extension memwall_core (python/bindings)
             libgloo-dev)                # headers of torch.distributed's gloo backend (memwall run's ranks)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Note [Python environment]: makes the virtual environment VENV (its lock
# beside it) with PIP-ARGS from PyPI unless it is complete, marking it
# complete only once torch, torchvision and transformers import; `made` is 1
# when this run made it. Its messages go to stderr.
made=0
make_environment() {  # VENV WHAT PIP-ARGS...
  local venv=$1 what=$2 lock
  shift 2
  [[ -f "$venv/.memwall-complete" ]] && return 0
  mkdir -p "$(dirname "$venv")"
  exec {lock}>"$venv.lock"
  flock "$lock"
  if [[ ! -f "$venv/.memwall-complete" ]]; then  # else made while this run waited
    rm -rf "$venv"
    echo "install-deps: creating $venv with $what from PyPI (once per machine; a few GB)" >&2
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$@" >&2
    "$venv/bin/python" -c "import torch, torchvision, transformers" ||
      { echo "install-deps: $venv was installed but does not import torch, torchvision and transformers" >&2; exit 1; }
    touch "$venv/.memwall-complete"
    made=1
  fi
  exec {lock}>&-
}

cache="${XDG_CACHE_HOME:-$HOME/.cache}/memwall"
if [[ $with_other_torch -eq 1 ]]; then
  # Prints the environment's python on stdout (and nothing else there).
  other="$cache/venv-other-${other_torch_pins[0]#torch==}"
  transformers_pin=$(grep -E '^transformers==' "$root/python/requirements.txt")
  make_environment "$other" "${other_torch_pins[*]} $transformers_pin" \
    "${other_torch_pins[@]}" "$transformers_pin" "$pytest_pin"
  echo "$other/bin/python"
  exit 0
fi
[[ $with_torch -eq 1 ]] || exit 0

# Note [Python environment].
requirements="$root/python/requirements.txt"
key=$(sha256sum "$requirements" | cut -c1-16)
venv="$cache/venv-$key"

# pytest and nanobind on top of a complete environment, once each; best
# effort: without pytest the Python package's tests skip and say so
# (tests/CMakeLists.txt), without nanobind the build makes no memwall_core
# and the tests that need it skip.
add_one() {  # MODULE PIN WHAT-SKIPS
  "$venv/bin/python" -c "import $1" >/dev/null 2>&1 && return 0
  echo "install-deps: installing $2 into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$2" ||
    echo "install-deps: $2 could not be installed; $3" >&2
}
add_pytest() {
  add_one pytest "$pytest_pin" "the Python package's tests will skip"
  add_one nanobind "$nanobind_pin" "the build makes no Python extension (memwall_core)"
  add_one scikit_build_core "$skbuild_pin" "the package cannot be installed (make python)"
}
# DeepSpeed on top of a complete environment, once (it is optional: nothing
# but the benchmark's comparison needs it).
add_deepspeed() {
  [[ $with_deepspeed -eq 1 ]] || return 0
  "$venv/bin/python" -c "import deepspeed" >/dev/null 2>&1 && return 0
  echo "install-deps: installing $deepspeed_pin into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$deepspeed_pin"
}
make_environment "$venv" "$(grep -E '^[a-z]' "$requirements" | paste -sd' ')" -r "$requirements"
[[ -f "$venv/requirements.txt" ]] || cp "$requirements" "$venv/requirements.txt"
add_pytest
add_deepspeed
[[ $made -eq 0 ]] || echo "install-deps: $venv/bin/python is memwall's Python"
