"""One training iteration under the recorder: the optimizer's warm-up, the
model states and the batch registered as the buffers that exist before the
first op, then forward, loss, backward and the optimizer step, recorded."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten
from torch.utils.hooks import RemovableHandle

from memwall.errors import OpFailed, TraceError, fail
from memwall.tracer.calls import ScalarTracking, TrackedSettings, tensor_ref
from memwall.tracer.devices import generator_state
from memwall.tracer.recorder import Recorder, storage_key

# The loss function of a model source: loss_fn(output, target), or
# loss_fn(output) with a None target, or, with an attribute whole_output
# true, loss_fn(output) of the model's whole output (memwall.sources.hf.hf_loss).
LossFn = Callable[..., torch.Tensor]


def _module_hooks(model: torch.nn.Module, recorder: Recorder) -> list[RemovableHandle]:
    """Forward hooks that keep recorder.scope the path of the running module."""
    handles = []
    for path, module in model.named_modules():
        label = path or "model"

        def pre(module: torch.nn.Module, inputs: Any, label: str = label) -> None:
            recorder.scope.append(label)

        def post(module: torch.nn.Module, inputs: Any, output: Any) -> None:
            if recorder.scope:
                recorder.scope.pop()

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    return handles


def as_args(inputs: Any) -> tuple[tuple, dict[str, Any]]:
    """The model's call arguments from a batch's inputs: a dict as keywords,
    a list or tuple as positional arguments, anything else as the one
    argument."""
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, (list, tuple)):
        return tuple(inputs), {}
    return (inputs,), {}


def loss_of(output: Any, target: Any, loss_fn: LossFn) -> torch.Tensor:
    """The loss of a model's output.

    torchvision's GoogLeNet and Inception v3 return their auxiliary
    classifiers' logits in training (named tuples). Each auxiliary loss is
    added with weight 0.4 (Inception v3's usual setting; the GoogLeNet
    paper used 0.3): the weight does not change memory, but adding the
    losses gives the auxiliary heads gradients, as in real training."""
    if getattr(loss_fn, "whole_output", False):
        return loss_fn(output)  # a model that computes its own loss (memwall.sources.hf.hf_loss)
    if isinstance(output, tuple) and hasattr(output, "_fields"):
        main, *aux = [o for o in output if isinstance(o, torch.Tensor)]
        loss = _call_loss(loss_fn, main, target)
        for a in aux:
            loss = loss + 0.4 * _call_loss(loss_fn, a, target)
        return loss
    if hasattr(output, "logits") and not isinstance(output, torch.Tensor):
        output = output.logits  # Hugging Face style outputs
    return _call_loss(loss_fn, output, target)


def _call_loss(loss_fn: LossFn, output: Any, target: Any) -> torch.Tensor:
    return loss_fn(output) if target is None else loss_fn(output, target)


def warm_up_optimizer(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
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


def trace_iteration(model: torch.nn.Module, batch: Any, loss_fn: LossFn,
                    optimizer: torch.optim.Optimizer, measure: bool, kernels: str = "cuda",
                    calls: bool = True, values: bool = False, steady: bool = False,
                    device: torch.device | None = None) -> Recorder:
    """Records one training iteration of `model` on `batch` (a pair
    (inputs, target)); returns the recorder. The arguments after
    `optimizer` are Recorder's; a measured step runs the CPU's kernels. A
    step for its `values` runs on `device` (the CPU by default), whose
    kernels `kernels` names and whose generator its random ops draw from."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        fail("the example batch must be a pair (inputs, target); target may be None")
    inputs, target = batch
    model.train()
    recorder = Recorder(measure, "cpu" if measure else kernels, calls, values, steady)
    param_names: dict[int, str] = {}
    for name, p in model.named_parameters():
        param_names.setdefault(storage_key(p), name)
    with recorder:
        warm_up_optimizer(model, optimizer)
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
        # What the step's random ops start from.
        recorder.rng_state = generator_state(device or torch.device("cpu"))
    try:
        if recorder.calls:
            with ScalarTracking(recorder):
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


def _record_iteration(model: torch.nn.Module, inputs: Any, target: Any, loss_fn: LossFn,
                      optimizer: torch.optim.Optimizer, recorder: Recorder) -> None:
    with recorder:
        recorder.recording = True
        args, kwargs = as_args(inputs)
        output = model(*args, **kwargs)
        recorder.scope = ["loss"]
        loss = loss_of(output, target, loss_fn)
        recorder.scope = []
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            fail("the loss function must return a scalar tensor")
        if recorder.calls and recorder.buffer_of(loss) is not None:
            recorder.loss_ref = tensor_ref(recorder, loss)
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
        if recorder.calls:
            with TrackedSettings(optimizer):
                optimizer.step()
        else:
            optimizer.step()
        recorder.note_deaths()  # what the step itself freed at its end
        recorder.recording = False
