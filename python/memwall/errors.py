"""The tracer's errors: bad input or an untraceable model ends with one line
``memwall-trace: error: <message>`` on stderr and exit code 2, which the C++
side (src/importers/torch_trace.cc) forwards."""
from __future__ import annotations

from typing import NoReturn

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
