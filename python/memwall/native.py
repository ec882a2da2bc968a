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


def _beside_core(module: ModuleType, name: str) -> list[str]:
    """Where a build or an install puts `name` (the executor, the memwall
    command) relative to memwall_core: a build's BUILD/python/../NAME, an
    install's site-packages/memwall/bin/NAME, and this package's bin/."""
    here = os.path.dirname(os.path.abspath(module.__file__ or ""))
    return [os.path.normpath(p) for p in (os.path.join(here, "..", name),
                                          os.path.join(here, "memwall", "bin", name),
                                          os.path.join(BIN, name))]


def _find_executor(module: ModuleType) -> None:
    """The executor library (libmemwall_exec.so) that memwall_core loads to
    train (memwall/exec/library.h reads $MEMWALL_EXEC_LIBRARY): the one the
    same build or install made, unless one is named."""
    if os.environ.get("MEMWALL_EXEC_LIBRARY"):
        return
    for built in _beside_core(module, "libmemwall_exec.so"):
        if os.path.exists(built):
            os.environ["MEMWALL_EXEC_LIBRARY"] = built
            return


def executor_library() -> str:
    """The executor library memwall_core will load; Error saying how to
    build it when there is none."""
    core()
    found = os.environ.get("MEMWALL_EXEC_LIBRARY", "")
    if not found or not os.path.exists(found):
        raise Error("no executor library (libmemwall_exec.so) beside memwall_core: it is built "
                    "only against memwall's Python environment with torch (make python), and "
                    "not in the sanitizer builds; or set MEMWALL_EXEC_LIBRARY")
    return found


def memwall_command() -> str:
    """The memwall command of the build or install memwall_core came from
    (or $MEMWALL_BINARY); Error when there is none."""
    given = os.environ.get("MEMWALL_BINARY")
    if given:
        return given
    for path in _beside_core(core(), "memwall"):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise Error("the memwall command is neither beside memwall_core nor in the package: "
                "set MEMWALL_BINARY")
