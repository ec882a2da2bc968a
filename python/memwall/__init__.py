"""memwall's Python package.

Today it holds the PyTorch side of memwall's C++ commands, which embed every
file of this package and run it in memwall's Python environment (made by
scripts/install-deps.sh --torch; docs/trace.md):

- ``memwall.tracer``: records one training iteration (forward, loss,
  backward, optimizer step) op by op as a memwall.graph/1 graph
  (``memwall trace``), with the FLOP and kernel-scratch rules;
- ``memwall.sources``: where the model comes from (torchvision, a user's
  script, Hugging Face configurations, memwall's built-in models);
- ``memwall.values``: the values a traced step starts from and eager
  PyTorch's results, for ``memwall run``;
- ``memwall.fidelity``, ``memwall.calibrate``, ``memwall.cpu_adam_contenders``:
  ``memwall bench fidelity``'s measured step, ``memwall calibrate``'s compute
  probe and ``memwall bench cpu-adam``'s Python contenders;
- ``memwall.cli``: the command line the C++ side starts
  (``python <dir>/memwall/__main__.py ARGS``, or ``python -m memwall ARGS``);
- the Python API (issue 47), in-process through the extension memwall_core
  (``memwall.native``): ``memwall.estimate(model, batch, ...)``
  (``memwall.estimates``), ``memwall.plan(...)`` and ``memwall.load_plan``
  (``memwall.plans``), ``memwall.Trainer`` (``memwall.training``),
  ``memwall.MixedPrecision`` (``memwall.mixed_precision``), with
  ``memwall.Error`` and its ``BadInput``, ``RunFailed`` and ``OutOfMemory``.

Importing the package imports nothing else, torch included: the command
line says in one line when torch is missing.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """The API's names, imported when first used (torch only then)."""
    if name in ("estimate", "Estimate"):
        from memwall import estimates
        return getattr(estimates, name)
    if name in ("plan", "Plan", "load_plan", "Simulation"):
        from memwall import plans
        return getattr(plans, name)
    if name == "calibrate":
        from memwall import calibration
        return calibration.calibrate
    if name == "Trainer":
        from memwall import training
        return training.Trainer
    if name == "MixedPrecision":
        from memwall import mixed_precision
        return mixed_precision.MixedPrecision
    if name in ("Error", "BadInput", "RunFailed", "OutOfMemory"):
        from memwall import errors
        return getattr(errors, name)
    raise AttributeError(f"module 'memwall' has no attribute '{name}'")
