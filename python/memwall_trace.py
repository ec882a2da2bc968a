#!/usr/bin/env python3
# memwall's PyTorch tracer: records one training iteration (forward, loss,
# backward, optimizer step) op by op and writes it as a memwall.graph/1 JSON
# graph. `memwall trace` embeds this file in its binary and runs it with
# torch 2.x, in memwall's Python environment (python/requirements.txt, made
# by scripts/install-deps.sh --torch) unless the user names another
# interpreter; docs/trace.md explains every rule applied here.
#
#   memwall_trace.py --torchvision resnet50 --batch 32 [--image 224] --out g.json
#   memwall_trace.py --script my_model.py:build --out g.json
#   memwall_trace.py --hf llama2-7b [--seq 512] [--dtype bf16] [--lora 8] --out g.json
#   memwall_trace.py --sweep DIR --batch 8        (every torchvision classifier)
#
# Bad input ends with one line "memwall-trace: error: <message>" on stderr and
# exit code 2; the C++ side forwards that line.
import argparse
import bisect
import ctypes
import json
import os
import sys
import time
import traceback
import warnings

ERROR_PREFIX = "memwall-trace: error: "

# Importing the user's script (or the modules below) must not leave
# __pycache__ next to it.
sys.dont_write_bytecode = True

import memwall_calibrate  # noqa: E402  memwall calibrate's compute probe; shipped beside this file
import memwall_fidelity  # noqa: E402  the real step under the profiler; shipped beside this file
import memwall_flops  # noqa: E402  FLOP rules; shipped beside this file
import memwall_scratch  # noqa: E402  kernel scratch rules; shipped beside this file


class TraceError(Exception):
    """Bad input or an untraceable model: reported as one line, exit 2."""


def fail(message):
    raise TraceError(message)


try:
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_flatten
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError as e:  # torch is missing
    torch = None
    _TORCH_IMPORT_ERROR = str(e)

if torch is not None:
    import memwall_calls  # noqa: E402  call records and values (memwall run); shipped beside this file
    import memwall_hf  # noqa: E402  Hugging Face models (--hf); shipped beside this file


def _torch_missing():
    return (f"PyTorch is not installed for {sys.executable} ({_TORCH_IMPORT_ERROR}; "
            "scripts/install-deps.sh --torch makes memwall's environment with torch and "
            "torchvision, or point --python or MEMWALL_PYTHON at an interpreter that has them)")


# Said before the classes below are defined: they derive from torch's.
if torch is None and __name__ == "__main__":
    sys.stderr.write(f"{ERROR_PREFIX}{_torch_missing()}\n")
    sys.exit(2)

# ---------------------------------------------------------------------------
# dtypes: memwall's names (include/memwall/graph/types.h)

if torch is not None:
    DTYPES = {
        torch.float32: "fp32",
        torch.float16: "fp16",
        torch.bfloat16: "bf16",
        torch.float64: "fp64",
        torch.int64: "int64",
        torch.int32: "int32",
        torch.int8: "int8",
        torch.uint8: "uint8",
        torch.bool: "bool",
    }
    # FlashAttention's RNG seed and offset are uint64 scalars: the graph
    # has no unsigned 64-bit type, and the bytes are what it needs of them.
    if hasattr(torch, "uint64"):
        DTYPES[torch.uint64] = "int64"


def dtype_name(dtype):
    # memwall's graph has no int16/complex buffers; those are rare enough in
    # training that naming them in a clear error beats guessing a layout.
    if dtype not in DTYPES:
        fail(f"tensors of dtype {dtype} are not supported by memwall.graph/1")
    return DTYPES[dtype]


# ---------------------------------------------------------------------------
# Building on the meta device
#
# Like `with torch.device("meta")` (which torch implements the same way),
# but with a choice per factory: factory functions called without a device
# (or with another one) create meta tensors, so a 7B model is "built"
# without allocating its weights, and model code that calls
# torch.arange/zeros in forward keeps working, while the factories below
# that compute values stay on the CPU during construction.

# Factories that allocate a tensor's memory (parameters, buffers, inputs).
_ALLOCATING = ["empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint"]
# Factories that also compute values: architectures computed from tensors
# (torchvision's RegNet sizes its stages with torch.arange(...).tolist())
# need their values while the model is being built, so these stay on the CPU
# during construction (the tensors they create are small, and move to meta
# with the model afterwards).
_COMPUTING = ["arange", "range", "linspace", "logspace", "eye", "tensor", "as_tensor",
              "scalar_tensor", "tril_indices", "triu_indices", "randperm"]


class MetaDeviceMode(TorchFunctionMode if torch is not None else object):
    def __init__(self, building, kernels="cuda"):
        super().__init__()
        names = _ALLOCATING if building else _ALLOCATING + _COMPUTING
        self.factories = {getattr(torch, n) for n in names if hasattr(torch, n)}
        self.kernels = kernels

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.factories:
            kwargs["device"] = "meta"
        elif (func is torch.nn.functional.dropout and len(args) >= 1
              and self.kernels == "cuda"):
            # On CUDA, dropout is one native_dropout kernel keeping a bool
            # mask; on CPU and meta it is bernoulli + mul keeping a mask in
            # the input's dtype (4x the bytes in fp32). A trace for CUDA
            # kernels (the default) takes the CUDA path; --kernels cpu keeps
            # the CPU's.
            return _cuda_dropout(*args, **kwargs)
        elif (func is torch.nn.functional.scaled_dot_product_attention
              and self.kernels == "cuda"):
            return _cuda_sdpa(*args, **kwargs)
        return func(*args, **kwargs)


def to_meta(model, batch, optimizer):
    """Moves what construction left on the CPU to the meta device. Module.to
    replaces a moved parameter with a new Parameter object, so the
    optimizer's parameter lists are remapped by name."""
    before = dict(model.named_parameters())
    model.to("meta")
    after = dict(model.named_parameters())
    moved = {id(before[n]): after[n] for n in before if before[n] is not after[n]}
    if moved:
        for group in optimizer.param_groups:
            group["params"] = [moved.get(id(p), p) for p in group["params"]]
    return torch.utils._pytree.tree_map(
        lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, batch)


def _cuda_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
               enable_gqa=False):
    """Note [Attention backends]: scaled_dot_product_attention picks its
    kernel per device. On meta (and the CPU) it takes the math path, which
    for 16-bit inputs computes in fp32 and saves the [b, heads, s, s]
    probabilities; on a CUDA GPU (sm80 and later) torch's sdp_utils tries
    FlashAttention first (16-bit, no mask, head dim <= 256 and a multiple
    of 8; grouped KV heads with enable_gqa), then the memory-efficient
    kernel (also fp32 and an additive mask; equal head counts), and only
    then the math path. Both fused kernels save their output and one fp32
    log-sum-exp per row, not the probabilities. A trace for CUDA kernels
    calls the kernel CUDA would."""
    d = query.shape[-1]
    shapes_ok = (query.dim() == 4 and key.dim() == 4 and value.dim() == 4
                 and key.shape[-1] == d and value.shape[-1] == d)
    same_heads = shapes_ok and key.shape[1] == query.shape[1] and value.shape[1] == query.shape[1]
    half = query.dtype in (torch.float16, torch.bfloat16)
    if (shapes_ok and attn_mask is None and half and d <= 256 and d % 8 == 0
            and (same_heads or enable_gqa)):
        return torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    if (shapes_ok and same_heads and (half or query.dtype == torch.float32)
            and d % (8 if half else 4) == 0):
        bias = attn_mask
        if bias is not None and bias.dtype == torch.bool:
            # sdpa turns a boolean mask into an additive one first.
            bias = torch.zeros(bias.shape, dtype=query.dtype, device=bias.device).masked_fill(
                bias.logical_not(), float("-inf"))
        grad = query.requires_grad or key.requires_grad or value.requires_grad
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, bias, grad, dropout_p, is_causal, scale=scale)[0]
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=enable_gqa)


def _cuda_dropout(input, p=0.5, training=True, inplace=False):
    if not training or p == 0:
        return input
    out = torch.native_dropout(input, p, True)[0]
    if inplace:
        return input.copy_(out)
    return out


# ---------------------------------------------------------------------------
# The recorder


class Buffer:
    __slots__ = ("name", "nbytes", "kind", "dtype", "shape", "producer", "ref", "freed_after")

    def __init__(self, name, nbytes, kind, dtype, shape, producer, ref):
        self.name = name
        self.nbytes = nbytes
        self.kind = kind
        self.dtype = dtype
        self.shape = shape
        self.producer = producer  # op index, or None: exists before the first op
        self.ref = ref  # StorageWeakRef: pins the storage's identity (not its data)
        # The last op recorded before eager PyTorch freed the storage (its
        # last reference went), or None while it lives (Note [Eager lifetimes]).
        self.freed_after = None


class Op:
    __slots__ = ("name", "type", "phase", "ins", "outs", "updates", "flops", "bytes", "time",
                 "workspace", "workspace_span", "scratch_first", "scratch_at", "call")


def storage_key(t):
    # The StorageImpl's address. While the recorder holds a StorageWeakRef to
    # it, the impl object is not freed (a weak intrusive_ptr keeps the object,
    # not its data), so no later storage can reuse the address: the key stays
    # unique for the whole trace even as storages die.
    return t.untyped_storage()._cdata


def _op_failure(e, func):
    """One short reason for an op's failure (PyTorch's dispatcher errors run
    to a paragraph listing every backend)."""
    text = _first_line(e)
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


def unannotated_writes(func, args):
    """Arguments an op writes although its schema does not say so
    (Tensor(a!)): native_batch_norm updates running_mean and running_var
    (arguments 3 and 4) in training mode (still unannotated in torch 2.14;
    _batch_norm_with_update, its annotated successor, is not what the CPU
    and meta paths dispatch to)."""
    if func.overloadpacket.__name__ == "native_batch_norm" and len(args) > 5 and args[5]:
        return (3, 4)
    return ()


def _channels_last_like_the_device(func, args, out):
    """The meta device's convolution returns a contiguous (NCHW) output
    whatever its input's layout, but oneDNN on the CPU
    (mkldnn_conv_use_channels_last) and cuDNN (cudnn_conv_suggest_memory_format)
    return a channels-last one when the input or the weight is channels-last
    (ConvNeXt's blocks after their LayerNorm2d). The layout decides which
    kernels run later and what scratch they take (memwall_scratch.py), so a
    meta output takes the layout the device would give it: same bytes,
    other strides."""
    if (func.overloadpacket.__name__ != "convolution" or not isinstance(out, torch.Tensor)
            or not out.is_meta or out.dim() != 4 or len(args) < 2):
        return out
    x, w = args[0], args[1]
    last = torch.channels_last
    if ((x.is_contiguous(memory_format=last) and not x.is_contiguous())
            or (w.is_contiguous(memory_format=last) and not w.is_contiguous())):
        if not out.is_contiguous(memory_format=last):
            return out.contiguous(memory_format=last)
    return out


class OpFailed(Exception):
    """An aten op raised: carries its name for the one-line message."""

    def __init__(self, op, why):
        super().__init__(f"{op}: {why}")
        self.op = op
        self.why = why


class Recorder(TorchDispatchMode):
    """Sees every aten op below autograd (forward, backward and optimizer)."""

    def __init__(self, measure, kernels="cuda", calls=True, values=False, steady=False):
        super().__init__()
        self.measure = measure
        self.calls = calls  # record each op's call (memwall_calls.py)
        # values: keep the bytes of every buffer that exists before the
        # first op as the step finds it (real tensors only; Note [Run inputs])
        self.values = {} if values else None
        self.tracked = []  # Note [Tracked scalars]: one frame per torch function
        self.untracked_item = None  # the first .item() a replay cannot follow
        self.loss_ref = None
        self.loss_value = None
        self.kernels = kernels  # whose scratch rules apply (memwall_scratch.py)
        self.recording = False
        self.phase = "forward"
        self.buffers = []
        self.by_storage = {}
        self.ops = []
        self.scope = []  # module path stack (forward hooks)
        self.failed_op = None
        self._writes = {}  # func -> indices of arguments it writes (schema (a!))
        self._names = {}
        self._alive = []  # buffers whose storage has not died yet (Note [Eager lifetimes])
        self._alive_refs = []  # their weak references' handles, in the same order
        # Note [Steady storages]: with `steady`, model states, inputs and
        # gradients are set aside from the check before each op.
        self.steady = steady
        self._steady_refs = []
        self._cublas = {}  # thread -> its cuBLAS workspace buffer (Note [cuBLAS workspaces])

    # ---- buffers ----
    def unique_name(self, name):
        n = self._names.get(name, 0)
        self._names[name] = n + 1
        return name if n == 0 else f"{name}#{n}"

    def register(self, t, name, kind, producer=None):
        key = storage_key(t)
        if key in self.by_storage:
            return self.by_storage[key]
        storage = t.untyped_storage()
        buf = Buffer(self.unique_name(name), storage.nbytes(), kind, dtype_name(t.dtype),
                     list(t.shape), producer, StorageWeakRef(storage))
        self.buffers.append(buf)
        if self.values is not None and producer is None:
            self.values[len(self.buffers) - 1] = memwall_calls.storage_bytes(storage)
        self.by_storage[key] = len(self.buffers) - 1
        self._alive.append(len(self.buffers) - 1)
        self._alive_refs.append(buf.ref.cdata)
        return len(self.buffers) - 1

    def note_deaths(self):
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

    def _take_alive(self, flags):
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

    def hold_steady(self, buffer_ids):
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

    def steady_died(self):
        """Whether a storage hold_steady set aside died during the step."""
        return True in map(torch.UntypedStorage._expired, self._steady_refs)

    def buffer_of(self, t):
        return self.by_storage.get(storage_key(t))

    # ---- naming ----
    def owner(self, ins, updates):
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
    def writes(self, func):
        w = self._writes.get(func)
        if w is None:
            w = [(i, a.name) for i, a in enumerate(func._schema.arguments)
                 if a.alias_info is not None and a.alias_info.is_write]
            self._writes[func] = w
        return w

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
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
                self.failed_op = (func._schema.name, _op_failure(e, func))
            raise
        out = _channels_last_like_the_device(func, args, out)
        if not self.recording:
            return out
        elapsed = time.perf_counter() - start if self.measure else None
        self.note_deaths()
        self.record(func, args, kwargs, out, elapsed)
        return out

    def record(self, func, args, kwargs, out, elapsed):
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

        ins, updates, traffic = [], [], 0.0
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
        op = Op()
        if self.phase == "forward":
            scope = self.scope[-1] if self.scope else "model"
        else:
            scope = self.owner(ins, updates)
        op.name = f"{scope}.{name}"
        op.type = name
        op.phase = self.phase
        op.ins, op.updates = ins, updates
        op.outs = []
        index = len(self.ops)
        kind = "activation" if self.phase == "forward" else "temp"
        fresh_ids = {}
        for j, t in enumerate(fresh):
            label = op.name if j == 0 else f"{op.name}.{j}"
            op.outs.append(self.register(t, label, kind, producer=index))
            fresh_ids[id(t)] = op.outs[-1]
            traffic += t.numel() * t.element_size()
        op.call = None
        if self.calls:
            op.call, items = memwall_calls.record_call(self, func, args, kwargs, out_tensors,
                                                       fresh_ids)
            for b in items:  # Note [Tracked scalars]: the op reads the item's buffer
                if b not in op.ins and b not in op.updates:
                    op.ins.append(b)
        op.flops = memwall_flops.op_flops(name, args, out_tensors if out_tensors else [])
        op.bytes = traffic
        op.time = elapsed
        # Note [Workspace span] (graph/types.h)
        scratch = memwall_scratch.as_scratch(self.scratch(func, args, kwargs, name))
        op.workspace, op.workspace_span = scratch.workspace, scratch.span
        # Note [Scratch before its output] (src/exec/executor_compute.cc)
        op.scratch_first = memwall_scratch.scratch_first(
            scratch, [self.buffers[b].nbytes for b in op.outs])
        # Note [Scratch offsets] (src/exec/device_memory.cc)
        op.scratch_at = [int(v) for pair in scratch.at for v in pair]
        if self.kernels == "cuda" and name in memwall_scratch.CUBLAS_OPS:
            self.use_cublas_workspace(op, index)
        self.ops.append(op)

    def use_cublas_workspace(self, op, index):
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
            nbytes = memwall_scratch.cublas_workspace_bytes()
            buf = Buffer(f"cublas_workspace.{thread}", nbytes, "temp", "uint8", [nbytes],
                         index, None)
            self.buffers.append(buf)
            self._cublas[thread] = len(self.buffers) - 1
            op.outs.append(len(self.buffers) - 1)
        else:
            op.ins.append(b)

    def scratch(self, func, args, kwargs, name):
        """The kernel's own scratch (memwall_scratch.py), from its arguments
        in schema order (keywords filled in, defaults where not given)."""
        any_device = name in memwall_scratch.ANY_DEVICE_RULES
        if not any_device and (self.kernels != "cpu" or name not in memwall_scratch.CPU_RULES):
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
            return memwall_scratch.any_device_workspace(name, full)
        return memwall_scratch.cpu_workspace(name, full, torch.get_num_threads())


# ---------------------------------------------------------------------------
# One training iteration


def _module_hooks(model, recorder):
    handles = []
    for path, module in model.named_modules():
        label = path or "model"

        def pre(module, inputs, label=label):
            recorder.scope.append(label)

        def post(module, inputs, output):
            if recorder.scope:
                recorder.scope.pop()

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    return handles


def _as_args(inputs):
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, (list, tuple)):
        return tuple(inputs), {}
    return (inputs,), {}


def _loss_of(output, target, loss_fn):
    # torchvision's GoogLeNet and Inception v3 return their auxiliary
    # classifiers' logits in training (named tuples). Each auxiliary loss is
    # added with weight 0.4 (Inception v3's usual setting; the GoogLeNet
    # paper used 0.3): the weight does not change memory, but adding the
    # losses gives the auxiliary heads gradients, as in real training.
    if getattr(loss_fn, "whole_output", False):
        return loss_fn(output)  # a model that computes its own loss (memwall_hf.hf_loss)
    if isinstance(output, tuple) and hasattr(output, "_fields"):
        main, *aux = [o for o in output if isinstance(o, torch.Tensor)]
        loss = _call_loss(loss_fn, main, target)
        for a in aux:
            loss = loss + 0.4 * _call_loss(loss_fn, a, target)
        return loss
    if hasattr(output, "logits") and not isinstance(output, torch.Tensor):
        output = output.logits  # Hugging Face style outputs
    return _call_loss(loss_fn, output, target)


def _call_loss(loss_fn, output, target):
    return loss_fn(output) if target is None else loss_fn(output, target)


def _warm_up_optimizer(model, optimizer):
    """Creates the optimizer's lazy states (Adam's moments and step, SGD's
    momentum buffers) with a step over zero gradients, so that the traced
    step is a steady-state one whose states exist before the first op, as
    memwall.graph/1 requires of optim_state buffers. A zero gradient leaves
    the parameters unchanged except for decoupled weight decay (AdamW)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def trace_iteration(model, batch, loss_fn, optimizer, measure, kernels="cuda", calls=True,
                    values=False, steady=False):
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        fail("the example batch must be a pair (inputs, target); target may be None")
    inputs, target = batch
    model.train()
    recorder = Recorder(measure, "cpu" if measure or values else kernels, calls, values, steady)
    param_names = {}
    for name, p in model.named_parameters():
        param_names.setdefault(storage_key(p), name)
    with recorder:
        _warm_up_optimizer(model, optimizer)
    # Model states and inputs exist before the first op.
    seen = set()
    for name, p in model.named_parameters():
        if storage_key(p) not in seen:
            seen.add(storage_key(p))
            recorder.register(p, name, "param")
    for p, state in optimizer.state.items():
        pname = param_names.get(storage_key(p), "param")
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                recorder.register(value, f"{pname}.{key}", "optim_state")
    # Registered module buffers (batch norm running statistics and counters)
    # are persistent state updated in place but not trained: optim_state is
    # the persistent kind that is not counted as parameters (docs/trace.md).
    for name, buf in model.named_buffers():
        recorder.register(buf, name, "optim_state")
    flat_inputs = [t for t in tree_flatten((inputs, target))[0] if isinstance(t, torch.Tensor)]
    for i, t in enumerate(flat_inputs):
        recorder.register(t, "input" if i == 0 else f"input.{i}", "input")
    if target is not None and isinstance(target, torch.Tensor):
        b = recorder.buffer_of(target)
        if b is not None and recorder.buffers[b].name.startswith("input"):
            recorder.buffers[b].name = "target"
    recorder.hold_steady(range(len(recorder.buffers)))

    handles = _module_hooks(model, recorder)
    if recorder.values is not None:
        recorder.rng_state = torch.get_rng_state()  # what the step's random ops start from
    try:
        if recorder.calls:
            with memwall_calls.ScalarTracking(recorder):
                _record_iteration(model, inputs, target, loss_fn, optimizer, recorder)
        else:
            _record_iteration(model, inputs, target, loss_fn, optimizer, recorder)
    except TraceError:
        raise
    except Exception as e:
        # Autograd re-raises a backward kernel's error as its own: the first
        # op that failed is what the user needs to hear about.
        if recorder.failed_op is not None:
            raise OpFailed(*recorder.failed_op) from e
        raise
    finally:
        for h in handles:
            h.remove()
    return recorder


def _record_iteration(model, inputs, target, loss_fn, optimizer, recorder):
    with recorder:
        recorder.recording = True
        args, kwargs = _as_args(inputs)
        output = model(*args, **kwargs)
        recorder.scope = ["loss"]
        loss = _loss_of(output, target, loss_fn)
        recorder.scope = []
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            fail("the loss function must return a scalar tensor")
        if recorder.calls and recorder.buffer_of(loss) is not None:
            recorder.loss_ref = memwall_calls.tensor_ref(recorder, loss)
        if recorder.values is not None:
            recorder.recording = False  # .item() is not part of the step
            recorder.loss_value = loss.item()
            recorder.recording = True
        del output
        recorder.phase = "backward"
        loss.backward()
        del loss
        # The gradients the step will read: kind grad.
        grads = []
        for name, p in model.named_parameters():
            if p.grad is not None:
                b = recorder.buffer_of(p.grad)
                if b is not None and recorder.buffers[b].producer is not None:
                    recorder.buffers[b].kind = "grad"
                    grads.append(b)
                    recorder.buffers[b].name = recorder.unique_name(f"{name}.grad")
                    # The op that made a weight gradient belongs to that
                    # weight's module (its reads may not say so: mm(g, x)).
                    op = recorder.ops[recorder.buffers[b].producer]
                    op.name = f"{name.rpartition('.')[0] or name}.{op.type}"
        recorder.hold_steady(grads)
        recorder.phase = "optimizer"
        optimizer.step()
        recorder.note_deaths()  # what the step itself freed at its end
        recorder.recording = False


def measure_real_step(build):
    """`--measure-peak`: the same training iteration as the trace's, run for
    real on the CPU (a fresh model from `build`, the optimizer's states
    made by the same warm-up step) under PyTorch's allocator records
    (memwall_fidelity.py)."""
    torch.manual_seed(0)
    model, (inputs, target), loss_fn, optimizer = _check_built(build())
    model.train()
    _warm_up_optimizer(model, optimizer)

    def persistent():
        states = [v for state in optimizer.state.values() for v in state.values()
                  if isinstance(v, torch.Tensor)]
        batch = [t for t in tree_flatten((inputs, target))[0] if isinstance(t, torch.Tensor)]
        return list(model.parameters()) + list(model.buffers()) + states + batch

    def step():
        args, kwargs = _as_args(inputs)
        output = model(*args, **kwargs)
        loss = _loss_of(output, target, loss_fn)
        del output
        loss.backward()
        del loss
        optimizer.step()

    try:
        return memwall_fidelity.measure_step(step, persistent)
    except TraceError:
        raise
    except Exception as e:
        fail(f"the real step on the CPU failed: {type(e).__name__}: {_first_line(e)}")


def to_graph(recorder, name, meta):
    """The recorded iteration as memwall.graph/1. Drops allocations that
    nothing reads (record_function's dummy handle in optimizer.step, batch
    norm's empty reserve): they read and update nothing either, so no other
    op depends on them. Drops model states that no op touches (optimizer
    states of parameters that got no gradient: a real run never creates
    them)."""
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
        record = {"id": new_id[old], "name": b.name, "bytes": int(b.nbytes), "kind": b.kind,
                  "dtype": b.dtype, "shape": [int(d) for d in b.shape]}
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
            record["call"] = memwall_calls.remap(op.call, new_id)
        records.append(record)
    if recorder.calls:
        meta = dict(meta)
        meta["calls"] = _runnable(recorder, ops)
        if recorder.loss_ref is not None:
            meta["loss"] = memwall_calls.remap(recorder.loss_ref, new_id)
    recorder.new_id = new_id
    return {"format": "memwall.graph/1", "name": name, "meta": meta, "buffers": buffers,
            "ops": records}


# ---------------------------------------------------------------------------
# Model sources


def torchvision_models():
    """torchvision's classification builders (models registered in the
    top-level torchvision.models package, not detection/segmentation/video/
    quantization/optical_flow)."""
    import torchvision.models as tm
    return tm.list_models(module=tm)


def make_optimizer(name, params):
    # foreach=False: the per-parameter loop, whose ops the graph lists one
    # parameter at a time, as the zoo's graphs do (torch 2.x defaults to the
    # foreach kernels, which batch all parameters into one op per step).
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, foreach=False)
    if name == "momentum":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=False)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, foreach=False)
    fail(f"unknown optimizer '{name}' (known: sgd, momentum, adam, adamw)")


def default_image(name):
    # torchvision documents N x 3 x 299 x 299 inputs for Inception v3 (its
    # auxiliary classifier's 5x5 convolution needs at least 17x17 features
    # there, about 270 pixels); every other classifier takes 224.
    return 299 if name == "inception_v3" else 224


def build_torchvision(name, batch, image, optimizer):
    import torchvision.models as tm
    known = torchvision_models()
    if name not in known:
        fail(f"unknown torchvision classification model '{name}' (known: {', '.join(known)})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GoogLeNet/Inception's init-change notice
        try:
            model = tm.get_model(name, weights=None)
        except Exception as e:
            fail(f"{name}: building the model failed: {type(e).__name__}: {_first_line(e)}")
    images = torch.randn(batch, 3, image, image)
    labels = torch.randint(0, 1000, (batch,))
    return model, (images, labels), torch.nn.CrossEntropyLoss(), make_optimizer(
        optimizer, model.parameters())


def build_script(spec):
    import importlib.util
    path, sep, fn_name = spec.rpartition(":")
    if not sep or not path or not fn_name:
        fail(f"--script takes FILE.py:FUNCTION, got '{spec}'")
    if not os.path.isfile(path):
        fail(f"script '{path}' does not exist")
    module_spec = importlib.util.spec_from_file_location("memwall_user_model", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        fail(f"script '{path}' failed to load: {type(e).__name__}: {_first_line(e)}")
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        fail(f"script '{path}' has no function '{fn_name}'")
    try:
        result = fn()
    except TraceError:
        raise
    except Exception as e:
        fail(f"{path}: {fn_name}() failed: {type(e).__name__}: {_first_line(e)}")
    if isinstance(result, dict):
        try:
            result = (result["model"], result["batch"], result["loss_fn"], result["optimizer"])
        except KeyError as e:
            fail(f"{fn_name}() returned a dict without {e}")
    if not isinstance(result, (tuple, list)) or len(result) != 4:
        fail(f"{fn_name}() must return (model, batch, loss_fn, optimizer)")
    return tuple(result)


def _first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def run_one(source, meta, measure, build, kernels="cuda", calls=True, keep=None):
    """Builds (on meta unless measuring) and traces; returns the graph.
    `kernels`: whose kernels the meta trace stands for, "cuda" or "cpu"
    (what they save differs: dropout's mask); measuring runs the CPU's.
    With `keep` (a dict), the step runs on real CPU tensors, keeps the
    values it starts from (Note [Run inputs]) and leaves the recorder and
    the model in `keep`."""
    real = measure or keep is not None
    if real:
        model, batch, loss_fn, optimizer = _check_built(build())
    else:
        with MetaDeviceMode(building=True):
            model, batch, loss_fn, optimizer = _check_built(build())
        batch = to_meta(model, batch, optimizer)
    try:
        if real:
            recorder = trace_iteration(model, batch, loss_fn, optimizer, measure, "cpu", calls,
                                       values=keep is not None)
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
        fail(f"{source}: the training step failed: {type(e).__name__}: {_first_line(e)}")
    meta = dict(meta)
    meta["param_count"] = sum(p.numel() for p in _unique_params(model))
    meta["dtype"] = _param_dtype(model)
    if "batch" not in meta:
        size = _batch_size(batch)
        if size is not None:
            meta["batch"] = size
    meta["device"] = "cpu" if real else "meta"
    meta["kernels"] = "cpu" if real else kernels
    # The CPU kernels' scratch depends on the thread count (memwall_scratch.py:
    # per-thread rows, oneDNN's GEMM fallback): `memwall run` runs the graph
    # at the count it was traced with (request_for).
    if meta["kernels"] == "cpu":
        meta["threads"] = torch.get_num_threads()
    # Where the graph came from: the versions it was traced with.
    meta["torch"] = torch.__version__
    for package in ("torchvision", "transformers"):
        module = sys.modules.get(package)
        if module is not None and hasattr(module, "__version__"):
            meta[package] = module.__version__
    meta["source"] = "memwall trace"
    graph = to_graph(recorder, meta.get("model", source), meta)
    if keep is not None:
        keep.update(recorder=recorder, model=model, batch=batch, loss_fn=loss_fn,
                    optimizer=optimizer, build=build)
    return graph


def _runnable(recorder, ops):
    """Whether `memwall run` can replay the graph's calls, and if not why."""
    if recorder.untracked_item is not None:
        return {"runnable": False, "why": f"the step reads {recorder.untracked_item}"}
    for op in ops:
        if op.call is not None and "unsupported" in op.call:
            return {"runnable": False, "why": f"op {op.name} ({op.call['op']}) takes "
                    f"{op.call['unsupported']}"}
    if recorder.loss_ref is None:
        return {"runnable": False, "why": "the loss is not a tensor the trace recorded"}
    return {"runnable": True}


def write_values(graph, keep, steps, seed, out_dir, ranks=1):
    """Note [Run inputs] (memwall_calls.py): the traced step's starting
    values, then `steps` - 1 more plain eager steps and what they leave;
    over `ranks` > 1, Note [Data-parallel reference] instead."""
    recorder = keep["recorder"]
    new_id = recorder.new_id
    state = memwall_calls.ValueFile(os.path.join(out_dir, "state.bin"))
    for old, data in sorted(recorder.values.items()):
        if old in new_id:
            state.add(new_id[old], data, recorder.buffers[old].name)
    rng = state.add_blob(memwall_calls.storage_bytes(recorder.rng_state.untyped_storage()))
    meta = {"seed": seed, "threads": torch.get_num_threads(), "rng": rng,
            "torch": torch.__version__}
    if ranks > 1:
        meta["ranks"] = ranks
    state.close(os.path.join(out_dir, "state.json"), meta)
    if ranks == 1:
        meta = {"steps": steps, "losses": _eager_steps(keep, steps)}
    else:
        batches = [keep["batch"]] + [_rank_batch(keep["build"], seed + r, r)
                                     for r in range(1, ranks)]
        _write_rank_inputs(recorder, batches, seed, out_dir)
        rank_losses = _data_parallel_steps(keep, batches, steps)
        meta = {"steps": steps, "ranks": ranks, "losses": rank_losses[0],
                "rank_losses": rank_losses}
    _write_eager(recorder, keep["model"], keep["optimizer"], out_dir, meta)
    write_json(graph, os.path.join(out_dir, "graph.json"))


def _eager_steps(keep, steps):
    """The losses of the traced step and `steps` - 1 more on its batch."""
    losses = [keep["recorder"].loss_value]
    model, optimizer, loss_fn = keep["model"], keep["optimizer"], keep["loss_fn"]
    inputs, target = keep["batch"]
    try:
        for _ in range(steps - 1):
            optimizer.zero_grad(set_to_none=True)
            args, kwargs = _as_args(inputs)
            loss = _loss_of(model(*args, **kwargs), target, loss_fn)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    except Exception as e:
        fail(f"the eager steps after the traced one failed: {type(e).__name__}: {_first_line(e)}")
    return losses


def _write_eager(recorder, model, optimizer, out_dir, meta):
    """eager.bin/json: the persistent storages' bytes now (parameters,
    module buffers, optimizer states) under the graph's ids."""
    new_id = recorder.new_id
    persistent = {}
    for t in list(model.parameters()) + list(model.buffers()) + _optimizer_tensors(optimizer):
        persistent[storage_key(t)] = t.untyped_storage()
    eager = memwall_calls.ValueFile(os.path.join(out_dir, "eager.bin"))
    for key, old in recorder.by_storage.items():
        if old in new_id and key in persistent:
            eager.add(new_id[old], memwall_calls.storage_bytes(persistent[key]),
                      recorder.buffers[old].name)
    eager.entries.sort(key=lambda e: e["id"])
    eager.close(os.path.join(out_dir, "eager.json"), meta)


def _optimizer_tensors(optimizer):
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


def _batch_tensors(batch):
    """The batch's tensors in trace_iteration's order."""
    inputs, target = batch
    return [t for t in tree_flatten((inputs, target))[0] if isinstance(t, torch.Tensor)]


def _rank_batch(build, seed, rank):
    """Rank `rank`'s batch: the build's after torch.manual_seed(seed); the
    CPU generator is left as it was."""
    rng = torch.get_rng_state()
    try:
        torch.manual_seed(seed)
        _, batch, _, _ = _check_built(build())
    except TraceError:
        raise
    except Exception as e:
        fail(f"--ranks: building rank {rank}'s batch failed: {type(e).__name__}: "
             f"{_first_line(e)}")
    finally:
        torch.set_rng_state(rng)
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        fail("the example batch must be a pair (inputs, target); target may be None")
    return batch


def _layout(t):
    return (t.dtype, list(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().nbytes())


def _rank_inputs(recorder, batches, rank):
    """(input buffer's old id, rank `rank`'s tensor for it), by id."""
    first, mine = _batch_tensors(batches[0]), _batch_tensors(batches[rank])
    if len(mine) != len(first):
        fail(f"--ranks: rank {rank}'s batch has {len(mine)} tensors, rank 0's {len(first)}")
    chosen = {}
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


def _write_rank_inputs(recorder, batches, seed, out_dir):
    """inputs<r>.bin/json for r = 1..N-1 (Note [Data-parallel reference])."""
    for r in range(1, len(batches)):
        f = memwall_calls.ValueFile(os.path.join(out_dir, f"inputs{r}.bin"))
        for old, t in _rank_inputs(recorder, batches, r):
            f.add(recorder.new_id[old], memwall_calls.storage_bytes(t.untyped_storage()),
                  recorder.buffers[old].name)
        f.close(os.path.join(out_dir, f"inputs{r}.json"), {"rank": r, "seed": seed + r})


def _restore_start(recorder, model, optimizer):
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


def _stepped_params(optimizer):
    params = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            params.setdefault(id(p), p)
    return list(params.values())


def _rank_step(model, batch, loss_fn, params):
    """Forward, loss and backward on one rank's batch; its loss and a
    clone of each parameter's gradient."""
    inputs, target = batch
    args, kwargs = _as_args(inputs)
    loss = _loss_of(model(*args, **kwargs), target, loss_fn)
    loss.backward()
    return loss.item(), [None if p.grad is None else p.grad.clone() for p in params]


def _mean_grads(params, grads):
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


def _load(buffers, values):
    with torch.no_grad():
        for b, v in zip(buffers, values):
            b.copy_(v)


def _data_parallel_steps(keep, batches, steps):
    """Note [Data-parallel reference]: the steps; each rank's losses."""
    recorder, model, optimizer = keep["recorder"], keep["model"], keep["optimizer"]
    _restore_start(recorder, model, optimizer)
    buffers = list(model.buffers())
    mine = [[b.clone() for b in buffers] for _ in batches]  # each rank's module buffers
    params = _stepped_params(optimizer)
    losses = [[] for _ in batches]
    torch.set_rng_state(recorder.rng_state)
    try:
        for _ in range(steps):
            for r, loss in enumerate(_data_parallel_step(keep, batches, buffers, mine, params)):
                losses[r].append(loss)
            if losses[0][0] != recorder.loss_value:
                fail(f"--ranks: the reference's first loss {losses[0][0]!r} is not the traced "
                     f"step's {recorder.loss_value!r} (its starting state was not restored)")
    except TraceError:
        raise
    except Exception as e:
        fail(f"the data-parallel reference steps failed: {type(e).__name__}: {_first_line(e)}")
    _load(buffers, mine[0])
    return losses


def _data_parallel_step(keep, batches, buffers, mine, params):
    """One step over every rank from the CPU generator's state now; each
    rank's loss. `mine[r]`: rank r's module buffers, before and after."""
    rng, grads, losses = torch.get_rng_state(), [], []
    for r, batch in enumerate(batches):
        torch.set_rng_state(rng)
        _load(buffers, mine[r])
        keep["optimizer"].zero_grad(set_to_none=True)
        loss, g = _rank_step(keep["model"], batch, keep["loss_fn"], params)
        grads.append(g)
        losses.append(loss)
        mine[r] = [b.clone() for b in buffers]
    _mean_grads(params, grads)
    keep["optimizer"].step()
    return losses


def _param_dtype(model):
    """The floating dtype holding most parameter elements ("fp32", "bf16",
    ...): what a user means by the model's dtype. Mixed precision under
    autocast still keeps fp32 parameters and is reported as fp32."""
    elements = {}
    for p in _unique_params(model):
        if p.dtype.is_floating_point:
            elements[p.dtype] = elements.get(p.dtype, 0) + p.numel()
    if not elements:
        return "fp32"
    return dtype_name(max(elements, key=elements.get))


def _batch_size(batch):
    """The first dimension of the batch's first tensor, or None."""
    flat, _ = tree_flatten(batch)
    for t in flat:
        if isinstance(t, torch.Tensor) and t.dim() > 0:
            return int(t.shape[0])
    return None


def graph_name(model, meta, function=None):
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


def _check_built(built):
    model, batch, loss_fn, optimizer = built
    if not isinstance(model, torch.nn.Module):
        fail("the model must be a torch.nn.Module")
    if not isinstance(optimizer, torch.optim.Optimizer):
        fail("the optimizer must be a torch.optim.Optimizer")
    return model, batch, loss_fn, optimizer


def _unique_params(model):
    seen = set()
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            yield p


def write_json(graph, path):
    tmp = f"{path}.tmp"  # memwall's private directory: it removes this name if interrupted
    with open(tmp, "w") as f:
        json.dump(graph, f, separators=(",", ":"))
    os.replace(tmp, path)


def main(argv):
    parser = argparse.ArgumentParser(prog="memwall_trace.py")
    parser.add_argument("--torchvision")
    parser.add_argument("--script")
    parser.add_argument("--sweep")
    parser.add_argument("--only", help="--sweep: these comma-separated models only")
    parser.add_argument("--batch", type=int, help="default 32; 1 with --hf")
    parser.add_argument("--image", type=int)
    parser.add_argument("--optimizer", help="default adam; adamw with --hf")
    parser.add_argument("--hf", help="a Hugging Face model built from its configuration: "
                        + ", ".join(memwall_hf.BUILTINS if torch is not None else []))
    parser.add_argument("--hf-config", help="a transformers config.json (with model_type)")
    parser.add_argument("--seq", type=int, default=512, help="--hf: sequence length")
    parser.add_argument("--dtype", default="bf16", help="--hf: fp32, or bf16/fp16 mixed "
                        "precision (16-bit model, fp32 master weights and optimizer states)")
    parser.add_argument("--lora", type=int, help="--hf: LoRA adapters of this rank")
    parser.add_argument("--lora-targets", default="q,v", help="--lora: q,k,v,o,gate,up,down "
                        "or all-linear")
    parser.add_argument("--lora-alpha", type=float, default=8.0, help="--lora: alpha (peft's 8)")
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--kernels", choices=["cuda", "cpu"])
    parser.add_argument("--builtin", help="a model of memwall's fidelity set: "
                        + ", ".join(memwall_fidelity.BUILTINS))
    parser.add_argument("--threads", type=int, help="torch.set_num_threads before tracing")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure the compute device (memwall calibrate) and print JSON")
    parser.add_argument("--quick", action="store_true", help="--calibrate: small sizes")
    parser.add_argument("--measure-peak", help="also run the step on the CPU under the "
                        "profiler's allocator records and write the measured peak here")
    parser.add_argument("--values", help="trace on real CPU tensors and write the graph, the "
                        "values the step starts from and eager's results to this directory "
                        "(Note [Run inputs] in memwall_calls.py)")
    parser.add_argument("--steps", type=int, default=3, help="--values: eager steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ranks", type=int, default=1, help="--values: the eager reference "
                        "over this many data-parallel ranks (Note [Data-parallel reference])")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if torch is None:
        fail(_torch_missing())
    global _USER_SCRIPT
    _USER_SCRIPT = args.script.rpartition(":")[0] if args.script else None
    hf = args.hf is not None or args.hf_config is not None
    args.batch = args.batch if args.batch is not None else (1 if hf else 32)
    args.optimizer = args.optimizer or ("adamw" if hf else "adam")
    if args.batch <= 0 or (args.image is not None and args.image <= 0):
        fail("--batch and --image must be positive")
    if args.measure and args.kernels == "cuda":
        fail("--measure runs the CPU's kernels; --kernels cuda needs the meta-device trace")
    if args.values and (args.measure or args.kernels == "cuda"):
        fail("--values runs the CPU's kernels on real tensors (no --measure, --kernels cuda)")
    args.kernels = args.kernels or ("cpu" if args.measure or args.values else "cuda")
    if args.threads is not None:
        if args.threads <= 0:
            fail("--threads must be positive")
        torch.set_num_threads(args.threads)
    if args.steps <= 0:
        fail("--steps must be positive")
    if args.ranks <= 0:
        fail("--ranks must be positive")
    if args.ranks > 1 and not args.values:
        fail("--ranks needs --values")
    torch.manual_seed(args.seed)
    if args.calibrate:
        try:
            print(json.dumps(memwall_calibrate.measure(args.quick)))
        except Exception as e:
            fail(f"calibration failed: {type(e).__name__}: {_first_line(e)}")
        return 0
    if args.sweep:
        return sweep(args)
    if not args.out and not args.values:
        fail("--out is required")
    keep = {} if args.values else None
    if args.values:
        os.makedirs(args.values, exist_ok=True)
    if args.torchvision:
        args.image = args.image or default_image(args.torchvision)
        meta = {"model": args.torchvision, "batch": args.batch, "image": args.image,
                "optimizer": args.optimizer}
        graph = run_one(args.torchvision, meta, args.measure, lambda: build_torchvision(
            args.torchvision, args.batch, args.image, args.optimizer), args.kernels, keep=keep)
        graph["name"] = graph_name(args.torchvision, graph["meta"])
        graph["meta"]["origin"] = {"torchvision": args.torchvision, "batch": args.batch,
                                   "image": args.image, "optimizer": args.optimizer}
        build = lambda: build_torchvision(args.torchvision, args.batch, args.image,  # noqa: E731
                                          args.optimizer)
    elif hf:
        graph, build = trace_hf(args, keep)
    elif args.builtin:
        if args.builtin not in memwall_fidelity.BUILTINS:
            fail(f"unknown built-in model '{args.builtin}' (known: "
                 f"{', '.join(memwall_fidelity.BUILTINS)})")
        build = memwall_fidelity.BUILTINS[args.builtin]
        graph = run_one(args.builtin, {"model": args.builtin}, args.measure, build,
                        args.kernels, keep=keep)
        graph["name"] = graph_name(args.builtin, graph["meta"])
        graph["meta"]["origin"] = {"builtin": args.builtin}
    elif args.script:
        path, _, function = args.script.rpartition(":")
        name = os.path.splitext(os.path.basename(path))[0]
        graph = run_one(args.script, {"model": name, "function": function}, args.measure,
                        lambda: build_script(args.script), args.kernels, keep=keep)
        graph["name"] = graph_name(name, graph["meta"], function)
        graph["meta"]["origin"] = {"script": f"{os.path.abspath(path)}:{function}"}
        build = lambda: build_script(args.script)  # noqa: E731
    else:
        fail("give --torchvision NAME, --builtin NAME, --hf NAME, --hf-config FILE or "
             "--script FILE.py:FUNCTION")
    if args.values:
        write_values(graph, keep, args.steps, args.seed, args.values, args.ranks)
        return 0
    write_json(graph, args.out)
    if args.measure_peak:
        measured = measure_real_step(build)
        measured["threads"] = torch.get_num_threads()
        write_json(measured, args.measure_peak)
    return 0


def trace_hf(args, keep):
    """--hf NAME / --hf-config FILE (memwall_hf.py); returns the graph and
    its build."""
    if args.hf is not None and args.hf_config is not None:
        fail("give --hf NAME or --hf-config FILE, not both")
    if args.lora is None and (args.lora_targets != "q,v" or args.lora_alpha != 8.0):
        fail("--lora-targets and --lora-alpha need --lora RANK")
    try:
        key, hf_model, model_type, cfg = memwall_hf.resolve(args.hf, args.hf_config)
        lora = None if args.lora is None else (args.lora, args.lora_alpha, args.lora_targets)
        info = {}
        build = memwall_hf.builder(key, model_type, cfg, args.batch, args.seq, args.dtype,
                                   args.optimizer, make_optimizer, lora, info)
        meta = {"model": key, "hf_model": hf_model, "batch": args.batch, "seq": args.seq,
                "optimizer": args.optimizer}
        graph = run_one(key, meta, args.measure, build, args.kernels, keep=keep)
    except memwall_hf.HfError as e:
        fail(str(e))
    graph["meta"].update(info)
    # run_one names the parameters' dtype; --dtype names the training recipe
    # (bf16: 16-bit parameters with fp32 master weights).
    graph["meta"]["dtype"] = args.dtype
    graph["name"] = graph_name(key, graph["meta"])
    # memwall run traces it again for its values: the config by its full path.
    source = hf_model if args.hf else os.path.abspath(args.hf_config)
    graph["meta"]["origin"] = {"hf" if args.hf else "hf_config": source, "batch": args.batch,
                               "seq": args.seq, "dtype": args.dtype,
                               "optimizer": args.optimizer}
    if lora is not None:
        graph["meta"]["origin"].update(lora=args.lora, lora_alpha=graph["meta"]["lora_alpha"],
                                       lora_targets=args.lora_targets)
    return graph, build


def sweep(args):
    """Traces every torchvision classifier in this one process (one torch
    import for all); writes DIR/<name>.json and prints one line per model:
    "<name> ok <seconds>" or "<name> error <message>"."""
    os.makedirs(args.sweep, exist_ok=True)
    names = torchvision_models()
    if args.only:
        names = [n for n in args.only.split(",") if n]
    for name in names:
        start = time.perf_counter()
        image = args.image or default_image(name)
        try:
            meta = {"model": name, "batch": args.batch, "image": image,
                    "optimizer": args.optimizer}
            graph = run_one(name, meta, False, lambda: build_torchvision(
                name, args.batch, image, args.optimizer), args.kernels, calls=False)
            graph["name"] = graph_name(name, graph["meta"])
            write_json(graph, os.path.join(args.sweep, f"{name}.json"))
            print(f"{name} ok {time.perf_counter() - start:.2f}", flush=True)
        except Exception as e:  # one model's failure must not hide the others'
            print(f"{name} error {type(e).__name__}: {_first_line(e)}", flush=True)
    return 0


# Note [A script that exits]: the user's script runs in the tracer's
# process, so a sys.exit() in it (or in its model's forward) ends the
# tracer before it writes anything, which once read as an invalid graph
# "(a tracer bug)". The SystemExit it raises is reported here as the
# script's; an os._exit() cannot be caught, and the C++ side
# (src/importers/torch_trace.cc) says the same when the process ends
# without its output or its verdict. argparse's own exits come before the
# script is known.
_USER_SCRIPT = None
_MUST_RETURN = ("its function must return (model, batch, loss_fn, optimizer) and the training "
                "step must return to the tracer")

if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        if _USER_SCRIPT is None:
            raise
        sys.stderr.write(f"{ERROR_PREFIX}{_USER_SCRIPT}: the script called sys.exit({e.code!r}) "
                         f"before the trace was written: {_MUST_RETURN}\n")
        sys.exit(2)
    except TraceError as e:
        sys.stderr.write(f"{ERROR_PREFIX}{e}\n")
        sys.exit(2)
    except Exception as e:  # a tracer bug: still one line, with where it came from
        tb = traceback.extract_tb(e.__traceback__)
        where = f" (at line {tb[-1].lineno})" if tb else ""
        sys.stderr.write(f"{ERROR_PREFIX}internal tracer error: {type(e).__name__}: "
                         f"{_first_line(e)}{where}\n")
        sys.exit(2)
    sys.exit(code)
