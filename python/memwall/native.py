"""The extension memwall_core: memwall's C++ modules in this process
(python/bindings, built by CMake into <build>/python when memwall's
environment has nanobind; `pip install ./python` puts it beside the
package). Found on sys.path, or in the directory $MEMWALL_CORE_DIR names,
or in build/python beside the source tree."""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from memwall.errors import Error

_core: ModuleType | None = None
# Where `pip install ./python` puts the memwall command and the executor.
BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def core() -> ModuleType:
    """memwall_core, imported once; Error saying how to build it when absent.
    $MEMWALL_CORE_DIR comes first (a build's tests name their own), then
    sys.path (``make python``'s memwall.pth), then build/python beside this
    source tree."""
    global _core
    if _core is not None:
        return _core
    chosen = os.environ.get("MEMWALL_CORE_DIR", "")
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                          "python")
    for place, first in ((chosen, True), ("", False), (beside, False)):
        if place:
            if not os.path.isdir(place):
                continue
            if first:
                sys.path.insert(0, place)
            elif place not in sys.path:
                sys.path.append(place)
        try:
            _core = importlib.import_module("memwall_core")
        except ImportError:
            continue
        _find_executor(_core)
        return _core
    raise Error("memwall_core is not built: build memwall with memwall's Python environment "
                "(make python, after scripts/install-deps.sh --torch installs nanobind), "
                "or set MEMWALL_CORE_DIR to the directory holding it")


def _find_executor(module: ModuleType) -> None:
    """The executor library (libmemwall_exec.so) that memwall_core loads to
    train (memwall/exec/library.h reads $MEMWALL_EXEC_LIBRARY): the one the
    same build made, beside memwall_core's directory, unless one is named."""
    if os.environ.get("MEMWALL_EXEC_LIBRARY"):
        return
    for built in (os.path.join(os.path.dirname(os.path.abspath(module.__file__ or "")), "..",
                               "libmemwall_exec.so"),
                  os.path.join(BIN, "libmemwall_exec.so")):  # pip install ./python's
        if os.path.exists(built):
            os.environ["MEMWALL_EXEC_LIBRARY"] = os.path.normpath(built)
            return
