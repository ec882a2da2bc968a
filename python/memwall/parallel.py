"""Run a memwall pipeline / tensor-parallel layout with PyTorch's own
parallelism, and measure each rank's memory against memwall's prediction.

    torchrun --nnodes 1 --nproc-per-node N -m memwall.parallel layout.json \\
        [--backend gloo|nccl] [--device cpu|cuda] [--steps 3] [--report DIR]

layout.json is `memwall plan ... --pipeline-parallel P --tensor-parallel T
--torchrun DIR`'s (format memwall-torch-layout/1). Ranks are Megatron-LM's:
global rank = pp * (D * T) + dp * T + tp. Each rank builds its pipeline
chunks of memwall's zoo GPT-2 or Llama (memwall.parallel_model,
memwall.parallel_llama), shards their weights with parallelize_module
(memwall.parallel_kernels.ShardParams on a DeviceMesh (pp, dp, tp); the
kernels do the tensor- and sequence-parallel collectives), runs the
layout's schedule with torch.distributed.pipelining and the layout's
optimizer for --steps steps, and writes
DIR/rank<R>.json: its measured peak, its breakdown and memwall's
predicted peak for its stage.

Note [Measuring a rank's memory]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
torch.distributed._tools.mem_tracker.MemTracker (a TorchDispatchMode that
follows every output storage until it dies, DTensor's inner local ops
included) counts each rank's live tensors: parameters, gradients, optimizer
states, activations, temporaries, pipelining's receive buffers. Its
per-module statistics are switched off (they refuse a module run once a
micro-batch). torch.profiler's allocator events were tried first: they
drop the frees that happen on gloo's worker threads (a sent tensor's last
reference), so the live count drifted up ~1 MB a step. Not counted:
gloo's internal scratch (its own malloc).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from pathlib import Path
from typing import Any

FORMAT = "memwall-torch-layout/1"
SCHEDULES = ("gpipe", "1f1b", "interleaved")
OPTIMIZERS = ("adam", "adamw")
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class LayoutError(ValueError):
    """A layout.json the runner cannot run; the message is one line."""


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise LayoutError(f"layout: {where} has no \"{key}\"")
    value = obj[key]
    if isinstance(value, bool) and kind is not bool and bool not in (
            kind if isinstance(kind, tuple) else (kind,)):
        raise LayoutError(f"layout: {where}.{key} must be a number, not {json.dumps(value)}")
    if not isinstance(value, kind):
        raise LayoutError(f"layout: {where}.{key} has the wrong type ({json.dumps(value)[:40]})")
    return value


def validate(layout: Any) -> dict[str, Any]:
    """Check a layout.json's fields; raise LayoutError naming the first problem."""
    if not isinstance(layout, dict):
        raise LayoutError("layout: the file is not a JSON object")
    fmt = layout.get("format")
    if fmt != FORMAT:
        raise LayoutError(f"layout: format is {json.dumps(fmt)}, expected \"{FORMAT}\"")
    model = _need(layout, "model", str, "layout")
    if not model.startswith(("gpt2", "llama")):
        raise LayoutError(f"layout: model {model} is not supported (GPT-2 and Llama models only)")
    shape = _need(layout, "shape", dict, "layout")
    keys = ("layers", "hidden", "heads", "vocab", "positions")
    if model.startswith("llama"):
        keys += ("kv_heads", "ffn")
    for key in keys:
        if _need(shape, key, int, "shape") <= 0:
            raise LayoutError(f"layout: shape.{key} must be positive")
    if shape["hidden"] % shape["heads"]:
        raise LayoutError("layout: shape.hidden is not a multiple of shape.heads")
    if model.startswith("llama") and (shape["heads"] % shape["kv_heads"]
                                      or (shape["hidden"] // shape["heads"]) % 2):
        raise LayoutError("layout: shape.heads is not a multiple of shape.kv_heads, "
                          "or the head size is odd (rotary halves)")
    for key in ("seq", "micro_batch", "micro_batches", "pipeline_devices",
                "tensor_parallel", "data_parallel", "chunks_per_device", "padded_vocab"):
        if _need(layout, key, int, "layout") <= 0:
            raise LayoutError(f"layout: {key} must be positive")
    if layout["seq"] > shape["positions"]:
        raise LayoutError(f"layout: seq {layout['seq']} is longer than shape.positions")
    dtype = _need(layout, "dtype", str, "layout")
    if dtype not in DTYPES:
        raise LayoutError(f"layout: dtype {dtype} is not one of {', '.join(DTYPES)}")
    if _need(layout, "optimizer", str, "layout") not in OPTIMIZERS:
        raise LayoutError(f"layout: optimizer {layout['optimizer']} is not supported "
                          f"({', '.join(OPTIMIZERS)})")
    if _need(layout, "schedule", str, "layout") not in SCHEDULES:
        raise LayoutError(f"layout: schedule {layout['schedule']} is not supported "
                          f"({', '.join(SCHEDULES)})")
    t, p = layout["tensor_parallel"], layout["pipeline_devices"]
    if _need(layout, "sequence_parallel", bool, "layout") and layout["seq"] % t:
        raise LayoutError(f"layout: seq {layout['seq']} does not split over {t} "
                          "sequence-parallel ranks")
    if shape["heads"] % t or shape["hidden"] % t:
        raise LayoutError(f"layout: {shape['heads']} heads do not split over {t} ranks")
    if model.startswith("llama") and (shape["kv_heads"] % t or shape["ffn"] % t):
        raise LayoutError(f"layout: {shape['kv_heads']} key-value heads or ffn "
                          f"{shape['ffn']} do not split over {t} ranks")
    if layout["padded_vocab"] < shape["vocab"] or layout["padded_vocab"] % t:
        raise LayoutError("layout: padded_vocab is below vocab or does not split over the ranks")
    chunks = _need(layout, "chunks", list, "layout")
    if len(chunks) != p * layout["chunks_per_device"]:
        raise LayoutError(f"layout: {len(chunks)} chunks for {p} devices x "
                          f"{layout['chunks_per_device']} chunks a device")
    end = 0
    for i, chunk in enumerate(chunks):
        where = f"chunks[{i}]"
        if not isinstance(chunk, dict):
            raise LayoutError(f"layout: {where} is not an object")
        span = _need(chunk, "layers", list, where)
        if len(span) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                     for x in span):
            raise LayoutError(f"layout: {where}.layers must be [first, end)")
        first, stop = span
        if first != end or stop < first:
            raise LayoutError(f"layout: {where}.layers {chunk['layers']} does not follow layer {end}")
        end = stop
        device = _need(chunk, "device", int, where)
        if not 0 <= device < p:
            raise LayoutError(f"layout: {where}.device {device} is not a pipeline device")
        if _need(chunk, "embedding", bool, where) != (i == 0):
            raise LayoutError(f"layout: the embedding must be in chunks[0] alone ({where})")
        if _need(chunk, "head", bool, where) != (i == len(chunks) - 1):
            raise LayoutError(f"layout: the head must be in the last chunk alone ({where})")
    if end != shape["layers"]:
        raise LayoutError(f"layout: the chunks hold {end} of {shape['layers']} layers")
    devices = _need(layout, "devices", list, "layout")
    if len(devices) != p:
        raise LayoutError(f"layout: {len(devices)} devices for {p} pipeline devices")
    for i, dev in enumerate(devices):
        if not isinstance(dev, dict):
            raise LayoutError(f"layout: devices[{i}] is not an object")
        _need(dev, "peak_bytes", int, f"devices[{i}]")
        _need(dev, "states_bytes", int, f"devices[{i}]")
    return layout


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate layout.json."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise LayoutError(f"layout: cannot read {path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise LayoutError(f"layout: {path} is not JSON (line {e.lineno}: {e.msg})") from None
    return validate(data)


def _seeded_init(module: Any, torch: Any) -> None:
    """Parameters from a seed per name, so every rank builds the same full
    weights before sharding, and the last stage's copy of GPT-2's tied head
    equals the first stage's embedding (Megatron-LM initialises both alike);
    norms' scales 1, biases 0."""
    for name, p in module.named_parameters():
        key = "wte.weight" if name.endswith("lm_head.weight") else name
        gen = torch.Generator().manual_seed(zlib.crc32(key.encode()))
        with torch.no_grad():
            if name.endswith("bias"):
                p.zero_()
            elif p.dim() == 1:  # LayerNorm / RMSNorm scales
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)


def _build_stage(layout: dict[str, Any], chunk: dict[str, Any]) -> Any:
    """The chunk's blocks of the layout's model, unsplit."""
    first, end = chunk["layers"]
    if layout["model"].startswith("llama"):
        from memwall.parallel_llama import LlamaStage
        return LlamaStage(layout["model"], layout["shape"], layout["padded_vocab"], first, end,
                          chunk["embedding"], chunk["head"])
    from memwall.parallel_model import Gpt2Stage
    return Gpt2Stage(layout["shape"], layout["padded_vocab"], first, end, chunk["embedding"],
                     chunk["head"])


def _tracker() -> Any:
    """MemTracker without its per-module statistics, which refuse a module
    run more than once an iteration (every micro-batch runs it again)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    class _RankTracker(MemTracker):
        def _pre_fw_hook(self, module: Any, inputs: Any) -> None:
            pass

        def _post_fw_hook(self, module: Any, inputs: Any, outputs: Any) -> None:
            pass

        def _pre_bw_hook(self, module: Any, args: Any) -> None:
            pass

        def _post_bw_hook(self, module: Any, args: Any) -> None:
            pass

    return _RankTracker()


def _snapshot(tracker: Any, kind: str) -> dict[str, int]:
    """MemTracker's bytes by category (parameter, gradient, optimizer state,
    activation, temporary, buffer, Total), summed over devices."""
    out: dict[str, int] = {}
    for per_kind in tracker.get_tracker_snapshot(kind).values():
        for name, value in per_kind.items():
            key = str(name).split(".")[-1]
            out[key] = out.get(key, 0) + int(value)
    return out


def _storage_bytes(tensors: list[Any]) -> int:
    from torch.distributed.tensor import DTensor
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if isinstance(t, DTensor) else t
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m memwall.parallel",
                                     description="run a memwall torch layout under torchrun")
    parser.add_argument("layout")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--report", default=None)
    args = parser.parse_args(argv)
    try:
        layout = load(args.layout)
    except LayoutError as e:
        print(f"memwall.parallel: {e}", file=sys.stderr)
        return 2
    if args.steps < 1:
        print("memwall.parallel: --steps must be at least 1", file=sys.stderr)
        return 2
    return _train(layout, args)


def _train(layout: dict[str, Any], args: Any) -> int:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B)
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import parallelize_module

    from memwall import parallel_kernels as pk
    from memwall.parallel_model import tie_embeddings

    p, d, t = layout["pipeline_devices"], layout["data_parallel"], layout["tensor_parallel"]
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != p * d * t:
        print(f"memwall.parallel: the layout needs {p * d * t} processes, torchrun started "
              f"{world}", file=sys.stderr)
        dist.destroy_process_group()
        return 2
    pp, dp, tp = rank // (d * t), (rank // t) % d, rank % t
    device = torch.device(args.device, int(os.environ.get("LOCAL_RANK", "0"))
                          if args.device == "cuda" else None) if args.device == "cuda" \
        else torch.device("cpu")
    dtype = getattr(torch, DTYPES[layout["dtype"]])
    if args.device == "cpu" and dtype != torch.float32:
        print("memwall.parallel: only fp32 runs on the CPU", file=sys.stderr)
        return 2
    mesh = init_device_mesh(args.device, (p, d, t), mesh_dim_names=("pp", "dp", "tp"))
    tp_mesh = mesh["tp"]
    pp_group = mesh["pp"].get_group()
    torch.manual_seed(1000 + rank)  # dropout masks differ by rank; memory does not

    chunks = layout["chunks"]
    mine = [i for i, c in enumerate(chunks) if c["device"] == pp]
    b, s, m = layout["micro_batch"], layout["seq"], layout["micro_batches"]
    sequence = layout["sequence_parallel"] and t > 1
    tp_group = pk.TPGroup(tp_mesh.get_group() if t > 1 else None, t, tp, sequence)
    s_between = s // t if sequence else s  # SP: stages exchange [b, s/t, h]
    stages, modules = [], []
    for ci in mine:
        c = chunks[ci]
        module = _build_stage(layout, c)
        _seeded_init(module, torch)
        module.to(device=device, dtype=dtype)
        if t > 1:
            parallelize_module(module, tp_mesh, pk.tp_plan(module))
        pk.set_tp_group(module, tp_group)
        if hasattr(module, "wte"):
            tie_embeddings(module)  # GPT-2 with embedding and head on one stage
        pk.allocate_grads(module)
        h = layout["shape"]["hidden"]
        meta = torch.device("meta")
        # Static metadata (no extra forward to infer it); received
        # activations and sent outputs carry gradients.
        inp = torch.empty(b, s, dtype=torch.long, device=meta) if c["embedding"] \
            else torch.empty(b, s_between, h, dtype=dtype, device=meta, requires_grad=True)
        out = torch.empty(1, dtype=dtype, device=meta, requires_grad=True) if c["head"] \
            else torch.empty(b, s_between, h, dtype=dtype, device=meta, requires_grad=True)
        stages.append(PipelineStage(module, ci, len(chunks), device, input_args=(inp,),
                                    output_args=(out,), group=pp_group))
        modules.append(module)
    params = [q for mod in modules for q in mod.parameters()]
    opt_class = torch.optim.AdamW if layout["optimizer"] == "adamw" else torch.optim.Adam
    # foreach=False: one parameter at a time, as memwall's optimizer ops.
    optimizer = opt_class(params, lr=1e-4, foreach=False)

    def loss_fn(out: Any, target: Any) -> Any:
        return out  # the last stage computes the loss itself

    kind = layout["schedule"]
    if kind == "interleaved" or len(stages) > 1:
        schedule: Any = ScheduleInterleaved1F1B(stages, m, loss_fn=loss_fn)
    else:
        cls = ScheduleGPipe if kind == "gpipe" else Schedule1F1B
        schedule = cls(stages[0], m, loss_fn=loss_fn)

    # Megatron-LM's embedding group: the first and last stage's tied tables.
    tied_group = None
    if p > 1 and layout["model"].startswith("gpt2"):
        for dd in range(d):
            for tt in range(t):
                ranks = [dd * t + tt, (p - 1) * d * t + dd * t + tt]
                group = dist.new_group(ranks)
                if rank in ranks:
                    tied_group = group
    dp_group = mesh["dp"].get_group() if d > 1 else None
    vocab = layout["shape"]["vocab"]
    data = torch.Generator().manual_seed(7)
    losses_out: list[float] = []
    tracker = _tracker()  # Note [Measuring a rank's memory]
    tracker.track_external(*modules, optimizer)
    tracker.__enter__()
    per_step: list[dict[str, Any]] = []
    for step in range(args.steps):
        ids = torch.randint(0, vocab, (m * b, s), generator=data).to(device)
        labels = torch.randint(0, vocab, (m * b, s), generator=data).to(device)
        if True:
            for mod in modules:
                if mod.has_head:
                    mod.labels.extend(labels.split(b))
            losses: list[Any] = []
            has_first = any(chunks[ci]["embedding"] for ci in mine)
            has_last = any(chunks[ci]["head"] for ci in mine)
            call_args = (ids,) if has_first else ()
            if has_last:
                schedule.step(*call_args, target=labels, losses=losses)
            else:
                schedule.step(*call_args)
            if tied_group is not None:
                for mod in modules:
                    w = mod.tied_weight()
                    if w is not None:
                        dist.all_reduce(pk.local(w.grad), group=tied_group)
            if sequence:
                # Each rank saw s/t positions: the replicated weights' (norms,
                # biases after a row split, positions) gradients are partial
                # (Megatron's allreduce_sequence_parallel_grads; in place).
                for q in params:
                    if not isinstance(q, DTensor):
                        dist.all_reduce(q.grad, group=tp_group.group)
            if dp_group is not None:
                for q in params:
                    dist.all_reduce(pk.local(q.grad), group=dp_group)
                    pk.local(q.grad).div_(d)
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
        losses_out.extend(float(x.detach()) for x in losses)
        per_step.append(_snapshot(tracker, "peak"))
    del ids, labels
    tracker.__exit__(None, None, None)
    states = _storage_bytes(params + [q.grad for q in params] + [
        v for st in optimizer.state.values() for v in st.values() if torch.is_tensor(v)])
    recv = _storage_bytes([info.buffer for st in stages for infos in st.args_recv_info.values()
                           for info in infos if getattr(info, "buffer", None) is not None]
                          + [info.buffer for st in stages for infos in st.grad_recv_info.values()
                             for info in infos if getattr(info, "buffer", None) is not None])
    peak_kinds = per_step[-1]
    peak = peak_kinds.get("Total", 0)
    predicted = layout["devices"][pp]
    report = {
        "rank": rank, "stage": pp, "data_parallel_rank": dp, "tensor_parallel_rank": tp,
        "chunks": mine, "measured_peak_bytes": peak, "peak_by_kind": peak_kinds,
        "measured_states_bytes": states, "receive_buffers_bytes": recv,
        "activations_and_temporaries_bytes": peak - states - recv,
        "predicted_peak_bytes": predicted["peak_bytes"],
        "predicted_states_bytes": predicted["states_bytes"],
        "ratio": peak / predicted["peak_bytes"] if predicted["peak_bytes"] else None,
        "steps": per_step, "losses": losses_out,
    }
    if args.report:
        Path(args.report).mkdir(parents=True, exist_ok=True)
        (Path(args.report) / f"rank{rank}.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"rank {rank} stage {pp}: measured {peak} B, predicted {predicted['peak_bytes']} B "
          f"({report['ratio']:.4f}), states {states} / {predicted['states_bytes']} B")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
