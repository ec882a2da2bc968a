"""libmemwall_exec_cuda.so on a GPU (Note [CUDA device memory] in
src/exec/cuda/cuda_device_memory.cc): memwall's allocator on the CUDA VMM
device, a budget as its capacity, as torch's CUDA allocator. Each case runs
in its own process, since the allocator is installed once per process
before its first CUDA allocation. Skipped without a GPU (torch sees none)
or without the library (built beside the memwall binary, MEMWALL_BINARY,
where torch's wheel has CUDA). scripts/gpu-check.sh runs this file on the
GPU machine, with pytest or, where the machine has none, as a script."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

try:
    import pytest
except ImportError:  # a GPU machine without pytest: run as a script (below)
    pytest = None  # type: ignore[assignment]


def library() -> Path | None:
    chosen = os.environ.get("MEMWALL_EXEC_CUDA_LIBRARY")
    if chosen:
        return Path(chosen)
    binary = os.environ.get("MEMWALL_BINARY")
    return Path(binary).parent / "libmemwall_exec_cuda.so" if binary else None


def why_not() -> str:
    import torch

    if not torch.cuda.is_available():
        return "no GPU: torch.cuda.is_available() is False"
    lib = library()
    if lib is None or not lib.is_file():
        return f"no libmemwall_exec_cuda.so ({lib}): set MEMWALL_BINARY to a build with it"
    return ""


# The library through ctypes, installed with BUDGET bytes; `stats()` reads
# its counters as a dict.
PRELUDE = """
import ctypes, torch
FIELDS = ["budget", "capacity", "live_bytes", "peak_bytes", "live_allocated_bytes",
          "peak_allocated_bytes", "pending_frees", "pending_bytes", "peak_held_bytes",
          "reserved_bytes", "event_waits", "out_of_memory", "lost_bytes", "peak_reserved_bytes"]
class Stats(ctypes.Structure):
    _fields_ = [(f, ctypes.c_uint64) for f in FIELDS]
lib = ctypes.CDLL(LIBRARY)
lib.memwall_exec_cuda_install_v1.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p]
lib.memwall_exec_cuda_last_error_v1.restype = ctypes.c_char_p
def check(rc):
    assert rc == 0, lib.memwall_exec_cuda_last_error_v1().decode()
check(lib.memwall_exec_cuda_install_v1(0, BUDGET, b"stitching"))
def stats():
    s = Stats()
    check(lib.memwall_exec_cuda_stats_v2(ctypes.byref(s)))
    return {f: getattr(s, f) for f in FIELDS}
def synchronize():
    torch.cuda.synchronize()
    check(lib.memwall_exec_cuda_synchronize_v1())
MiB = 1 << 20
"""


def run_case(body: str, budget: int) -> None:
    lib = library()
    program = (f"LIBRARY = {str(lib)!r}\nBUDGET = {budget}\n" + PRELUDE
               + textwrap.dedent(body) + "\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (
        done.stdout[-2000:] + done.stderr[-3000:])


def skip_unless_ready() -> None:
    reason = why_not()
    if reason and pytest is not None:
        pytest.skip(reason)


def test_tensors_are_counted_to_the_byte() -> None:
    skip_unless_ready()
    run_case("""
        a = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        b = torch.empty(3 * MiB + 5, dtype=torch.uint8, device="cuda")
        s = stats()
        assert s["capacity"] <= BUDGET, s
        assert s["live_bytes"] == 4 * MiB + 5, s
        assert s["peak_bytes"] == 4 * MiB + 5, s
        del b
        synchronize()
        s = stats()
        assert s["live_bytes"] == MiB and s["peak_bytes"] == 4 * MiB + 5, s
        assert s["pending_frees"] == 0, s
        """, budget=256 << 20)


def test_past_the_budget_torch_raises_out_of_memory() -> None:
    skip_unless_ready()
    run_case("""
        x = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            pass
        else:
            raise AssertionError("80 MiB fitted a 64 MiB budget")
        assert stats()["out_of_memory"] >= 1
        del x
        synchronize()
        y = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")  # room again
        assert stats()["live_bytes"] == 40 * MiB
        """, budget=64 << 20)


def test_kernels_compute_in_it() -> None:
    skip_unless_ready()
    run_case("""
        torch.manual_seed(0)
        a, b = torch.randn(256, 128), torch.randn(128, 64)
        c = (a.cuda() @ b.cuda()).cpu()
        assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-4), (c - a @ b).abs().max()
        assert stats()["peak_bytes"] >= (256 * 128 + 128 * 64 + 256 * 64) * 4
        """, budget=256 << 20)


def test_a_free_waits_for_its_stream() -> None:
    skip_unless_ready()
    run_case("""
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
            torch.cuda._sleep(200_000_000)  # keeps the stream busy (~0.1 s)
            x.fill_(1)
        del x  # queued work still uses it: the block waits for the stream
        s = stats()
        assert s["pending_frees"] == 1 and s["live_bytes"] == 0, s
        synchronize()
        s = stats()
        assert s["pending_frees"] == 0 and s["pending_bytes"] == 0, s
        """, budget=128 << 20)


def test_copies_into_out_of_and_within_device_memory() -> None:
    # Note [Device bytes]: the executor's copies through the library.
    skip_unless_ready()
    run_case("""
        lib.memwall_exec_cuda_copy_v1.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
        lib.memwall_exec_cuda_zero_v1.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        src = torch.arange(1000, dtype=torch.float32)
        on_device = torch.empty(1000, device="cuda")
        check(lib.memwall_exec_cuda_copy_v1(on_device.data_ptr(), src.data_ptr(), 4000))
        assert torch.equal(on_device.cpu(), src)
        other = torch.empty(1000, device="cuda")
        check(lib.memwall_exec_cuda_copy_v1(other.data_ptr(), on_device.data_ptr(), 4000))
        check(lib.memwall_exec_cuda_zero_v1(other.data_ptr() + 2000, 2000))
        back = torch.empty(1000)
        check(lib.memwall_exec_cuda_copy_v1(back.data_ptr(), other.data_ptr(), 4000))
        assert torch.equal(back[:500], src[:500]) and not back[500:].any(), back
        """, budget=64 << 20)


if __name__ == "__main__":
    # Exit code 77 when skipped (gpu-check.sh reports it so), 1 at the first
    # failing case.
    if why_not():
        print(f"skipped: {why_not()}")
        sys.exit(77)
    for name, case in sorted(globals().items()):
        if name.startswith("test_"):
            case()
            print(f"{name}: passed")
