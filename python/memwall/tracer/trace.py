"""Tracing one model: builds it (on the meta device unless the step runs for
real), records its training iteration and writes the graph with its meta."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from memwall.errors import OpFailed, TraceError, fail, first_line
from memwall.sources import Build, check_built
from memwall.tracer.devices import device_meta, kernels_of, move_step, running_on
from memwall.tracer.graph_writer import Graph, batch_size, param_dtype, to_graph, unique_params
from memwall.tracer.meta_device import MetaDeviceMode, to_meta
from memwall.tracer.recorder import Recorder
from memwall.tracer.step import LossFn, trace_iteration


@dataclass
class TracedStep:
    """A step traced on real tensors, as the trace left it, for the values
    (memwall.values.reference): the recorder with the step's starting
    values, the model, batch, loss and optimizer it ran, the build that
    made them, the graph's id of each recorder buffer, and the device it
    ran on (memwall.tracer.devices)."""
    recorder: Recorder
    model: torch.nn.Module
    batch: Any
    loss_fn: LossFn
    optimizer: torch.optim.Optimizer
    build: Build
    new_id: dict[int, int]
    device: torch.device


@dataclass
class Traced:
    """A trace: its graph, and the step when it ran on real tensors for its values."""
    graph: Graph
    step: TracedStep | None = None


def run_one(source: str, meta: dict[str, Any], measure: bool, build: Build,
            kernels: str = "cuda", calls: bool = True, values: bool = False,
            device: torch.device | None = None) -> Traced:
    """Builds (on meta unless measuring) and traces; returns the graph.
    `kernels`: whose kernels the meta trace stands for, "cuda" or "cpu"
    (what they save differs: dropout's mask); measuring runs the CPU's.
    With `values`, the step runs on real tensors of `device` (the CPU by
    default; built on the CPU, then moved: memwall.tracer.devices), keeps
    the values it starts from (Note [Run inputs] in
    memwall/values/files.py) and the result holds it as a TracedStep."""
    real = measure or values
    device = device if device is not None else torch.device("cpu")
    if device.type != "cpu" and (measure or not values):
        fail(f"a step on {device} is traced for its values only (no --measure)")
    if real:
        model, batch, loss_fn, optimizer = check_built(build())
        try:
            batch = move_step(model, batch, optimizer, device)
        except Exception as e:
            fail(f"{source}: moving the model and its batch to {device} failed: "
                 f"{type(e).__name__}: {first_line(e)}")
    else:
        with MetaDeviceMode(building=True):
            model, batch, loss_fn, optimizer = check_built(build())
        batch = to_meta(model, batch, optimizer)
    try:
        if real:
            with running_on(device):
                recorder = trace_iteration(model, batch, loss_fn, optimizer, measure,
                                           kernels_of(device), calls, values=values,
                                           device=device)
        else:
            # Note [Steady storages]: a meta step can be traced again, as
            # it changes no values; a real one (above) checks every storage.
            with MetaDeviceMode(building=False, kernels=kernels):
                recorder = trace_iteration(model, batch, loss_fn, optimizer, measure, kernels,
                                           calls, steady=True)
            if recorder.steady_died():
                with MetaDeviceMode(building=False, kernels=kernels):
                    recorder = trace_iteration(model, batch, loss_fn, optimizer, measure,
                                               kernels, calls)
    except OpFailed as e:
        fail(f"{source}: operator {e.op} failed: {e.why}")
    except TraceError:
        raise
    except Exception as e:
        fail(f"{source}: the training step failed: {type(e).__name__}: {first_line(e)}")
    meta = dict(meta)
    meta["param_count"] = sum(p.numel() for p in unique_params(model))
    meta["dtype"] = param_dtype(model)
    if "batch" not in meta:
        size = batch_size(batch)
        if size is not None:
            meta["batch"] = size
    if real:
        meta.update(device_meta(device))
    else:
        meta["device"] = "meta"
        meta["kernels"] = kernels
        if kernels == "cpu":  # devices.device_meta says why
            meta["threads"] = torch.get_num_threads()
    # Where the graph came from: the versions it was traced with.
    meta["torch"] = torch.__version__
    for package in ("torchvision", "transformers"):
        module = sys.modules.get(package)
        if module is not None and hasattr(module, "__version__"):
            meta[package] = module.__version__
    meta["source"] = "memwall trace"
    graph, new_id = to_graph(recorder, meta.get("model", source), meta)
    if not values:
        return Traced(graph)
    return Traced(graph, TracedStep(recorder, model, batch, loss_fn, optimizer, build, new_id,
                                    device))
