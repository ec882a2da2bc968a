#!/usr/bin/env bash
# Installs every Debian package memwall needs, idempotently: quick and quiet
# when everything is present. Pass --torch to also install PyTorch (tests of
# `memwall trace` and the cross-checks in tools/ use it).
set -euo pipefail

packages=(
  build-essential cmake make git
  clang lld libclang-rt-14-dev   # libFuzzer and sanitizer runtimes
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  coinor-libcbc-dev              # CBC, the MILP solver of the checkmate planner
)
if [[ "${1:-}" == "--torch" ]]; then
  packages+=(python3-torch python3-torchvision libtorch-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
