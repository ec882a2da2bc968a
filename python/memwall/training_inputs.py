"""The batches and ranks of memwall.Trainer (training.py): a batch's
tensors as the tracer names them, the shapes a plan is made for, the
optimizer's settings a plan bakes in, and torchrun's ranks."""
from __future__ import annotations

import os
from typing import Any

from memwall.errors import BadInput


class EmptyInput:
    """An input of no bytes."""

    def data_ptr(self) -> int:
        return 0

    nbytes = 0


EMPTY_INPUT = EmptyInput()


def compact(batch: Any) -> Any:
    """The batch with each tensor in storage of its own (a view of a larger
    tensor traces as that tensor's whole storage)."""
    import torch

    return torch.utils._pytree.tree_map(
        lambda t: t.contiguous().clone() if isinstance(t, torch.Tensor) else t, batch)


def flat_batch(batch: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise BadInput("the batch must be a pair (inputs, target)")
    return [t for t in tree_flatten(tuple(batch))[0] if isinstance(t, torch.Tensor)]


def named_inputs(batch: Any, tensors: list[Any]) -> list[tuple[str, Any]]:
    """The graph's names of the batch's tensors, as the tracer registers
    them (memwall.tracer.step.trace_iteration): "input", "input.1", ...,
    and "target" for the target tensor."""
    target = batch[1]
    named = []
    for i, t in enumerate(tensors):
        name = "input" if i == 0 else f"input.{i}"
        if t is target and i > 0:
            name = "target"
        named.append((name, t))
    return named


def ranks_from_env(ranks: int | None) -> tuple[int, int]:
    """(rank, ranks): given, or torchrun's RANK and WORLD_SIZE."""
    world = int(os.environ.get("WORLD_SIZE", "1")) if ranks is None else ranks
    rank = int(os.environ.get("RANK", "0")) if world > 1 else 0
    if world < 1 or not 0 <= rank < world:
        raise BadInput(f"rank {rank} of {world} ranks: check RANK and WORLD_SIZE")
    if world > 1 and ("MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ):
        raise BadInput(f"{world} ranks meet at MASTER_ADDR:MASTER_PORT (torch.distributed's "
                       "env:// rendezvous), which are not set: start the processes with torchrun")
    return rank, world


def master_address() -> tuple[str, int]:
    return os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])


def shapes_of(batch: Any) -> tuple[Any, ...]:
    """What a plan is made for: each batch tensor's dtype and shape."""
    return tuple((str(t.dtype).replace("torch.", ""), tuple(t.shape)) for t in flat_batch(batch))


def shapes_text(key: tuple[Any, ...]) -> str:
    return ", ".join(f"{dtype} {list(shape)}" for dtype, shape in key)


def optimizer_settings(optimizer: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]


def untracked(settings: list[dict[str, Any]], tracked: list[bool]) -> list[dict[str, Any]]:
    """The settings without each group's lr where the step follows it (Note
    [Tracked settings] in memwall/tracer/calls.py)."""
    return [{k: v for k, v in g.items() if not (k == "lr" and t)}
            for g, t in zip(settings, tracked)]


def first_change(before: list[dict[str, Any]], now: list[dict[str, Any]]) -> str:
    for i, (a, b) in enumerate(zip(before, now)):
        for key in a:
            if a[key] != b.get(key):
                return f"group {i}'s {key}: {a[key]} -> {b.get(key)}"
    return "its groups"


def torch_dtype(name: str) -> Any:
    """A floating dtype by memwall's name (a graph buffer's "fp32", "bf16")
    or c10's (a call record's "Float", "BFloat16"); fp32 for others."""
    import torch

    return {"fp32": torch.float32, "Float": torch.float32, "fp16": torch.float16,
            "Half": torch.float16, "bf16": torch.bfloat16, "BFloat16": torch.bfloat16,
            "fp64": torch.float64, "Double": torch.float64}.get(name, torch.float32)


def rank_slice(whole: Any, rank: int, size: int) -> Any:
    """Rank `rank`'s shard of `whole` (Note [Sharded states] in training_ranks.py):
    elements [rank * size, rank * size + size) of it flattened, zeros past
    its end."""
    import torch

    flat = whole.reshape(-1)
    part = flat[rank * size:(rank + 1) * size]
    out = torch.zeros(size, dtype=whole.dtype)
    out[:part.numel()] = part
    return out
