"""memwall.estimate: what one training step of your model needs on a GPU,
before you rent it: the memory by kind, the peak of eager PyTorch and of
memwall's default schedule, whether it fits, and the step's estimated time.

The step is traced on the meta device (no memory, no compute), in this
process, by the same tracer as ``memwall trace``; the C++ side
(memwall_core, memwall/report/inspection.h) computes the figures that
``memwall inspect`` prints.
"""
from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from memwall.errors import BadInput, TraceError

KINDS = ("param", "grad", "optim_state", "activation", "input", "workspace", "temp")


@dataclass
class Estimate:
    """One step's figures on a GPU profile (``print()`` shows the table)."""
    graph: str
    gpu: str
    param_count: int
    trainable_param_count: int
    bytes_by_kind: dict[str, int]
    peak_bytes: int  # memwall's default schedule: each buffer freed after its last use
    eager_peak_bytes: int | None  # eager PyTorch's, from the trace's lifetimes
    device_memory_bytes: int
    fits: bool
    shortfall_bytes: int
    iteration_time_s: float
    table: str = field(repr=False)
    json: dict[str, Any] = field(repr=False)

    def __str__(self) -> str:
        return self.table


def _own_loss(output: Any) -> Any:
    """The loss a model computes itself (Hugging Face models given labels)."""
    loss = getattr(output, "loss", None)
    if loss is None:
        raise BadInput("the model's output has no .loss: give loss_fn")
    return loss


_own_loss.whole_output = True  # type: ignore[attr-defined]


def profile_args(gpu: str) -> tuple[str, str]:
    """memwall_core's (gpu, gpu_file) for `gpu`: a built-in's name, a
    profile file (a path, or a name ending in .json), or "this": this
    machine's own device, calibrated once and cached (memwall.machine)."""
    if gpu == "this":
        from memwall.machine import this_profile
        return "", this_profile()
    if gpu.endswith(".json") or os.path.sep in gpu:
        return "", gpu
    return gpu, ""


DTYPES = ("fp32", "bf16", "fp16")


def optimizer_like(optimizer: Any, model: Any, copy_of_model: Any) -> Any:
    """A torch optimizer of `optimizer`'s class and settings (each group's)
    over `copy_of_model`'s parameters in place of `model`'s, matched by
    name; BadInput for a parameter the model does not have."""
    import torch

    names = {id(p): n for n, p in model.named_parameters()}
    copies = dict(copy_of_model.named_parameters())
    groups = []
    for group in optimizer.param_groups:
        params = []
        for p in group["params"]:
            if id(p) not in names:
                raise BadInput("the optimizer holds a tensor that is not one of the model's "
                               "parameters")
            params.append(copies[names[id(p)]])
        groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": params})
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise BadInput("the optimizer must be a torch.optim.Optimizer or a name")
    # Each group carries every setting; the constructor's own keywords
    # differ from its defaults' keys (AdamW's decoupled_weight_decay).
    made = type(optimizer)(groups)
    made.defaults = dict(optimizer.defaults)
    return made


def trace_graph(model: Any, batch: Any, loss_fn: Callable[..., Any] | None, optimizer: Any,
                name: str | None, dtype: str | None = None,
                kernels: str = "cuda") -> dict[str, Any]:
    """One training step of `model` traced on the meta device, on a copy of
    it: the memwall.graph/1 graph (a dict). `dtype` None trains the model
    in its own dtypes with torch's optimizer; "bf16" or "fp16" is mixed
    precision as ``memwall trace --hf --dtype`` traces it (the copy and the
    batch's floating inputs in 16 bits, an fp32 master of each parameter in
    the optimizer, memwall.MixedPrecision); "fp32" casts to fp32.
    Only the parameters that require a gradient are trained. `optimizer`:
    a name (sgd, momentum, adam, adamw) or a torch optimizer of the model,
    whose class and settings the trace uses. `kernels`: whose kernels the
    trace stands for, "cuda" or "cpu" (the emulated device's, for a plan
    memwall.Trainer runs). Raises BadInput on bad input."""
    import torch

    from memwall.sources.hf import mixed_precision
    from memwall.sources.optimizers import make_optimizer
    from memwall.tracer.trace import run_one

    if not isinstance(model, torch.nn.Module):
        raise BadInput("the model must be a torch.nn.Module")
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise BadInput("the batch must be a pair (inputs, target)")
    if dtype is not None and dtype not in DTYPES:
        raise BadInput(f"unknown dtype '{dtype}' (known: {', '.join(DTYPES)})")
    graph_name = name or type(model).__name__
    meta_copy = copy.deepcopy(model)
    if dtype is not None:
        to = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        meta_copy.to(to)
        batch = torch.utils._pytree.tree_map(
            lambda t: t.to(to) if isinstance(t, torch.Tensor) and t.is_floating_point() else t,
            batch)

    named = isinstance(optimizer, str)
    if not named and dtype in ("bf16", "fp16"):
        raise BadInput("mixed precision (dtype bf16/fp16) takes the optimizer by name")

    def build() -> Any:
        trainable = [p for p in meta_copy.parameters() if p.requires_grad]
        if not named:
            step = optimizer_like(optimizer, model, meta_copy)
        elif dtype in ("bf16", "fp16"):
            step = mixed_precision(trainable, optimizer)
        else:
            step = make_optimizer(optimizer, trainable)
        return meta_copy, batch, loss_fn or _own_loss, step

    optimizer_name = optimizer if named else type(optimizer).__name__.lower()
    try:
        traced = run_one(graph_name, {"model": graph_name, "optimizer": optimizer_name}, False,
                         build, kernels=kernels)
    except TraceError as e:
        raise BadInput(str(e)) from None
    traced.graph["name"] = graph_name
    return traced.graph


def estimate(model: Any, batch: Any, loss_fn: Callable[..., Any] | None = None,
             optimizer: Any = "adamw", gpu: str = "rtx4090", dtype: str | None = None,
             by_layer: bool = False, name: str | None = None,
             kernels: str = "cuda") -> Estimate:
    """One training step of `model` on `batch` under `optimizer`, on `gpu`.

    `batch` is ``(inputs, target)``: inputs a tensor, a tuple of positional
    arguments or a dict of keywords; `loss_fn(output, target)` (or
    `loss_fn(output)` when target is None) gives the loss; without
    `loss_fn` the model's own ``output.loss`` is used (a Hugging Face model
    given labels). `optimizer`: sgd, momentum, adam or adamw. `dtype`: None
    (the model's own dtypes), "fp32", or "bf16" / "fp16" mixed precision
    (16-bit parameters, activations and gradients; fp32 master weights and
    optimizer states). `gpu`: a
    built-in profile's name (``memwall gpus``) or a profile file (``memwall
    calibrate --out``). The model is not changed: the trace runs on a copy
    on the meta device (build it under ``torch.device("meta")`` and the
    copy costs nothing). `optimizer` may be the training's torch optimizer,
    and `kernels` "cpu" (as trace_graph takes them). Raises BadInput with
    one line on bad input.
    """
    from memwall.native import core

    graph = trace_graph(model, batch, loss_fn, optimizer, name, dtype, kernels)
    gpu_name, gpu_file = profile_args(gpu)
    native = core()
    try:
        text, table = native.inspect(json.dumps(graph, separators=(",", ":")), gpu_name,
                                     gpu_file, by_layer)
    except native.Error as e:
        raise BadInput(str(e)) from None
    j = json.loads(text)
    return Estimate(graph=j["graph"], gpu=j["gpu"], param_count=j["param_count"],
                    trainable_param_count=j["trainable_param_count"],
                    bytes_by_kind={k: j[f"{k}_bytes"] for k in KINDS},
                    peak_bytes=j["peak_bytes"], eager_peak_bytes=j.get("eager_peak_bytes"),
                    device_memory_bytes=j["device_memory_bytes"], fits=j["fits"],
                    shortfall_bytes=j["shortfall_bytes"], iteration_time_s=j["iteration_time_s"],
                    table=table, json=j)
