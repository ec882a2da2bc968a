"""The recorded iteration as memwall.graph/1 JSON (DESIGN.md, "Graph"), and
the facts about the model its meta records."""
from __future__ import annotations

import bisect
import json
import os
from typing import Any, Iterator

import torch
from torch.utils._pytree import tree_flatten

from memwall.tracer.calls import remap
from memwall.tracer.dtypes import dtype_name
from memwall.tracer.recorder import Op, Recorder

Graph = dict[str, Any]


def to_graph(recorder: Recorder, name: str, meta: dict[str, Any]) -> tuple[Graph, dict[int, int]]:
    """The recorded iteration as memwall.graph/1, and the graph's id of each
    recorder buffer it keeps. Drops allocations that nothing reads
    (record_function's dummy handle in optimizer.step, batch norm's empty
    reserve): they read and update nothing either, so no other op depends
    on them. Drops model states that no op touches (optimizer states of
    parameters that got no gradient: a real run never creates them)."""
    read = set()
    for op in recorder.ops:
        read.update(op.ins)
        read.update(op.updates)
    kept = [i for i, op in enumerate(recorder.ops)
            if op.ins or op.updates or any(b in read for b in op.outs)]
    ops = [recorder.ops[i] for i in kept]
    used = set(read)
    for op in ops:
        used.update(op.outs)
    keep = [i for i, b in enumerate(recorder.buffers)
            if i in used or b.kind in ("param", "input")]
    new_id = {old: new for new, old in enumerate(keep)}
    buffers = []
    for old in keep:
        b = recorder.buffers[old]
        record: dict[str, Any] = {"id": new_id[old], "name": b.name, "bytes": int(b.nbytes),
                                  "kind": b.kind, "dtype": b.dtype,
                                  "shape": [int(d) for d in b.shape]}
        # Note [Eager lifetimes]: the new index of the last kept op at or
        # before the one it died after; null, alive at the end of the step.
        freed = b.freed_after
        record["eager_free"] = (None if freed is None
                                else max(bisect.bisect_right(kept, freed) - 1, 0))
        buffers.append(record)
    records = []
    for i, op in enumerate(ops):
        record = {"id": i, "name": op.name, "type": op.type, "phase": op.phase,
                  "in": [new_id[b] for b in op.ins], "out": [new_id[b] for b in op.outs],
                  "updates": [new_id[b] for b in op.updates], "workspace": int(op.workspace)}
        span = int(op.workspace_span)
        if span > op.workspace:  # Note [Workspace span] (graph/types.h)
            record["workspace_span"] = span
        if op.scratch_first:  # a buffer the tracer adds later (cuBLAS's) comes after: none
            record["scratch_first"] = op.scratch_first + [0] * (len(op.outs) -
                                                                len(op.scratch_first))
        if op.scratch_at:
            record["scratch_at"] = op.scratch_at
        record.update({"flops": float(op.flops), "bytes": float(op.bytes), "time": op.time})
        if op.call is not None:
            record["call"] = remap(op.call, new_id)
        records.append(record)
    if recorder.calls:
        meta = dict(meta)
        meta["calls"] = runnable(recorder, ops)
        if recorder.loss_ref is not None:
            meta["loss"] = remap(recorder.loss_ref, new_id)
    graph = {"format": "memwall.graph/1", "name": name, "meta": meta, "buffers": buffers,
             "ops": records}
    return graph, new_id


def runnable(recorder: Recorder, ops: list[Op]) -> dict[str, Any]:
    """Whether `memwall run` can replay the graph's calls, and if not why;
    the values the step's Python code read (Note [Values read by Python]
    in recorder.py), which a replay on another batch cannot follow."""
    if recorder.untracked_item is not None:
        return {"runnable": False, "why": f"the step reads {recorder.untracked_item}"}
    reads = {"value_reads": recorder.value_reads[:3]} if recorder.value_reads else {}
    for op in ops:
        if op.call is not None and "unsupported" in op.call:
            return {"runnable": False, "why": f"op {op.name} ({op.call['op']}) takes "
                    f"{op.call['unsupported']}"}
    if recorder.loss_ref is None:
        return {"runnable": False, "why": "the loss is not a tensor the trace recorded"}
    settings = {"settings": dict(sorted(recorder.settings_read.items()))} \
        if recorder.settings_read else {}
    return {"runnable": True, **reads, **settings}


def graph_name(model: str, meta: dict[str, Any], function: str | None = None) -> str:
    """"resnet50 b32 i224 fp32 traced", "my_model:build b8 bf16 traced": the
    model, batch, image side (torchvision) and dtype, so that plans made
    for one trace are not mistaken for another's."""
    parts = [f"{model}:{function}" if function else model]
    if "batch" in meta:
        parts.append(f"b{meta['batch']}")
    if "image" in meta:
        parts.append(f"i{meta['image']}")
    if "seq" in meta:
        parts.append(f"s{meta['seq']}")
    parts.append(meta["dtype"])
    if "lora_rank" in meta:
        parts.append(f"lora{meta['lora_rank']}")
    return " ".join(parts) + " traced"


def unique_params(model: torch.nn.Module) -> Iterator[torch.nn.Parameter]:
    """The model's parameters, each once (tied weights are one)."""
    seen = set()
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            yield p


def param_dtype(model: torch.nn.Module) -> str:
    """The floating dtype holding most parameter elements ("fp32", "bf16",
    ...): what a user means by the model's dtype. Mixed precision under
    autocast still keeps fp32 parameters and is reported as fp32."""
    elements: dict[torch.dtype, int] = {}
    for p in unique_params(model):
        if p.dtype.is_floating_point:
            elements[p.dtype] = elements.get(p.dtype, 0) + p.numel()
    if not elements:
        return "fp32"
    return dtype_name(max(elements, key=lambda d: elements[d]))


def batch_size(batch: Any) -> int | None:
    """The first dimension of the batch's first tensor, or None."""
    flat, _ = tree_flatten(batch)
    for t in flat:
        if isinstance(t, torch.Tensor) and t.dim() > 0:
            return int(t.shape[0])
    return None


def write_json(graph: dict[str, Any], path: str) -> None:
    """Writes compact JSON through PATH.tmp (memwall's private directory
    removes that name if interrupted), then renames it."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(graph, f, separators=(",", ":"))
    os.replace(tmp, path)
