"""memwall.calibrate: a profile that knows your model's kernels on this
machine. Your model's step runs a few times under memwall's keep-all plan
(every tensor on the device, every op once) with each op's call timed;
the medians go into a copy of the profile as its measured kernels, which
the simulator then uses for the ops of that model (Note [Measured
kernels] in memwall/hw/hardware.h, as ``memwall calibrate --graph`` adds
them). Plans made with that profile predict their step from the kernels
this machine runs."""
from __future__ import annotations

import copy
import hashlib
import os
import statistics
from typing import Any, Callable

from memwall.errors import BadInput


def calibrate(model: Any, batch: Any, optimizer: Any, loss_fn: Callable[..., Any] | None = None,
              gpu: str = "this", steps: int = 6, out: str | None = None) -> str:
    """Times `model`'s training step (on copies of it and of `optimizer`, a
    torch optimizer of the model) for `steps` steps on `batch`; writes
    `gpu`'s profile with the measured kernels to `out` (default: beside
    this machine's cached profile, named after the step's graph) and
    returns its path. torch's generator is left as it was."""
    import torch

    from memwall.estimates import optimizer_like, profile_args
    from memwall.native import core
    from memwall.plans import write_whole
    from memwall.training import Trainer

    if steps < 2:
        raise BadInput("calibrate times the steps after the first: give at least 2")
    model_copy = copy.deepcopy(model)
    optimizer_copy = optimizer_like(optimizer, model, model_copy)
    rng = torch.get_rng_state()
    trainer = Trainer(model_copy, optimizer_copy, loss_fn=loss_fn, gpu=gpu,
                      strategy="remat:keep-all", time_kernels=True)
    try:
        measures = []
        for _ in range(steps):
            trainer.step(batch)
            measures.append(dict(trainer.last_step))
        kernel_seconds = trainer.kernel_seconds()
        plan = trainer.plan
    finally:
        trainer.close()
        torch.set_rng_state(rng)
    later = measures[1:]
    step_s = statistics.median(m["step_time_s"] for m in later)
    overhead_s = statistics.median(m["overhead_s"] for m in later)
    name, file = profile_args(gpu)
    native = core()
    try:
        text = native.profile_with_kernels(plan.graph_text, kernel_seconds, step_s, overhead_s,
                                           name, file)
    except native.Error as e:
        raise BadInput(str(e)) from None
    if out is None:
        from memwall.machine import profile_path
        digest = hashlib.sha256(plan.graph_text.encode()).hexdigest()[:12]
        out = profile_path().replace(".json", f"-{type(model).__name__}-{digest}.json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
    write_whole(out, text)
    return out
