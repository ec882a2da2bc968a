"""The command line memwall's C++ side starts:

    python <dir>/memwall/__main__.py ARGS      (the package as memwall embeds it)
    python -m memwall ARGS                     (python/ on the path)

ARGS are the tracer's (memwall.cli: --torchvision, --script, --hf, ...,
--calibrate, --values), `cpu-adam-contenders THREADS`
(memwall.cpu_adam_contenders, for `memwall bench cpu-adam`) or
`deepspeed-estimates REQUEST.json` (memwall.deepspeed_estimates, for
`memwall bench published`).
"""
import os
import sys

# Importing the user's script (or this package) must not leave __pycache__
# beside it, nor in memwall's private directory.
sys.dont_write_bytecode = True

if not __package__:
    # Started as a file: Python put this package's own directory first on
    # sys.path, where its modules (errors, cli, ...) would be importable as
    # top-level names; the directory that holds the package takes its place.
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == _here:
        sys.path[0] = os.path.dirname(_here)
    else:
        sys.path.insert(0, os.path.dirname(_here))


def main(argv: list) -> int:
    """Runs the tool that `argv` names; returns the exit code."""
    if argv[:1] == ["cpu-adam-contenders"]:
        from memwall.cpu_adam_contenders import main as contenders
        return contenders(argv[1:])
    if argv[:1] == ["deepspeed-estimates"]:
        from memwall.deepspeed_estimates import main as estimates
        return estimates(argv[1:])
    from memwall.cli import run
    return run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
