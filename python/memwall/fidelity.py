"""`memwall bench fidelity`'s measurement (--measure-peak): runs one real
training step on the CPU under PyTorch's autograd profiler with
profile_memory=True, which logs every allocation and free of the CPU
allocator in order with the running total, and reports the peak and the op
that reached it; with a trace for CUDA kernels, on the GPU, by the CUDA
caching allocator's peak. The command line calls it beside the meta-device trace of
the same step, so that the C++ side compares memwall's prediction with the
measurement (docs/cost-model.md, "Fidelity")."""
from __future__ import annotations

import bisect
import json
import os
import tempfile
from typing import Any, Callable, Iterable

import torch
from torch.utils._pytree import tree_flatten, tree_map

from memwall.errors import TraceError, fail, first_line, quiet_native_stderr
from memwall.sources import Build, check_built
from memwall.tracer.step import as_args, loss_of, warm_up_optimizer

# A profiler trace event (Chrome trace JSON).
Event = dict[str, Any]


def live_storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors` (views share one)."""
    seen = set()
    total = 0
    for t in tensors:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in seen:
            seen.add(key)
            total += storage.nbytes()
    return total


def _peak_op(events: list[Event], peak_ts: float) -> tuple[str, str]:
    """The outermost aten op running at `peak_ts` (the one the graph
    records: what it calls is inside it) and the autograd node around it."""
    around = [e for e in events
              if e.get("ph") == "X" and e.get("cat") == "cpu_op"
              and e["ts"] <= peak_ts <= e["ts"] + e.get("dur", 0)]
    around.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    aten = [e["name"] for e in around if e["name"].startswith("aten::")]
    node = [e["name"] for e in around
            if not e["name"].startswith(("aten::", "autograd::", "Optimizer."))]
    return (aten[0] if aten else "-"), (node[-1] if node else "")


# Top-level aten ops of the CPU run named as the graph's op types: the
# profiler sees the composite op the model called, the graph the kernel it
# dispatched to.
_GRAPH_TYPE = {
    "conv1d": "convolution", "conv2d": "convolution", "conv3d": "convolution",
    "_convolution": "convolution", "batch_norm": "native_batch_norm",
    "layer_norm": "native_layer_norm",
}


def op_scratch(events: list[Event]) -> list[list[Any]]:
    """Per top-level aten op, in order: its graph op type and its scratch,
    the highest running total inside it minus the total at its end (its
    outputs included) or before it, whichever is higher
    (docs/cost-model.md, "Kernel scratch")."""
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    times = [e["ts"] for e in memory]
    totals = [e["args"].get("Total Allocated", 0) for e in memory]
    ops = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                  and e["name"].startswith("aten::")), key=lambda e: (e["ts"], -e.get("dur", 0)))
    out = []
    end = -1
    for o in ops:
        if o["ts"] < end:
            continue  # inside the previous top-level op
        end = o["ts"] + o.get("dur", 0)
        i, j = bisect.bisect_left(times, o["ts"]), bisect.bisect_right(times, end)
        scratch = 0
        if i < j:
            before = totals[i - 1] if i > 0 else 0
            scratch = max(max(totals[i:j]) - max(totals[j - 1], before), 0)
        name = o["name"][len("aten::"):]
        out.append([_GRAPH_TYPE.get(name, name), int(scratch)])
    return out


def measure_step(step: Callable[[], None],
                 persistent: Callable[[], list[torch.Tensor]]) -> dict[str, Any]:
    """Runs `step()` (one training iteration) under the profiler. Returns
    the measured peak: the bytes of `persistent()` (model states and the
    batch, alive before the step) plus the highest running total the
    allocator reported during the step, and the op at that moment."""
    from torch.autograd.profiler import profile
    baseline = live_storage_bytes(persistent())
    with quiet_native_stderr():  # the profiler's start and stop lines (and its GPU probe's)
        with profile(profile_memory=True) as prof:
            step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    peak_event = max(memory, key=lambda e: e["args"].get("Total Allocated", 0), default=None)
    if peak_event is None:
        return {"measured_peak_bytes": baseline, "baseline_bytes": baseline,
                "measured_peak_op": "-", "measured_peak_node": "", "op_scratch": [],
                "torch": torch.__version__}
    op, node = _peak_op(events, peak_event["ts"])
    return {"measured_peak_bytes": baseline + int(peak_event["args"]["Total Allocated"]),
            "baseline_bytes": baseline, "measured_peak_op": op, "measured_peak_node": node,
            "op_scratch": op_scratch(events), "torch": torch.__version__}


def measure_cuda_step(step: Callable[[], None]) -> dict[str, Any]:
    """Runs `step()` on the GPU and returns its peak as PyTorch's CUDA
    caching allocator counts it (max_memory_allocated: every live block,
    the model states, the batch and cuBLAS's workspaces included, each
    block at the allocator's size; not the segments it reserved)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    baseline = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return {"measured_peak_bytes": int(torch.cuda.max_memory_allocated()),
            "baseline_bytes": int(baseline), "measured_peak_op": "-", "measured_peak_node": "",
            "op_scratch": [], "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0)}


def _to_cuda(value: Any) -> Any:
    return tree_map(lambda t: t.cuda() if isinstance(t, torch.Tensor) else t, value)


def measure_real_step(build: Build, device: str = "cpu") -> dict[str, Any]:
    """`--measure-peak`: the same training iteration as the trace's, run for
    real (a fresh model from `build`, the optimizer's states made by the
    same warm-up step): on the CPU under PyTorch's allocator records
    (measure_step), on `device` "cuda" (a trace for CUDA kernels) by the
    CUDA caching allocator's peak (measure_cuda_step)."""
    if device == "cuda" and not torch.cuda.is_available():
        fail(f"the real step runs on a GPU (a trace for CUDA kernels), and torch "
             f"{torch.__version__} sees none")
    torch.manual_seed(0)
    model, (inputs, target), loss_fn, optimizer = check_built(build())
    model.train()
    if device == "cuda":
        # In place: the optimizer keeps the same Parameter objects.
        model.cuda()
        inputs, target = _to_cuda(inputs), _to_cuda(target)
    warm_up_optimizer(model, optimizer)

    def persistent() -> list[torch.Tensor]:
        states = [v for state in optimizer.state.values() for v in state.values()
                  if isinstance(v, torch.Tensor)]
        batch = [t for t in tree_flatten((inputs, target))[0] if isinstance(t, torch.Tensor)]
        return list(model.parameters()) + list(model.buffers()) + states + batch

    def step() -> None:
        args, kwargs = as_args(inputs)
        output = model(*args, **kwargs)
        loss = loss_of(output, target, loss_fn)
        del output
        loss.backward()
        del loss
        optimizer.step()

    try:
        return measure_cuda_step(step) if device == "cuda" else measure_step(step, persistent)
    except TraceError:
        raise
    except Exception as e:
        where = "the GPU" if device == "cuda" else "the CPU"
        fail(f"the real step on {where} failed: {type(e).__name__}: {first_line(e)}")
