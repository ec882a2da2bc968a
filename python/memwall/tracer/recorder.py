"""The recorder: a dispatch mode that sees every aten op below autograd
(forward, backward and optimizer) and records each op that makes memory or
writes it, with the buffers (storages) it reads, makes and updates."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten
from torch.utils._python_dispatch import TorchDispatchMode

from memwall.errors import first_line
from memwall.tracer import cpu_scratch, cpu_scratch_measured, flops, scratch
from memwall.tracer.calls import record_call
from memwall.tracer.dtypes import dtype_name
from memwall.tracer.meta_device import like_the_cpu, like_the_device
from memwall.values.files import storage_bytes


@dataclass(slots=True)
class Buffer:
    """A unit of memory the step uses: one storage (views share their base's)."""
    name: str
    nbytes: int
    kind: str  # param, grad, optim_state, activation, input, temp
    dtype: str  # memwall's name (dtypes.py)
    shape: list[int]
    producer: int | None  # the op that makes it, or None: it exists before the first op
    ref: StorageWeakRef | None  # pins the storage's identity (not its data)
    # The last op recorded before eager PyTorch freed the storage (its last
    # reference went), or None while it lives (Note [Eager lifetimes]).
    freed_after: int | None = None


@dataclass(slots=True)
class Op:
    """One recorded aten op, by buffer indices of the recorder."""
    name: str  # "<module path>.<aten op>"
    type: str  # the aten op's overload packet ("addmm")
    phase: str  # forward, backward, optimizer
    ins: list[int]
    outs: list[int]
    updates: list[int]
    flops: float = 0.0
    bytes: float = 0.0  # memory traffic
    time: float | None = None  # measured seconds (--measure)
    workspace: int = 0  # Note [Workspace span] (graph/types.h)
    workspace_span: int = 0
    scratch_first: list[int] | None = None  # Note [Scratch before its output]
    scratch_at: list[int] = field(default_factory=list)  # Note [Scratch offsets]
    call: Any = None  # Note [Call records] (calls.py), when recorded


def storage_key(t: torch.Tensor) -> int:
    """The key of a tensor's storage: the StorageImpl's address. While the
    recorder holds a StorageWeakRef to it, the impl object is not freed (a
    weak intrusive_ptr keeps the object, not its data), so no later storage
    can reuse the address: the key stays unique for the whole trace even as
    storages die."""
    return t.untyped_storage()._cdata


def _op_failure(e: Exception) -> str:
    """One short reason for an op's failure (PyTorch's dispatcher errors run
    to a paragraph listing every backend)."""
    text = first_line(e)
    # torch's own words differ by version: a dispatcher error naming the
    # Meta backend, or a meta registration raising NotImplementedError
    # (torch 2.x's nonzero: "...a correct data-independent implementation
    # does not exist...").
    no_kernel = text.startswith("Could not run") and "'Meta' backend" in text
    if no_kernel or isinstance(e, NotImplementedError):
        return ("it has no meta-device kernel in torch " + torch.__version__.split("+")[0]
                + " (outputs whose shape depends on values cannot be traced without data;"
                " --measure runs the model on the CPU instead)")
    return text


def unannotated_writes(func: Any, args: Sequence[Any]) -> tuple[int, ...]:
    """Arguments an op writes although its schema does not say so
    (Tensor(a!)): native_batch_norm updates running_mean and running_var
    (arguments 3 and 4) in training mode (still unannotated in torch 2.14;
    _batch_norm_with_update, its annotated successor, is not what the CPU
    and meta paths dispatch to)."""
    if func.overloadpacket.__name__ == "native_batch_norm" and len(args) > 5 and args[5]:
        return (3, 4)
    return ()


class Recorder(TorchDispatchMode):
    """Sees every aten op below autograd (forward, backward and optimizer)
    and, while `recording`, records those that make or write memory.

    `measure`: time each op (real tensors on the CPU). `kernels`: whose
    scratch rules apply, "cuda" or "cpu". `calls`: record each op's call
    (calls.py). `values`: keep the bytes of every buffer that exists
    before the first op as the step finds it (real tensors only; Note [Run
    inputs] in memwall/values/files.py). `steady`: Note [Steady storages]."""

    def __init__(self, measure: bool, kernels: str = "cuda", calls: bool = True,
                 values: bool = False, steady: bool = False) -> None:
        super().__init__()
        self.measure = measure
        self.calls = calls
        self.values: dict[int, bytes] | None = {} if values else None
        # The state of the generator the step's random ops start from, the
        # CPU's or its device's (values; devices.generator_state).
        self.rng_state: torch.Tensor | None = None
        # Note [Tracked scalars]: one frame per torch function.
        self.tracked: list[dict[float, Any]] = []
        self.untracked_item: str | None = None  # the first .item() a replay cannot follow
        # Note [Values read by Python]: each value the step's Python code read
        # from a tensor (if x.sum() > 0, .tolist(), an int .item()) that
        # depends on the model's states or the batch, but an .item() the
        # replay computes again (ScalarTracking: reading_tracked). A value
        # computed from constants alone (Hugging Face's check of position
        # ids made by arange) is the same for every batch of the shape.
        self.value_reads: list[str] = []
        # Note [Tracked settings]: those the step's ops read, traced values.
        self.settings_read: dict[str, float] = {}
        self.reading_tracked = False
        self.data_buffers: set[int] = set()  # buffers whose values depend on states or batch
        self.loss_ref: Any = None  # the loss's tensor reference (calls.tensor_ref)
        self.loss_value: float | None = None
        self.kernels = kernels
        self.recording = False
        self.phase = "forward"
        self.buffers: list[Buffer] = []
        self.by_storage: dict[int, int] = {}  # storage_key -> buffer index
        self.ops: list[Op] = []
        self.scope: list[str] = []  # module path stack (forward hooks)
        self.failed_op: tuple[str, str] | None = None  # (op, why) of the first op that raised
        self._writes: dict[Any, list[tuple[int, str]]] = {}  # func -> arguments it writes (a!)
        self._names: dict[str, int] = {}
        # Buffers whose storage has not died yet (Note [Eager lifetimes]).
        self._alive: list[int] = []
        self._alive_refs: list[int] = []  # their weak references' handles, in the same order
        # Note [Steady storages]: with `steady`, model states, inputs and
        # gradients are set aside from the check before each op.
        self.steady = steady
        self._steady_refs: list[int] = []
        # Thread -> its cuBLAS workspace buffer (Note [cuBLAS workspaces]).
        self._cublas: dict[str, int] = {}

    # ---- buffers ----
    def unique_name(self, name: str) -> str:
        """`name`, or `name#N` for its N-th repetition."""
        n = self._names.get(name, 0)
        self._names[name] = n + 1
        return name if n == 0 else f"{name}#{n}"

    def register(self, t: torch.Tensor, name: str, kind: str, producer: int | None = None) -> int:
        """The buffer of `t`'s storage, made (with `name`, `kind`,
        `producer`) if it is new; returns its index."""
        key = storage_key(t)
        if key in self.by_storage:
            return self.by_storage[key]
        storage = t.untyped_storage()
        buf = Buffer(self.unique_name(name), storage.nbytes(), kind, dtype_name(t.dtype),
                     list(t.shape), producer, StorageWeakRef(storage))
        self.buffers.append(buf)
        if self.values is not None and producer is None:
            self.values[len(self.buffers) - 1] = storage_bytes(storage)
        self.by_storage[key] = len(self.buffers) - 1
        if producer is None and kind in ("param", "optim_state", "input") \
                and not name.startswith("external."):
            self.data_buffers.add(len(self.buffers) - 1)
        self._alive.append(len(self.buffers) - 1)
        self._alive_refs.append(buf.ref.cdata)
        return len(self.buffers) - 1

    def note_deaths(self) -> None:
        """Note [Eager lifetimes]: a storage whose weak reference expired
        since the last check died after the last op recorded so far, when
        eager PyTorch dropped its last reference (a Python variable, a
        tensor autograd saved, an optimizer temporary). Checked before each
        recorded op and at the end of the step: O(live storages) each.
        torch's own check, mapped over the handles: through
        StorageWeakRef.expired() and a loop in Python it was 12 of the 20 s
        that tracing EfficientNet-B0 and ResNet-50 took (5.3 M checks, most
        of them of the model states during Adam's per-parameter ops)."""
        expired = list(map(torch.UntypedStorage._expired, self._alive_refs))
        if True not in expired:
            return
        last = len(self.ops) - 1
        for b, _ in self._take_alive(expired):
            self.buffers[b].freed_after = last

    def _take_alive(self, flags: Sequence[bool]) -> list[tuple[int, int]]:
        """Removes the buffers whose flag is true (flags in the order of
        _alive) from the alive lists; returns them with their handles."""
        taken, alive, refs = [], [], []
        for b, ref, take in zip(self._alive, self._alive_refs, flags):
            if take:
                taken.append((b, ref))
            else:
                alive.append(b)
                refs.append(ref)
        self._alive, self._alive_refs = alive, refs
        return taken

    def hold_steady(self, buffer_ids: Iterable[int]) -> None:
        """Note [Steady storages]: model states, the batch and, once
        backward has made them, the gradients are held by the model, the
        optimizer and the caller for the whole step. Checking them before
        every op was most of a meta trace's time (EfficientNet-B7: 12 of its
        30 s, ~4,000 of them before each of Adam's per-parameter ops); they
        are checked once, at the end of the step (steady_died). Expiry is
        final, so a steady storage alive at the end was alive at every op
        and skipping it lost nothing; one that died (a program that drops a
        parameter or a gradient mid-step) is seen there and the trace is
        made again with every storage checked before every op."""
        if not self.steady:
            return
        move = set(buffer_ids)
        self._steady_refs += [ref for _, ref in self._take_alive([b in move for b in self._alive])]

    def steady_died(self) -> bool:
        """Whether a storage hold_steady set aside died during the step."""
        return True in map(torch.UntypedStorage._expired, self._steady_refs)

    def buffer_of(self, t: torch.Tensor) -> int | None:
        """The index of `t`'s buffer, or None if the trace does not know it."""
        return self.by_storage.get(storage_key(t))

    # ---- naming ----
    def owner(self, ins: Sequence[int], updates: Sequence[int]) -> str:
        """Where a backward or optimizer op belongs. Backward: the module of
        the parameter (or running statistic) it touches, else the scope of
        the latest forward activation it reads. Optimizer: the parameter it
        steps (a state "<param>.<key>" names its parameter), else the scope
        of the op that made its latest input (the step's temporaries)."""
        backward = self.phase == "backward"
        for b in list(updates) + list(ins):
            buf = self.buffers[b]
            if buf.kind == "param":
                return buf.name.rpartition(".")[0] or buf.name if backward else buf.name
            if buf.kind == "optim_state":
                return buf.name.rpartition(".")[0] or buf.name
        latest = None
        for b in list(ins) + ([] if backward else list(updates)):
            buf = self.buffers[b]
            if buf.producer is None or (backward and buf.kind != "activation"):
                continue
            if latest is None or buf.producer > latest:
                latest = buf.producer
        if latest is not None:
            return self.ops[latest].name.rpartition(".")[0]
        return self.phase

    # ---- dispatch ----
    def writes(self, func: Any) -> list[tuple[int, str]]:
        """(index, name) of the arguments `func`'s schema says it writes."""
        w = self._writes.get(func)
        if w is None:
            w = [(i, a.name) for i, a in enumerate(func._schema.arguments)
                 if a.alias_info is not None and a.alias_info.is_write]
            self._writes[func] = w
        return w

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if (func is torch.ops.aten._local_scalar_dense.default and self.recording
                and not self.reading_tracked and self.buffer_of(args[0]) in self.data_buffers):
            after = f"after op {len(self.ops) - 1} ({self.ops[-1].name})" if self.ops \
                else "before the first op"
            self.value_reads.append(f"a {str(args[0].dtype).replace('torch.', '')} value "
                                    f"{after}")
        if func is torch.ops.aten._local_scalar_dense.default and args[0].is_meta:
            # .item() of a meta tensor (Adam's step count, a loss scale): meta
            # tensors hold no values, so the trace continues with 1, the
            # first step's value. Data-dependent control flow follows it.
            if args[0].dtype == torch.bool:
                return True
            return 1.0 if args[0].dtype.is_floating_point else 1
        start = time.perf_counter() if self.measure else 0.0
        try:
            out = func(*args, **kwargs)
        except Exception as e:
            if self.failed_op is None:
                self.failed_op = (func._schema.name, _op_failure(e))
            raise
        out = like_the_device(func, args, out)
        if self.kernels == "cpu":
            out = like_the_cpu(func, args, out)
        if not self.recording:
            return out
        elapsed = time.perf_counter() - start if self.measure else None
        self.note_deaths()
        self.record(func, args, kwargs, out, elapsed)
        return out

    def record(self, func: Any, args: tuple, kwargs: dict[str, Any], out: Any,
               elapsed: float | None) -> None:
        """Records one op that ran: its buffers, FLOPs, traffic, scratch and call."""
        written = set()
        for i, name in self.writes(func):
            t = args[i] if i < len(args) else kwargs.get(name)
            for x in (t if isinstance(t, (list, tuple)) else [t]):
                if isinstance(x, torch.Tensor):
                    written.add(storage_key(x))
        for i in unannotated_writes(func, args):
            if i < len(args) and isinstance(args[i], torch.Tensor):
                written.add(storage_key(args[i]))
        in_tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        out_tensors = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]

        ins: list[int] = []
        updates: list[int] = []
        traffic = 0.0
        for t in in_tensors:
            key = storage_key(t)
            b = self.by_storage.get(key)
            if b is None:
                # A tensor made outside the trace and not registered (a plain
                # tensor attribute, a constant): it exists before the first op.
                b = self.register(t, f"external.{len(self.buffers)}", "input")
            if key in written:
                if b not in updates:
                    updates.append(b)
                    traffic += 2.0 * t.numel() * t.element_size()
            elif b not in ins:
                ins.append(b)
                traffic += t.numel() * t.element_size()
        fresh = []
        for t in out_tensors:
            key = storage_key(t)
            if key in self.by_storage:
                # A view or alias of a known buffer, or the op's in-place
                # result: no new memory.
                b = self.by_storage[key]
                nbytes = t.untyped_storage().nbytes()
                if nbytes > self.buffers[b].nbytes:  # resize_ / out= growing a buffer
                    self.buffers[b].nbytes = nbytes
                continue
            fresh.append(t)
        if not fresh and not updates:
            return  # views, metadata queries: no memory, no work
        if func.namespace == "profiler":
            return  # record_function's handles (optimizer.step's profiling scope)
        name = func.overloadpacket.__name__
        if self.phase == "forward":
            scope = self.scope[-1] if self.scope else "model"
        else:
            scope = self.owner(ins, updates)
        op = Op(name=f"{scope}.{name}", type=name, phase=self.phase, ins=ins, outs=[],
                updates=updates)
        index = len(self.ops)
        kind = "activation" if self.phase == "forward" else "temp"
        fresh_ids = {}
        for j, t in enumerate(fresh):
            label = op.name if j == 0 else f"{op.name}.{j}"
            op.outs.append(self.register(t, label, kind, producer=index))
            fresh_ids[id(t)] = op.outs[-1]
            traffic += t.numel() * t.element_size()
        if self.calls:
            op.call, items = record_call(self, func, args, kwargs, out_tensors, fresh_ids)
            for b in items:  # Note [Tracked scalars]: the op reads the item's buffer
                if b not in op.ins and b not in op.updates:
                    op.ins.append(b)
        if any(b in self.data_buffers for b in op.ins + op.updates):
            self.data_buffers.update(op.outs + op.updates)
        op.flops = flops.op_flops(name, args, out_tensors if out_tensors else [])
        op.bytes = traffic
        op.time = elapsed
        # Note [Workspace span] (graph/types.h)
        rule = scratch.as_scratch(self.kernel_scratch(func, args, kwargs, name))
        op.workspace, op.workspace_span = rule.workspace, rule.span
        # Note [Scratch before its output] (src/exec/executor_compute.cc)
        op.scratch_first = scratch.scratch_first(rule, [self.buffers[b].nbytes for b in op.outs])
        # Note [Scratch offsets] (src/exec/device_memory.cc)
        op.scratch_at = [int(v) for pair in rule.at for v in pair]
        if self.kernels == "cuda" and name in scratch.CUBLAS_OPS:
            self.use_cublas_workspace(op, index)
        self.ops.append(op)

    def use_cublas_workspace(self, op: Op, index: int) -> None:
        """Note [cuBLAS workspaces]: PyTorch gives each cuBLAS handle (one
        per thread and stream) a workspace from the caching allocator at its
        first matmul and keeps it; autograd runs backward on its own thread,
        so a training step holds two: one made by the first forward (or
        optimizer) matmul, one by the first backward matmul. Each is a
        buffer its first matmul makes and every later matmul of the thread
        reads; eager PyTorch never frees it (eager_free null)."""
        thread = "backward" if self.phase == "backward" else "forward"
        b = self._cublas.get(thread)
        if b is None:
            nbytes = scratch.cublas_workspace_bytes()
            buf = Buffer(f"cublas_workspace.{thread}", nbytes, "temp", "uint8", [nbytes],
                         index, None)
            self.buffers.append(buf)
            self._cublas[thread] = len(self.buffers) - 1
            op.outs.append(len(self.buffers) - 1)
        else:
            op.ins.append(b)

    def kernel_scratch(self, func: Any, args: tuple, kwargs: dict[str, Any],
                       name: str) -> scratch.Rule:
        """The kernel's own scratch (scratch.py, cpu_scratch.py), from its
        arguments in schema order (keywords filled in, defaults where not
        given)."""
        if self.kernels == "cpu" and cpu_scratch_measured.applies(name, args, kwargs):
            rule = cpu_scratch_measured.measured(func, args, kwargs)
            if rule is not None:
                return rule
        any_device = name in scratch.ANY_DEVICE_RULES
        if not any_device and (self.kernels != "cpu" or name not in cpu_scratch.CPU_RULES):
            return 0
        full = list(args)
        for a in func._schema.arguments[len(args):]:
            if a.name in kwargs:
                full.append(kwargs[a.name])
            elif a.has_default_value():
                full.append(a.default_value)
            else:
                break
        if any_device:
            return scratch.any_device_workspace(name, full)
        return cpu_scratch.cpu_workspace(name, full, torch.get_num_threads())
