"""The values `memwall run` compares with (Note [Run inputs] in files.py):
what the traced step started from, and what plain eager PyTorch leaves
after N steps, on one rank or over N data-parallel ranks (Note
[Data-parallel reference])."""
from __future__ import annotations

import ctypes
import os
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from memwall.errors import TraceError, fail, first_line
from memwall.sources import Build, check_built
from memwall.tracer.devices import running_on
from memwall.tracer.dtypes import dtype_name
from memwall.tracer.graph_writer import Graph, write_json
from memwall.tracer.recorder import Recorder, storage_key
from memwall.tracer.step import LossFn, as_args, loss_of
from memwall.tracer.trace import TracedStep
from memwall.values.files import ValueFile, storage_bytes


def write_values(graph: Graph, step: TracedStep, steps: int, seed: int, out_dir: str,
                 ranks: int = 1) -> None:
    """Note [Run inputs] (files.py): the traced step's starting values, then
    `steps` - 1 more plain eager steps and what they leave; over `ranks` >
    1, Note [Data-parallel reference] instead. Writes out_dir's files,
    graph.json last."""
    if ranks > 1 and step.device.type != "cpu":
        fail(f"--ranks {ranks} with --device {step.device.type}: the data-parallel reference "
             "runs on the CPU only (not supported yet)")
    recorder = step.recorder
    new_id = step.new_id
    state = ValueFile(os.path.join(out_dir, "state.bin"))
    for old, data in sorted(recorder.values.items()):
        if old in new_id:
            state.add(new_id[old], data, recorder.buffers[old].name)
    rng = state.add_blob(storage_bytes(recorder.rng_state.untyped_storage()))
    meta: dict[str, Any] = {"seed": seed}
    if step.device.type == "cpu":
        meta.update(threads=torch.get_num_threads(), rng=rng)
    else:  # Note [Run inputs]: the rng blob is the device generator's
        meta.update(rng=rng, rng_device=step.device.type)
    meta["torch"] = torch.__version__
    if ranks > 1:
        meta["ranks"] = ranks
    state.close(os.path.join(out_dir, "state.json"), meta)
    if ranks == 1:
        meta = {"steps": steps, "losses": _eager_steps(step, steps)}
    else:
        batches = [step.batch] + [_rank_batch(step.build, seed + r, r) for r in range(1, ranks)]
        _write_rank_inputs(step, batches, seed, out_dir)
        rank_losses = _data_parallel_steps(step, batches, steps)
        meta = {"steps": steps, "ranks": ranks, "losses": rank_losses[0],
                "rank_losses": rank_losses}
    _write_eager(step, out_dir, meta)
    write_json(graph, os.path.join(out_dir, "graph.json"))


def _eager_steps(step: TracedStep, steps: int) -> list[float]:
    """The losses of the traced step and `steps` - 1 more on its batch."""
    losses = [step.recorder.loss_value]
    model, optimizer, loss_fn = step.model, step.optimizer, step.loss_fn
    inputs, target = step.batch
    try:
        with running_on(step.device):
            for _ in range(steps - 1):
                optimizer.zero_grad(set_to_none=True)
                args, kwargs = as_args(inputs)
                loss = loss_of(model(*args, **kwargs), target, loss_fn)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
    except Exception as e:
        fail(f"the eager steps after the traced one failed: {type(e).__name__}: {first_line(e)}")
    return losses


def _write_eager(step: TracedStep, out_dir: str, meta: dict[str, Any]) -> None:
    """eager.bin/json: the persistent storages' bytes now (parameters,
    module buffers, optimizer states) under the graph's ids."""
    recorder, new_id = step.recorder, step.new_id
    persistent = {}
    for t in (list(step.model.parameters()) + list(step.model.buffers())
              + _optimizer_tensors(step.optimizer)):
        persistent[storage_key(t)] = t.untyped_storage()
    eager = ValueFile(os.path.join(out_dir, "eager.bin"))
    for key, old in recorder.by_storage.items():
        if old in new_id and key in persistent:
            eager.add(new_id[old], storage_bytes(persistent[key]), recorder.buffers[old].name)
    eager.entries.sort(key=lambda e: e["id"])
    eager.close(os.path.join(out_dir, "eager.json"), meta)


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for st in optimizer.state.values() for v in st.values()
            if isinstance(v, torch.Tensor)]


# Note [Data-parallel reference]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# `--values DIR --ranks N` (N > 1): eager.bin is what N data-parallel ranks
# (DDP, or ZeRO's sharded equivalent) leave, each rank training on its own
# micro-batch. Rank 0's batch is the traced one; rank r's is the build's
# batch after torch.manual_seed(seed + r), written to inputs<r>.bin/json
# under the ids and names state.bin gives rank 0's input buffers. From the
# traced step's starting state (restored: the traced step changed it),
# each step runs, for r = 0..N-1 in order, forward, loss and backward on
# rank r's batch with:
#   - the CPU generator set to the step's starting state, the same for every
#     rank (each rank process seeds alike); the next step starts where the
#     last rank's left it;
#   - rank r's own module buffers (running statistics: DDP with
#     broadcast_buffers=False), all starting from the traced step's values.
# The gradient is the mean over ranks as torch DDP's allreduce hook makes
# it, each rank's gradient pre-divided by N and summed in rank order:
# acc = g_0 / N, then acc = acc + g_r / N (elementwise, in the gradient's
# dtype). One optimizer step on it, the same on every rank. eager.bin holds
# rank 0's values (its module buffers); eager.json's losses are rank 0's,
# the first equal to the traced step's, and rank_losses every rank's.


def _batch_tensors(batch: Any) -> list[torch.Tensor]:
    """The batch's tensors in trace_iteration's order."""
    inputs, target = batch
    return [t for t in tree_flatten((inputs, target))[0] if isinstance(t, torch.Tensor)]


def _rank_batch(build: Build, seed: int, rank: int) -> Any:
    """Rank `rank`'s batch: the build's after torch.manual_seed(seed); the
    CPU generator is left as it was."""
    rng = torch.get_rng_state()
    try:
        torch.manual_seed(seed)
        _, batch, _, _ = check_built(build())
    except TraceError:
        raise
    except Exception as e:
        fail(f"--ranks: building rank {rank}'s batch failed: {type(e).__name__}: "
             f"{first_line(e)}")
    finally:
        torch.set_rng_state(rng)
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        fail("the example batch must be a pair (inputs, target); target may be None")
    return batch


def _layout(t: torch.Tensor) -> tuple:
    return (t.dtype, list(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().nbytes())


def _rank_inputs(recorder: Recorder, batches: list[Any],
                 rank: int) -> list[tuple[int, torch.Tensor]]:
    """(input buffer's old id, rank `rank`'s tensor for it), by id."""
    first, mine = _batch_tensors(batches[0]), _batch_tensors(batches[rank])
    if len(mine) != len(first):
        fail(f"--ranks: rank {rank}'s batch has {len(mine)} tensors, rank 0's {len(first)}")
    chosen: dict[int, torch.Tensor] = {}
    for i, (t0, t) in enumerate(zip(first, mine)):
        if _layout(t) != _layout(t0):
            fail(f"--ranks: rank {rank}'s batch tensor {i} is {dtype_name(t.dtype)} "
                 f"{list(t.shape)}, rank 0's {dtype_name(t0.dtype)} {list(t0.shape)}: every "
                 f"rank's batch must have the same shapes, dtypes and layouts")
        old = recorder.buffer_of(t0)
        if storage_key(chosen.setdefault(old, t)) != storage_key(t):
            fail(f"--ranks: rank {rank}'s batch tensor {i} does not share its storage as "
                 f"rank 0's does")
    return sorted(chosen.items())


def _write_rank_inputs(step: TracedStep, batches: list[Any], seed: int, out_dir: str) -> None:
    """inputs<r>.bin/json for r = 1..N-1 (Note [Data-parallel reference])."""
    recorder = step.recorder
    for r in range(1, len(batches)):
        f = ValueFile(os.path.join(out_dir, f"inputs{r}.bin"))
        for old, t in _rank_inputs(recorder, batches, r):
            f.add(step.new_id[old], storage_bytes(t.untyped_storage()), recorder.buffers[old].name)
        f.close(os.path.join(out_dir, f"inputs{r}.json"), {"rank": r, "seed": seed + r})


def _restore_start(recorder: Recorder, model: torch.nn.Module,
                   optimizer: torch.optim.Optimizer) -> None:
    """Puts every parameter, module buffer and optimizer state back to the
    bytes the traced step started from (recorder.values)."""
    for t in list(model.parameters()) + list(model.buffers()) + _optimizer_tensors(optimizer):
        old = recorder.by_storage.get(storage_key(t))
        data = None if old is None else recorder.values.get(old)
        storage = t.untyped_storage()
        if data is None or len(data) != storage.nbytes():
            fail("--ranks: a model or optimizer state is not the one the traced step "
                 "started from (replaced or resized by the step)")
        ctypes.memmove(storage.data_ptr(), data, len(data))


def _stepped_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    params: dict[int, torch.Tensor] = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            params.setdefault(id(p), p)
    return list(params.values())


def _rank_step(model: torch.nn.Module, batch: Any, loss_fn: LossFn,
               params: list[torch.Tensor]) -> tuple[float, list[torch.Tensor | None]]:
    """Forward, loss and backward on one rank's batch; its loss and a
    clone of each parameter's gradient."""
    inputs, target = batch
    args, kwargs = as_args(inputs)
    loss = loss_of(model(*args, **kwargs), target, loss_fn)
    loss.backward()
    return loss.item(), [None if p.grad is None else p.grad.clone() for p in params]


def _mean_grads(params: list[torch.Tensor], grads: list[list[torch.Tensor | None]]) -> None:
    """p.grad = g_0 / N + g_1 / N + ..., in rank order."""
    n = len(grads)
    for i, p in enumerate(params):
        mine = [g[i] for g in grads]
        if all(g is None for g in mine):
            p.grad = None
            continue
        if any(g is None for g in mine):
            fail("--ranks: a parameter got a gradient on some ranks only")
        acc = torch.div(mine[0], n)
        for g in mine[1:]:
            acc = acc + torch.div(g, n)
        p.grad = acc


def _load(buffers: list[torch.Tensor], values: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for b, v in zip(buffers, values):
            b.copy_(v)


def _data_parallel_steps(step: TracedStep, batches: list[Any], steps: int) -> list[list[float]]:
    """Note [Data-parallel reference]: the steps; each rank's losses."""
    recorder, model = step.recorder, step.model
    _restore_start(recorder, model, step.optimizer)
    buffers = list(model.buffers())
    mine = [[b.clone() for b in buffers] for _ in batches]  # each rank's module buffers
    params = _stepped_params(step.optimizer)
    losses: list[list[float]] = [[] for _ in batches]
    torch.set_rng_state(recorder.rng_state)
    try:
        for _ in range(steps):
            for r, loss in enumerate(_data_parallel_step(step, batches, buffers, mine, params)):
                losses[r].append(loss)
            if losses[0][0] != recorder.loss_value:
                fail(f"--ranks: the reference's first loss {losses[0][0]!r} is not the traced "
                     f"step's {recorder.loss_value!r} (its starting state was not restored)")
    except TraceError:
        raise
    except Exception as e:
        fail(f"the data-parallel reference steps failed: {type(e).__name__}: {first_line(e)}")
    _load(buffers, mine[0])
    return losses


def _data_parallel_step(step: TracedStep, batches: list[Any], buffers: list[torch.Tensor],
                        mine: list[list[torch.Tensor]], params: list[torch.Tensor]) -> list[float]:
    """One step over every rank from the CPU generator's state now; each
    rank's loss. `mine[r]`: rank r's module buffers, before and after."""
    rng, grads, losses = torch.get_rng_state(), [], []
    for r, batch in enumerate(batches):
        torch.set_rng_state(rng)
        _load(buffers, mine[r])
        step.optimizer.zero_grad(set_to_none=True)
        loss, g = _rank_step(step.model, batch, step.loss_fn, params)
        grads.append(g)
        losses.append(loss)
        mine[r] = [b.clone() for b in buffers]
    _mean_grads(params, grads)
    step.optimizer.step()
    return losses
