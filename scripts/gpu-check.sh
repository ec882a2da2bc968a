#!/usr/bin/env bash
# memwall's checks on a GPU machine (docs/gpu.md), run inside the folder
# scripts/gpu-kit.sh made (or a checkout): builds memwall against the
# PyTorch found there, with the kit's dependencies and no network, then
# runs each check and writes OUT_DIR/gpu-check.json and OUT_DIR/gpu-check.txt
# (each check's log under OUT_DIR/logs).
#
#   scripts/gpu-check.sh [--cpu] [--python PY] [--jobs N] OUT_DIR
#
# --cpu: the same build and the checks' CPU part, on a machine without a GPU
# (the fake CUDA driver, the emulated device): a build break is found here
# before anyone pays for a GPU. --python: the Python with torch to build
# against and trace with (default: python3 on PATH).
#
# Exit code: 0 when every check that ran passed, 1 when one failed, 2 when
# the machine lacks what the build needs (one line says what).
set -uo pipefail

mode=gpu
python=""
jobs=$(nproc 2>/dev/null || echo 4)
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu) mode=cpu ;;
    --python) python="${2:-}"; shift ;;
    --jobs) jobs="${2:-}"; shift ;;
    -h|--help) sed -n 2,17p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option '$1' (known: --cpu, --python PY, --jobs N)" >&2; exit 2 ;;
    *) [[ -z "$out" ]] || { echo "gpu-check: one OUT_DIR, not '$out' and '$1'" >&2; exit 2; }
       out="$1" ;;
  esac
  shift
done
[[ -n "$out" ]] || { echo "gpu-check: usage: scripts/gpu-check.sh [--cpu] [--python PY] [--jobs N] OUT_DIR" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: --jobs '$jobs' is not a positive count" >&2; exit 2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "gpu-check: $*" >&2; exit 2; }

# What the build needs, each missing piece in one line.
command -v cmake >/dev/null || die "no cmake on PATH (pip install cmake, or the distribution's package)"
command -v c++ >/dev/null || command -v g++ >/dev/null || die "no C++ compiler on PATH (g++ 11 or later)"
[[ -n "$python" ]] || python=$(command -v python3 || true)
[[ -n "$python" && -x "$python" ]] || die "no python3 on PATH and no --python"
torch_facts=$("$python" -c 'import torch, sys; print(torch.__version__, torch.version.cuda or "none", int(torch.cuda.is_available()), sys.version.split()[0])' 2>/dev/null) \
  || die "$python cannot import torch (the machine's CUDA PyTorch is what memwall builds against)"
read -r torch_version torch_cuda cuda_available python_version <<<"$torch_facts"
if [[ $mode == gpu && $cuda_available != 1 ]]; then
  die "torch $torch_version sees no GPU (torch.cuda.is_available() is False); on a machine without one run --cpu"
fi
deps=()
if [[ -d "$root/deps/include" ]]; then
  deps=(-DMEMWALL_DEPS_DIR="$root/deps")  # a kit (Note [Dependencies from a kit] in CMakeLists.txt)
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

mkdir -p "$out/logs" || die "cannot create $out/logs"
out=$(cd "$out" && pwd)
build="$root/build-gpu-check"
results="$out/logs/results.tsv"
: >"$results"
started=$(date +%s)

# record NAME STATUS SECONDS DETAIL: one row of the report.
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"; echo "gpu-check: $1: $2 ($3 s) $4"; }

# check NAME LIMIT_SECONDS COMMAND...: runs it under a time limit, its
# output in logs/NAME.log (stderr: NAME.err); a gtest binary's summary
# decides passed or skipped.
check() {
  local name=$1 limit=$2; shift 2
  local log="$out/logs/$name.log" err="$out/logs/$name.err" t0 code status detail
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>"$err"
  code=$?
  if [[ $code -eq 124 || $code -eq 137 ]]; then
    status=failed; detail="ran past ${limit} s"
  elif [[ $code -eq 77 ]]; then  # a script's own skip
    status=skipped; detail=$(tail -n1 "$log" | cut -c1-200)
  elif [[ $code -ne 0 ]]; then
    # memwall's errors are one line on stderr; gtest's failures on stdout.
    status=failed; detail=$(grep -m1 -E '^\[  FAILED  \]' "$log" | cut -c1-200)
    [[ -n "$detail" ]] || detail=$(tail -n1 "$err" | cut -c1-200)
    [[ -n "$detail" ]] || detail="exit code $code"
  else
    status=passed
    detail=$(grep -m1 -E '^\[  PASSED  \]' "$log" | cut -c1-200)
    local skipped
    skipped=$(grep -m1 -E '^\[  SKIPPED \] [0-9]+ test' "$log" | cut -c1-120)
    if [[ -n "$skipped" ]]; then
      detail="$detail; $skipped"
      # Every test skipped: nothing was checked; gtest's line after
      # "Skipped" says why.
      if grep -qE '^\[  PASSED  \] 0 test' "$log"; then
        status=skipped
        detail=$(grep -A1 -m1 ': Skipped$' "$log" | tail -n1 | cut -c1-200)
      fi
    fi
  fi
  record "$name" "$status" "$(( $(date +%s) - t0 ))" "$detail"
  [[ $status != failed ]]
}

not_run() { record "$1" not-run 0 "$2"; }

# The build: only what the checks run (no benchmarks, no Python extension);
# the CUDA device memory library where torch's wheel has CUDA.
t0=$(date +%s)
cuda_library=()
echo "gpu-check: building in $build with $jobs jobs against torch $torch_version ($python)"
if cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMEMWALL_BUILD_BENCH=OFF \
     -DMEMWALL_PYTHON="$python" "${deps[@]}" >"$out/logs/configure.log" 2>&1 &&
   { [[ $(cmake --build "$build" --target help 2>/dev/null) == *memwall_exec_cuda* ]] &&
       cuda_library=(memwall_exec_cuda); true; } &&
   cmake --build "$build" -j "$jobs" --target memwall test_alloc test_runtime_cuda test_exec \
     "${cuda_library[@]}" >"$out/logs/build.log" 2>&1; then
  record build passed "$(( $(date +%s) - t0 ))" "torch $torch_version, CUDA $torch_cuda, Python $python_version"
else
  record build failed "$(( $(date +%s) - t0 ))" "$(grep -m1 -E 'error|Error' "$out/logs/configure.log" "$out/logs/build.log" | cut -c1-200)"
fi
memwall="$build/memwall"
export MEMWALL_PYTHON="$python"  # the tracer's interpreter (Note [Tracer interpreter])
if [[ -x "$memwall" ]]; then
  if [[ ! -f "$build/libmemwall_exec.so" ]]; then
    record executor failed 0 "no libmemwall_exec.so: see logs/configure.log for why the executor was not built"
  fi
  # The allocator's CUDA VMM backend on this machine's driver (skips without one).
  check alloc-cuda-vmm 120 "$build/tests/test_alloc" --gtest_filter='CudaVmm*'
  # The copy engine, the pool's registration and the VMM allocator: on the
  # real driver on a GPU, on the fake one here.
  if [[ $mode == gpu ]]; then
    check runtime-cuda 300 env MEMWALL_TEST_REAL_CUDA=1 "$build/tests/test_runtime_cuda"
  else
    check runtime-cuda 300 "$build/tests/test_runtime_cuda"
  fi
  # Two runs of the fidelity set's GPT before the matrix, whose time limit
  # may cut it short: their JSON (the report's outputs) has each step's
  # device peak, measured and predicted, and eager's bits; on a GPU with
  # --device cuda. The second, at 60% of the peak, makes auto's plan swap
  # or recompute (docs/gpu.md, "What the first GPU run should look at").
  rm -rf "$build/smoke-values"
  smoke=(run --builtin gpt-mini --gpu l4 --steps 3 --check-eager --json
         --keep-values "$build/smoke-values")
  [[ $mode == gpu ]] && smoke+=(--device cuda)
  check run-smoke 300 "$memwall" "${smoke[@]}"
  check run-smoke-60 300 "$memwall" "${smoke[@]}" --budget 60%peak
  # Every plan kind run against eager, bit for bit (tests/exec/run_test.cc).
  # On a GPU with --device cuda and plans without a layout (Note [Tests on
  # a GPU] in tests/cli/run_memwall.h): the CUDA path's first runs.
  if [[ $mode == gpu ]]; then
    check exec-matrix 300 env MEMWALL_TEST_RUN_DEVICE=cuda MEMWALL_KIT_PLANS="$root/inputs/plans" \
      "$build/tests/test_exec" --gtest_filter='RunExec.*:RunInMemory.TheCuda*'
  else
    check exec-matrix 3600 env MEMWALL_KIT_PLANS="$root/inputs/plans" "$build/tests/test_exec" --gtest_filter='RunExec.*'
  fi
  # The device and its copies measured, beside memwall's built-in profile
  # of the same device (on a GPU: the driver's name picks it).
  quick=()
  [[ $mode == cpu ]] && quick=(--quick)
  # (The text output has the side-by-side table; the profile is JSON.)
  check calibrate 600 "$memwall" calibrate "${quick[@]}" --out "$out/calibrated-profile.json"
  # A plain PyTorch step's predicted peak against the measured one: on the
  # GPU traced for CUDA kernels and measured by the caching allocator
  # (torchvision's cases where the machine has torchvision).
  if [[ $mode == gpu ]]; then
    cases=(linear-toy gpt-mini gpt-mini-nodropout)
    "$python" -c 'import torchvision' 2>/dev/null && cases+=(resnet18:8 mobilenet_v2:8 vit_b_16:2)
    check fidelity 900 "$memwall" bench fidelity --device cuda --cases "${cases[@]}" --json
  else
    check fidelity 900 "$memwall" bench fidelity --cases linear-toy gpt-mini --json
  fi
  # The NVMe engine against fio on this machine's drive, when fio is there.
  fio=()
  command -v fio >/dev/null || fio=(--no-fio)
  check offload 300 "$memwall" bench offload --size 256MiB --depths 8 --repeats 1 "${fio[@]}" --json
  # The Python side's GPU tests: libmemwall_exec_cuda.so as torch's CUDA
  # allocator (as a script: the machine may have no pytest).
  check python-gpu 600 env MEMWALL_BINARY="$memwall" "$python" \
    "$root/python/tests/test_cuda_device_memory.py"
  # The values of a CUDA run traced on the GPU (python -m memwall --values
  # DIR --device cuda): deterministic across processes.
  check python-values 300 env MEMWALL_BINARY="$memwall" "$python" \
    "$root/python/tests/test_values_device.py"
else
  for name in alloc-cuda-vmm runtime-cuda run-smoke run-smoke-60 exec-matrix calibrate fidelity \
    offload python-gpu python-values; do
    not_run "$name" "the build failed (logs/build.log)"
  done
fi

"$python" "$root/scripts/gpu_check_report.py" --results "$results" --out "$out" --mode "$mode" \
  --root "$root" --python "$python" --seconds "$(( $(date +%s) - started ))" || exit 2
cat "$out/gpu-check.txt"
if grep -qP '\tfailed\t' "$results"; then exit 1; fi
exit 0
