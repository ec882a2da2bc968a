"""gpu="this": the machine's own device, measured once by ``memwall
calibrate`` and cached. On a machine without a GPU memwall's device is
emulated by the CPU (Note [Emulated device] in src/exec/device_memory.h),
so "this" is that device: the CPU's matmul and memory speeds, the copy
engine's, the NVMe drive's."""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys

from memwall.errors import Error


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def profile_path() -> str:
    """Where this machine's profile is cached: one per host name, CPU model
    and core count (a machine that changes is measured again)."""
    import torch

    key = f"{platform.node()}|{_cpu_model()}|{os.cpu_count()}|{torch.__version__}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "memwall", "profiles", f"this-{digest}.json")


def this_profile() -> str:
    """This machine's profile file, calibrating it the first time (a few
    seconds; a one-line note says so)."""
    from memwall.native import memwall_command

    path = profile_path()
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    print(f"memwall: note: measuring this machine once (memwall calibrate), kept in {path}",
          file=sys.stderr)
    try:
        done = subprocess.run([memwall_command(), "calibrate", "--out", temporary, "--python",
                               sys.executable], capture_output=True, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            raise Error(f"calibrating this machine failed: {lines[-1] if lines else done.returncode}")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path
