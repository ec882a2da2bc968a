"""The tracer's errors: bad input or an untraceable model ends with one line
``memwall-trace: error: <message>`` on stderr and exit code 2, which the C++
side (src/importers/torch_trace.cc) forwards."""
from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

ERROR_PREFIX = "memwall-trace: error: "


class TraceError(Exception):
    """Bad input or an untraceable model: reported as one line, exit 2."""


class OpFailed(Exception):
    """An aten op raised: carries its name for the one-line message."""

    def __init__(self, op: str, why: str) -> None:
        super().__init__(f"{op}: {why}")
        self.op = op
        self.why = why


def fail(message: str) -> NoReturn:
    """Raises TraceError(message)."""
    raise TraceError(message)


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, or its type's name."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class Error(Exception):
    """What the Python API raises: the C++ side's one-line message (the line a
    command prints before its exit code)."""


class BadInput(Error):
    """Bad input: an unknown name, a malformed file, a model that cannot be
    traced (a command's exit code 2)."""


class RunFailed(Error):
    """A training step (or a run) failed: the executor's one line (a
    command's exit code 1). The session it ran in cannot go on."""


class OutOfMemory(RunFailed):
    """The device (or the host pool) could not hold what a step needed."""


class quiet_native_stderr:
    """Sends file descriptor 2 to /dev/null for a while: torch's profiler
    (libkineto) logs its own start and stop there, "USDT: ... profiler_start",
    and on a host without a GPU its probe's "gpuGetDeviceCount failed", lines
    that would reach the terminal of `memwall trace` or `run`. Errors still
    raise, after fd 2 is back."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self.saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)

    def __exit__(self, *exc: Any) -> bool:
        os.dup2(self.saved, 2)
        os.close(self.saved)
        return False
