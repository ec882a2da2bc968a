"""memwall.Trainer: your model trained under a plan, in your own loop.

    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget="50%peak")
    for inputs, target in loader:
        loss = trainer.step((inputs, target))

The first step traces the model's training step on the meta device (for the
CPU's kernels: the executor's device is emulated by this CPU, Note
[Emulated device] in src/exec/device_memory.h), plans it (memwall.plan) and
opens an executor session (memwall_core.Session, memwall/exec/session.h)
that places the model's states where the plan keeps them. Every step then
runs the plan on the batch it is given.

Note [The model's own tensors]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Between steps each Parameter, module buffer and optimizer state of the
model is a view of the session's copy (Note [Session views] in
src/exec/session.cc): the model is not kept twice, and
``model.state_dict()``, ``torch.save``, ``model.eval()`` with a validation
pass and ``optimizer.state_dict()`` all see the trained values. A state the
plan keeps on NVMe is read into a fresh tensor after each step (a copy).
Before each step the views are dropped (each tensor's ``.data`` becomes an
empty tensor) and after it taken again: a step may move a state, and must
find its memory free. Changing a state's values between steps goes through
``Trainer.load_state_dict``, which writes every copy the plan holds.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from memwall.errors import BadInput, Error, OutOfMemory, RunFailed
from memwall.training_inputs import (
    EMPTY_INPUT,
    compact,
    rank_slice,
    flat_batch,
    named_inputs,
    shapes_of,
    shapes_text,
    optimizer_settings,
    first_change,
    torch_dtype,
    untracked)
from memwall.training_ranks import Ranks

SUPPORTED_OPTIMIZERS = ("SGD", "Adam", "AdamW", "MixedPrecision")


@dataclass
class _Bound:
    """A graph buffer the session holds and the model tensor it stands for."""
    buffer: int
    name: str
    owner: Any  # the Parameter, or (module, buffer name), or (state dict, key)
    dtype: Any
    shape: tuple[int, ...]
    bytes: int
    # A master copy a rewrite added (memwall's offload: "<param>.master"),
    # which starts as its parameter: written from it, never a view.
    master: bool = False
    # Note [Sharded states]: a rank's 1/N shard of an optimizer state.
    shard: bool = False
    # A stage-3 parameter shard's whole shape (Note [Sharded parameters]).
    whole_shape: tuple[int, ...] | None = None


class Trainer:
    """Trains `model` with `optimizer` under a memwall plan, a step per batch.

    `plan`: a memwall.Plan made for this model and optimizer with
    ``kernels="cpu"`` (memwall.plan(model, batch, optimizer=optimizer,
    kernels="cpu", ...)); None plans at the first step with `budget`,
    `gpu`, `strategy` and `time_limit` as memwall.plan takes them.
    `loss_fn(output, target)` gives the loss (None: the model's own
    ``output.loss``). `nvme`: directories for the plan's NVMe swap space.
    `time_kernels`: time each op's call in every step after the first
    (kernel_seconds(), memwall.calibrate).

    `ranks`: data-parallel processes (None: torchrun's WORLD_SIZE, else
    1), each with its own batches (Note [Ranks under torchrun] in
    training_ranks.py), in ZeRO
    stage `zero_stage` (0-3: Note [Sharded states], Note [Sharded
    parameters]).

    Note [Batches of other shapes]: a batch whose tensors' shapes or dtypes
    were not seen before (bucketed sequence lengths) is traced and planned
    once, with a one-line note on stderr, and its plan kept (at most
    `max_plans`; one more is an error that says so). Each plan runs in its
    own session: changing shapes moves the model's states from one session
    to the other (a copy of each), so batches of one shape in a row cost
    least.
    """

    def __init__(self, model: Any, optimizer: Any, plan: Any = None,
                 loss_fn: Callable[..., Any] | None = None, *, budget: str | int | None = None,
                 gpu: str = "l4", strategy: str = "auto", time_limit: float = 10.0,
                 nvme: str | list[str] | None = None, host_bytes: int = 0,
                 time_kernels: bool = False, max_plans: int = 8,
                 ranks: int | None = None, zero_stage: int = 0) -> None:
        import torch

        if not isinstance(model, torch.nn.Module):
            raise BadInput("the model must be a torch.nn.Module")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise BadInput("the optimizer must be a torch.optim.Optimizer")
        if type(optimizer).__name__ not in SUPPORTED_OPTIMIZERS:
            raise BadInput(f"optimizer {type(optimizer).__name__}: the trainer runs "
                           f"{', '.join(SUPPORTED_OPTIMIZERS)} so far")
        self.model = model
        self.optimizer = optimizer
        self.plan = plan
        self.loss_fn = loss_fn
        self.budget = budget
        self.gpu = gpu
        self.strategy = strategy
        self.time_limit = time_limit
        self.nvme = [nvme] if isinstance(nvme, str) else list(nvme or [])
        self.host_bytes = host_bytes
        self.time_kernels = time_kernels
        if max_plans < 1:
            raise BadInput("max_plans must be at least 1")
        self.max_plans = max_plans
        self._plans: dict[tuple[Any, ...], Any] = {}  # by the batch's shapes
        self._key: tuple[Any, ...] | None = None  # the open session's
        self._ranks = Ranks(ranks)  # Note [Ranks under torchrun] (training_ranks.py)
        self.rank, self.ranks = self._ranks.rank, self._ranks.ranks
        if zero_stage not in (0, 1, 2, 3):
            raise BadInput(f"ZeRO stage {zero_stage}: ZeRO has stages 0, 1, 2 and 3")
        self.zero_stage = zero_stage
        self.steps = 0
        self.last_step: dict[str, Any] = {}  # the executor's measures of the last step
        self._session: Any = None
        self._bound: list[_Bound] = []
        self._inputs: list[tuple[str, Any, tuple[int, ...]]] = []  # (name, dtype, shape)
        self._empty_inputs: list[str] = []  # the graph's empty external inputs
        self._settings = optimizer_settings(optimizer)
        self._tracked: dict[str, float] = {}  # Note [Tracked settings]: name -> traced value
        self._given: dict[str, float] = {}  # the values the session was given

    # ---- Training ------------------------------------------------------------------------

    def step(self, batch: Any) -> Any:
        """One training step on `batch` (``(inputs, target)`` as memwall.plan
        takes it); the loss, a 0-dim tensor."""
        import torch

        key = shapes_of(batch)
        if self._session is None or key != self._key:
            self._switch(key, batch)
        self._apply_settings()
        tensors = self._batch_tensors(batch)
        self._unbind()
        try:
            measure = self._session.step(
                [(name, t.data_ptr(), t.nbytes) for name, t in tensors])
        except Exception as e:
            self._fail(e)
        finally:
            # Ctrl-C arrives once the step is back (it runs without the GIL):
            # the model's tensors are views again before it is raised.
            if self._session is not None:
                self._bind()
        self.steps += 1
        self.last_step = measure
        # The executor ran optimizer.step's work: a learning-rate scheduler
        # stepped after it is in order (torch's check of the call order).
        self.optimizer._opt_called = True
        return torch.tensor(measure["loss"], dtype=self._loss_dtype)

    @property
    def nvme_reserved_bytes(self) -> int:
        """The swap space the session holds on NVMe (0: none, or not open)."""
        return int(self._session.nvme_reserved_bytes()) if self._session is not None else 0

    def kernel_seconds(self) -> list[float]:
        """With time_kernels: each graph op's median call so far (-1: not timed)."""
        return list(self._session.kernel_seconds()) if self._session is not None else []

    def close(self) -> None:
        """Ends the session: the model's tensors become its own again (copies
        of the session's), and the session's memory goes."""
        if self._session is None:
            return
        import torch

        for b in self._views():
            data = torch.empty(b.shape, dtype=b.dtype)
            self._session.read(b.buffer, data.data_ptr(), b.bytes)
            self._set(b, data)
        for b, whole in self._gather():
            self._set(b, whole)
        self._session.close()
        self._session = None
        self._ranks.end_group()

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """In ZeRO stage 3, the model's whole parameters for the `with` block
        (a validation pass, a look at the weights): gathered from every
        rank, which must all enter it (a collective), as copies whose
        changes are not kept (Note [Sharded parameters]). Otherwise the
        model as it is."""
        gathered = self._gather() if self._session is not None else []
        try:
            for b, whole in gathered:
                self._set(b, whole)
            yield
        finally:
            if gathered and self._session is not None:
                self._bind()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._session is not None and exc[0] is None:
            self.close()
        elif self._session is not None:
            self._session.close()
            self._session = None
        self._ranks.end_group()

    # ---- Saving and resuming ---------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """What resuming needs: the model's and the optimizer's state dicts,
        the steps taken and torch's CPU generator state; copies, not views of
        the session's memory (which the next step changes)."""
        import torch

        def copied(value: Any) -> Any:
            return torch.utils._pytree.tree_map(
                lambda t: t.clone() if isinstance(t, torch.Tensor) else t, value)

        with self.gathered():  # whole parameters in stage 3
            model = copied(self.model.state_dict())
        return {"model": model, "optimizer": copied(self.optimizer.state_dict()),
                "steps": self.steps, "rng": torch.get_rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Puts a state_dict() back: into the model and optimizer before the
        first step, into every copy the session holds after it."""
        import torch

        for key in ("model", "optimizer", "steps", "rng"):
            if key not in state:
                raise BadInput(f"the trainer's state has no '{key}'")
        if self._session is None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        else:
            self._unbind()
            # The values land in tensors of their own, then in the session.
            for b in self._views():
                self._set(b, torch.empty(b.whole_shape or b.shape, dtype=b.dtype))
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self._point_states_at_params()
            for b in self._bound:
                data = self._get(b).contiguous()
                if b.shard and data.nbytes != b.bytes:
                    data = rank_slice(data, self.rank, b.shape[0])
                self._session.write(b.buffer, data.data_ptr(), b.bytes)
            self._bind()
        self.steps = int(state["steps"])
        torch.set_rng_state(state["rng"])

    # ---- The session -----------------------------------------------------------------

    def _switch(self, key: tuple[Any, ...], batch: Any) -> None:
        """Note [Batches of other shapes]: the plan for `batch`'s shapes (made
        now if new) in a session of its own."""
        import sys

        import torch

        from memwall.plans import plan as make_plan

        plan = self._plans.get(key)
        if plan is None and not self._plans and self.plan is not None:
            plan = self.plan  # the plan given, for the first batch
        if plan is None and len(self._plans) >= self.max_plans:
            raise BadInput(f"a batch of new shapes ({shapes_text(key)}) would need plan "
                           f"{len(self._plans) + 1}, and the trainer keeps at most "
                           f"max_plans={self.max_plans}")
        # The states back in the model's own tensors, whole: a trace reads
        # the model, and the next session starts from them.
        self.close()
        if plan is None:
            if self._plans:
                print(f"memwall: note: a batch of new shapes ({shapes_text(key)}): traced and "
                      f"planned once (plan {len(self._plans) + 1} of at most {self.max_plans})",
                      file=sys.stderr)
            rng = torch.get_rng_state()  # the trace must not move the generator
            budget = self.budget
            if budget is None and self.plan is not None:
                budget = self.plan.budget_bytes
            if self.rank == 0:
                plan = make_plan(self.model, compact(batch), self.loss_fn,
                                 optimizer=self.optimizer, gpu=self.gpu, budget=budget,
                                 strategy=self.strategy, time_limit=self.time_limit,
                                 kernels="cpu", ranks=self.ranks,
                                 zero_stage=self.zero_stage if self.ranks > 1 else None)
            if self.ranks > 1:
                plan = self._ranks.same_plan(plan if self.rank == 0 else None,
                                             len(self._plans))
            torch.set_rng_state(rng)
        self._plans[key] = plan
        self.plan = plan
        self._open(batch)
        self._key = key

    def _open(self, batch: Any) -> None:
        import torch

        from memwall.native import core, executor_library

        executor_library()  # one clear line when there is none
        rng = torch.get_rng_state()
        graph = json.loads(self.plan.graph_text)
        if graph.get("meta", {}).get("kernels") != "cpu":
            raise BadInput("the plan was traced for CUDA kernels; the trainer's device is "
                           "emulated by the CPU: plan with memwall.plan(..., kernels=\"cpu\")")
        calls = graph["meta"].get("calls", {})
        if not calls.get("runnable", False):
            raise BadInput(f"the step cannot be replayed: {calls.get('why', 'no call records')}")
        if calls.get("value_reads"):
            raise BadInput(f"the step's Python code reads {calls['value_reads'][0]} (data-"
                           "dependent control flow: if x.sum() > 0, .tolist(), ...): a plan "
                           "replays one traced step and could not follow another batch's branch")
        self._match_inputs(graph, batch)
        self._bound = self._match_states(graph)
        self._loss_dtype = torch_dtype(graph["meta"]["loss"].get("dtype", "Float"))
        self._tracked = dict(calls.get("settings", {}))
        self._given = {}
        states = []
        for b in self._views():
            t = self._get(b)
            states.append((b.buffer, b.name, t.data_ptr(), t.nbytes))
        native = core()
        store, prefix = self._ranks.session_store()
        try:
            self._session = native.Session(self.plan.graph_text, self.plan.plan_text, states,
                                           bytes(rng.numpy().tobytes()), "stitching",
                                           self.nvme, self.host_bytes, self.time_kernels,
                                           self.rank, self.ranks, store, prefix)
        except native.Error as e:
            raise BadInput(str(e)) from None
        except native.RunFailed as e:
            raise _converted(e, native) from None
        atexit.register(_end_at_exit, weakref.ref(self))
        self._bind()

    def _match_states(self, graph: dict[str, Any]) -> list[_Bound]:
        """Each persistent buffer of the graph and the model's tensor for it:
        a parameter, a module buffer, or an optimizer state by
        "<parameter>.<key>"; the optimizer's missing states are made as
        torch makes them at its first step (zeros). A master copy a rewrite
        added starts from its parameter (the executor's); anything else is
        an error."""
        import torch

        params = dict(self.model.named_parameters())
        buffers = dict(self.model.named_buffers())
        modules = dict(self.model.named_modules())
        bound = []
        for buf in graph["buffers"]:
            if buf["kind"] not in ("param", "optim_state"):
                continue
            name = buf["name"]
            if name in params:
                owner: Any = params[name]
            elif name in buffers:
                module, _, attr = name.rpartition(".")
                owner = (modules[module], attr)
            else:
                owner = self._optimizer_state(name, params, buf)
                if owner is None and name.endswith(".master") and \
                        name[:-len(".master")] in params:
                    bound.append(_Bound(buf["id"], name, params[name[:-len(".master")]], None,
                                        (), buf["bytes"], master=True))
                    continue
                if owner is None:
                    raise BadInput(f"the plan's graph has a state '{name}' that is not one of "
                                   f"the model's or the optimizer's: a plan of another model?")
            bound.append(_Bound(buf["id"], name, owner, None, (), buf["bytes"]))
        for b in bound:
            t = self._get(b)
            if not t.is_contiguous() or t.device.type != "cpu":
                raise BadInput(f"{b.name}: the model's tensor is not contiguous on the CPU")
            b.dtype, b.shape = t.dtype, tuple(t.shape)
            # An optimizer state's or a master copy's parameter.
            whole = params.get(b.name.rpartition(".")[0])
            state = isinstance(b.owner, tuple) and isinstance(b.owner[0], dict)
            if b.name in params:  # stage 3 shards the parameters too
                whole = params[b.name]
            if (state or b.master or b.name in params) and whole is not None:
                elements = -(-whole.numel() // self.ranks)
                if self.ranks > 1 and elements * t.element_size() == b.bytes < whole.nbytes:
                    # The executor takes its slice of a whole state.
                    b.shard, b.shape = True, (elements,)
                    if b.name in params:
                        b.whole_shape = tuple(whole.shape)
                    if t.nbytes in (whole.nbytes, b.bytes):
                        continue
            if t.nbytes == b.bytes:
                continue
            raise BadInput(f"{b.name}: the model's tensor ({list(t.shape)}, {t.nbytes} bytes) is "
                           f"not the planned one ({b.bytes} bytes)")
        del torch
        return bound

    def _optimizer_state(self, name: str, params: dict[str, Any], buf: dict[str, Any]) -> Any:
        """(the optimizer's state dict of a parameter, key) for "<param>.<key>",
        the state made if the optimizer has not made it yet; None if `name`
        names no such state."""
        import torch

        pname, _, key = name.rpartition(".")
        p = params.get(pname)
        if p is None:
            return None
        state = self.optimizer.state[p]
        from memwall.mixed_precision import MixedPrecision

        # memwall.MixedPrecision: an fp32 master of a 16-bit parameter, fp32 moments.
        mixed = isinstance(self.optimizer, MixedPrecision)
        if key not in state:
            if key == "step":
                state[key] = torch.tensor(0.0, dtype=torch_dtype(buf.get("dtype", "fp32")))
            elif key == "master" and mixed and p.dtype != torch.float32:
                state[key] = p.detach().float()  # Note [Mixed-precision steps]
            elif key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"):
                state[key] = torch.zeros_like(p, dtype=torch.float32 if mixed else p.dtype,
                                              memory_format=torch.contiguous_format)
            else:
                return None
        return (state, key)

    def _gather(self) -> list[tuple[_Bound, Any]]:
        """Note [Sharded parameters] (training_ranks.py): each stage-3
        parameter whole; a collective."""
        sharded = [b for b in self._views() if b.whole_shape is not None]
        wholes = self._ranks.gather([(self._get(b), b.whole_shape or ()) for b in sharded]) \
            if sharded else []
        return list(zip(sharded, wholes))

    def _point_states_at_params(self) -> None:
        """After optimizer.load_state_dict, whose state dicts are new: the
        bindings follow them."""
        params = dict(self.model.named_parameters())
        for b in self._bound:
            if isinstance(b.owner, tuple) and isinstance(b.owner[0], dict):
                pname = b.name.rpartition(".")[0]
                b.owner = (self.optimizer.state[params[pname]], b.owner[1])

    def _match_inputs(self, graph: dict[str, Any], batch: Any) -> None:
        tensors = flat_batch(batch)
        # Tensors the step read that are neither the model's nor the batch's
        # (the tracer's "external.N"): empty ones (a cache's start) are given
        # as empty; one with bytes has no values on the meta device.
        self._empty_inputs = []
        names = []
        for b in graph["buffers"]:
            if b["kind"] != "input":
                continue
            if b["name"].startswith("external.") and b["bytes"] == 0:
                self._empty_inputs.append(b["name"])
            elif b["name"].startswith("external."):
                raise BadInput(f"the step reads a tensor of {b['bytes']} bytes made outside the "
                               f"model and the batch ({b['name']}, a constant or a cache): the "
                               "trainer has no values for it; make it a module buffer")
            else:
                names.append(b["name"])
        given = [name for name, _ in named_inputs(batch, tensors)]
        if sorted(names) != sorted(given):
            raise BadInput(f"the batch has tensors {given}, the plan's step {names}: a plan of "
                           f"another batch")
        self._inputs = [(name, t.dtype, tuple(t.shape)) for name, t in
                        named_inputs(batch, tensors)]

    def _batch_tensors(self, batch: Any) -> list[tuple[str, Any]]:
        tensors = flat_batch(batch)
        named = named_inputs(batch, tensors)
        if len(named) != len(self._inputs):
            raise BadInput(f"the batch has {len(named)} tensors, the planned one "
                           f"{len(self._inputs)}")
        out = []
        for (name, t), (_, dtype, shape) in zip(named, self._inputs):
            if t.dtype != dtype or tuple(t.shape) != shape:
                raise BadInput(f"the batch's {name} is {t.dtype} {list(t.shape)}, the plan's "
                               f"{dtype} {list(shape)}: a plan made for another batch")
            if t.device.type != "cpu":
                raise BadInput(f"the batch's {name} is on {t.device}: the trainer reads CPU "
                               f"tensors")
            out.append((name, t.contiguous()))
        return out + [(name, EMPTY_INPUT) for name in self._empty_inputs]

    def _apply_settings(self) -> None:
        """Note [Tracked settings] (memwall/tracer/calls.py): each group's lr
        as it is now, for the session to read; any other setting changed
        since the step was traced is refused (it may change which ops run)."""
        now = optimizer_settings(self.optimizer)
        tracked = [f"group{i}.lr" in self._tracked for i in range(len(now))]
        before, after = untracked(self._settings, tracked), untracked(now, tracked)
        if after != before:
            raise BadInput("the optimizer's settings changed since the step was planned "
                           f"({first_change(before, after)}): the plan replays the "
                           "traced step's, and follows only each group's lr (a learning-rate "
                           "schedule); for others make a new Trainer")
        for name in self._tracked:
            group = int(name[len("group"):].partition(".")[0])
            value = float(now[group]["lr"])
            if self._given.get(name) != value:
                self._session.set_setting(name, value)
                self._given[name] = value

    # ---- Views (Note [The model's own tensors]) ----------------------------------------

    def _views(self) -> list[_Bound]:
        """The bindings that are the model's tensors (not master copies)."""
        return [b for b in self._bound if not b.master]

    def _get(self, b: _Bound) -> Any:
        if isinstance(b.owner, tuple):
            holder, key = b.owner
            return holder[key] if isinstance(holder, dict) else getattr(holder, key)
        return b.owner.data

    def _set(self, b: _Bound, value: Any) -> None:
        if isinstance(b.owner, tuple):
            holder, key = b.owner
            if isinstance(holder, dict):
                holder[key] = value
            else:
                setattr(holder, key, value)
        else:
            b.owner.data = value

    def _unbind(self) -> None:
        import torch

        empties: dict[Any, Any] = {}
        for b in self._views():
            if b.dtype not in empties:
                empties[b.dtype] = torch.empty(0, dtype=b.dtype)
            self._set(b, empties[b.dtype])

    def _bind(self) -> None:
        import torch

        for b in self._views():
            capsule = self._session.view(b.buffer)
            if capsule is None:  # on NVMe: a copy
                data = torch.empty(b.shape, dtype=b.dtype)
                self._session.read(b.buffer, data.data_ptr(), b.bytes)
            else:
                data = torch.from_dlpack(capsule).view(b.dtype).view(b.shape)
            self._set(b, data)

    def _fail(self, e: Exception) -> Any:
        """A failed step: the session is gone, and with it the states."""
        from memwall.native import core

        native = core()
        self._session = None
        if isinstance(e, native.Error):
            raise BadInput(str(e)) from None
        if isinstance(e, native.RunFailed):
            raise _converted(e, native) from None
        raise e


def _end_at_exit(ref: "weakref.ref[Trainer]") -> None:
    """An open session at exit (Ctrl-C, or no close()): its memory and its
    NVMe swap files go now, not with whatever still holds them. The
    model's tensors are left empty: the process is ending."""
    trainer = ref()
    if trainer is not None and trainer._session is not None:
        trainer._unbind()
        trainer._session.close()
        trainer._session = None
    if trainer is not None:
        trainer._ranks.end_group()


def _converted(e: Exception, native: Any) -> Error:
    if isinstance(e, native.OutOfMemory):
        return OutOfMemory(str(e))
    return RunFailed(str(e))
