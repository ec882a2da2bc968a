"""The device a step traced on real tensors runs on (`python -m memwall
--values DIR --device cpu|cuda`; Note [Run inputs] in memwall/values/files.py).

One code path for every device: the model is built on the CPU as for any
trace, moved to the device, traced and stepped there, and its bytes are
read back to the host. Only what differs by device lives here: CUDA's
settings for reproducible kernels, the move, the generator the step's
random ops draw from, and the graph's meta. With the CPU every function
here leaves things as they were, so a CPU trace writes what it always did.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, ContextManager

import torch
from torch.utils._pytree import tree_map

from memwall.errors import fail

DEVICES = ("cpu", "cuda")


def real_device(name: str) -> torch.device:
    """`--device NAME` ready to trace on: CUDA's settings made before
    anything touches CUDA, or one line when torch sees no GPU."""
    if name == "cpu":
        return torch.device("cpu")
    if name != "cuda":
        fail(f"--device {name}: give one of {', '.join(DEVICES)}")
    # The traced step, eager's steps and the executor's replay must give the
    # same bits: cuBLAS with a fixed workspace (its reductions otherwise
    # depend on the workspace's size), deterministic kernels, and no cuDNN
    # autotuning (which may pick another algorithm per process). The
    # executor runs under the same settings.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    if not torch.cuda.is_available():
        fail(f"--device cuda: no CUDA GPU is visible to torch {torch.__version__} "
             "(torch.cuda.is_available() is false)")
    return torch.device("cuda", 0)


def kernels_of(device: torch.device) -> str:
    """Whose kernels a step on `device` runs (the graph's meta "kernels")."""
    return "cpu" if device.type == "cpu" else "cuda"


def device_meta(device: torch.device) -> dict[str, Any]:
    """The graph's meta for a step traced on `device`, in the order the
    graph lists it."""
    meta: dict[str, Any] = {"device": device.type, "kernels": kernels_of(device)}
    if device.type == "cpu":
        # The CPU kernels' scratch depends on the thread count (cpu_scratch.py:
        # per-thread rows, oneDNN's GEMM fallback): `memwall run` runs the
        # graph at the count it was traced with (request_for).
        meta["threads"] = torch.get_num_threads()
    else:
        meta["gpu"] = torch.cuda.get_device_name(device)
    return meta


def generator_state(device: torch.device) -> torch.Tensor:
    """The state of the generator a random op on `device` draws from (a CPU
    uint8 tensor): the CPU generator's, or the CUDA device's default
    generator's (its seed and philox offset, 8 bytes each)."""
    if device.type == "cpu":
        return torch.get_rng_state()
    return torch.cuda.get_rng_state(device)


def running_on(device: torch.device) -> ContextManager[Any]:
    """Where the step's own factories put their tensors: a model's code
    that makes a tensor without a device (gpt()'s causal mask) makes it on
    the device the step runs on, as it would for a user training there.
    Nothing with the CPU (a factory call keeps no device argument it was
    not given, so the CPU's call records stay as they were)."""
    if device.type == "cpu":
        return contextlib.nullcontext()
    return device


def move_step(model: torch.nn.Module, batch: Any, optimizer: torch.optim.Optimizer,
              device: torch.device) -> Any:
    """Moves the model and the optimizer's states to `device` (nothing with
    the CPU); returns the batch there."""
    if device.type == "cpu":
        return batch
    from memwall.tracer.meta_device import move_model
    move_model(model, optimizer, device)
    for group in optimizer.param_groups:
        # torch.optim keeps a step count on the CPU unless the group is
        # capturable or fused (Optimizer.load_state_dict's rule).
        keep_step = not (group.get("capturable") or group.get("fused"))
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and not (key == "step" and keep_step):
                    state[key] = value.to(device)
    return move_batch(batch, device)


def move_batch(batch: Any, device: torch.device) -> Any:
    """The batch's tensors copied to `device`, storage by storage: tensors
    that share a storage (an input and its shifted target, views of one
    sequence) still share one there, so the graph has the buffers a CPU
    trace has."""
    moved: dict[int, torch.UntypedStorage] = {}

    def one(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        source = t.untyped_storage()
        storage = moved.get(source._cdata)
        if storage is None:
            storage = torch.empty(source.nbytes(), dtype=torch.uint8,
                                  device=device).untyped_storage()
            storage.copy_(source)
            moved[source._cdata] = storage
        out = torch.empty(0, dtype=t.dtype, device=device)
        out.set_(storage, t.storage_offset(), t.size(), t.stride())
        return out.requires_grad_(t.requires_grad)

    return tree_map(one, batch)
