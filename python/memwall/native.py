"""The extension memwall_core: memwall's C++ modules in this process
(python/bindings, built by CMake into <build>/python when memwall's
environment has nanobind). Found on sys.path, or in the directory
$MEMWALL_CORE_DIR names, or in build/python beside the source tree."""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from memwall.errors import Error

_core: ModuleType | None = None


def core() -> ModuleType:
    """memwall_core, imported once; Error saying how to build it when absent."""
    global _core
    if _core is not None:
        return _core
    places = [os.environ.get("MEMWALL_CORE_DIR", ""),
              os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                           "python")]
    for place in [""] + [p for p in places if p and os.path.isdir(p)]:
        if place and place not in sys.path:
            sys.path.append(place)
        try:
            _core = importlib.import_module("memwall_core")
            return _core
        except ImportError:
            continue
    raise Error("memwall_core is not built: build memwall with memwall's Python environment "
                "(make build after scripts/install-deps.sh --torch, which installs nanobind), "
                "or set MEMWALL_CORE_DIR to the directory holding it")
