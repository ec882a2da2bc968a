"""The runnable part of a traced graph (issue 22, docs/exec.md): for every
recorded aten op, what `memwall run` needs to call it again (Note [Call
records]), and the Python floats computed from tensors that it passes
(Note [Tracked scalars]). The values a trace on real tensors starts from
are memwall.values'."""
#
# Note [Call records]
# ~~~~~~~~~~~~~~~~~~~
# An op's "call" is {"op": "aten::addmm", "overload": "", "args": [...],
# "kwargs": {...}, "results": [...]} plus "rng": true for ops tagged
# nondeterministic_seeded. Arguments are encoded as JSON by kind:
#   tensor       {"t": BUFFER, "size": [...], "stride": [...], "offset": N,
#                 "dtype": "Float"}: a view of the buffer's storage
#   int, bool    JSON integers and booleans; None is null
#   float        {"f": 0.5} (or "inf", "-inf", "nan"), with "expr" when the
#                value was computed from a tensor's .item() (Note [Tracked
#                scalars])
#   dtype, layout, memory format   {"dtype": "Float"}, {"layout": "Strided"},
#                {"memory_format": "ChannelsLast"} (c10's names)
#   device       {"device": "cpu"}: the executor substitutes its own
#   string       {"s": "mean"}
#   lists        JSON arrays of the above
# "results" gives, for each tensor the op returns (in pytree order), the
# buffer it creates, or null for a view or in-place result of a buffer that
# already exists. Views are not ops: a later argument names the buffer and
# its view. An op whose arguments cannot be encoded gets {"op": ...,
# "unsupported": why}; `memwall run` refuses such a graph and says why.
#
# Note [Tracked scalars]
# ~~~~~~~~~~~~~~~~~~~~~~
# torch.optim's Adam (capturable=False, the CPU's only choice) reads its step
# count with .item() and passes Python floats computed from it (bias
# corrections, step size) to later ops. A replay of step k needs step k's
# values, not those of the traced step. During recording, .item() of a
# floating one-element tensor returns a TrackedFloat: a float that carries
# the expression it came from (["item", ref], then ["sub", a, b], ["pow",
# a, b], ...). A torch function called with tracked floats makes them known
# to the aten ops it dispatches to, which record each matching float
# argument with its expression (by exact value, within that call only) and
# read the item's buffer (it joins the op's "in": the value must be
# resident). The executor evaluates the expression in doubles, as Python
# did. Other .item() calls (integers, booleans: data-dependent control flow)
# cannot be replayed: the graph's meta says so ("calls").
#
# Note [Tracked settings]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A learning-rate schedule changes each param group's "lr" between steps,
# and torch.optim turns it into Python floats the step's ops take
# (param.addcdiv_(value=-lr / bias_correction1), SGD's add_(alpha=-lr)).
# During the traced optimizer step each group's float lr is a TrackedFloat
# ["setting", "group<i>.lr", traced value], recorded into the expressions
# of the ops it reaches like an item (it reads no buffer). The graph's
# meta lists the settings its ops read ("calls": {"settings": {name:
# traced value}}). The executor evaluates a setting as the value the
# caller last gave (memwall::exec::Session::set_setting; the Trainer gives
# each group's lr before every step), else as traced. Other settings
# (betas, weight decay, momentum) may decide which ops run (weight_decay
# != 0), so a change of one still needs a new trace.
from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

if TYPE_CHECKING:
    from memwall.tracer.recorder import Recorder

# A call record, or a part of one, as JSON (Note [Call records]).
Json = Any

C10_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
    torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
    torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
}
C10_LAYOUTS: dict[torch.layout, str] = {torch.strided: "Strided"}
C10_MEMORY_FORMATS: dict[torch.memory_format, str] = {
    torch.contiguous_format: "Contiguous", torch.preserve_format: "Preserve",
    torch.channels_last: "ChannelsLast", torch.channels_last_3d: "ChannelsLast3d",
}


class Unsupported(Exception):
    """An argument the call record cannot express."""


class TrackedFloat(float):
    """A float computed from a tensor's .item() (Note [Tracked scalars])."""
    __slots__ = ("expr",)

    expr: Json

    def __new__(cls, value: float, expr: Json) -> TrackedFloat:
        self = float.__new__(cls, value)
        self.expr = expr
        return self

    def __neg__(self) -> TrackedFloat:
        return TrackedFloat(-float(self), ["neg", self.expr])

    def __pos__(self) -> TrackedFloat:
        return self


def _operand(x: float | int) -> Json:
    if isinstance(x, TrackedFloat):
        return x.expr
    return float(x) if isinstance(x, float) else int(x)


def _binary(name: str, fn: Callable[[Any, Any], Any]) -> tuple[Callable, Callable]:
    def forward(self: TrackedFloat, other: Any) -> Any:
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            return NotImplemented
        return TrackedFloat(fn(float(self), other), [name, self.expr, _operand(other)])

    def reflected(self: TrackedFloat, other: Any) -> Any:
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            return NotImplemented
        return TrackedFloat(fn(other, float(self)), [name, _operand(other), self.expr])

    return forward, reflected


for _name, _py, _fn in (("add", "add", operator.add), ("sub", "sub", operator.sub),
                        ("mul", "mul", operator.mul), ("div", "truediv", operator.truediv),
                        ("pow", "pow", operator.pow)):
    _f, _r = _binary(_name, _fn)
    setattr(TrackedFloat, f"__{_py}__", _f)
    setattr(TrackedFloat, f"__r{_py}__", _r)


class ScalarTracking(TorchFunctionMode):
    """Makes .item() of floating tensors tracked and tells the recorder which
    tracked floats the current torch function was called with."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        rec = self.recorder
        if not rec.recording:
            return func(*args, **kwargs)
        if func is torch.Tensor.item:
            t = args[0]
            rec.reading_tracked = (t.dtype.is_floating_point and t.numel() == 1
                                   and rec.buffer_of(t) is not None)
            try:
                value = func(*args, **kwargs)
            finally:
                rec.reading_tracked = False
            if (t.dtype.is_floating_point and t.numel() == 1
                    and rec.buffer_of(t) is not None and isinstance(value, float)):
                return TrackedFloat(value, ["item", tensor_ref(rec, t)])
            if rec.untracked_item is None:
                rec.untracked_item = (f"a {t.dtype} tensor's .item() (value-dependent Python "
                                      f"code) after op {len(rec.ops)}")
            return value
        tracked: dict[float, Json] = {}
        for x in tree_flatten((args, kwargs))[0]:
            if isinstance(x, TrackedFloat):
                tracked[float(x)] = x.expr
        if not tracked:
            return func(*args, **kwargs)
        rec.tracked.append(tracked)
        try:
            return func(*args, **kwargs)
        finally:
            rec.tracked.pop()


def tensor_ref(rec: Recorder, t: torch.Tensor) -> Json:
    """A tensor argument: its buffer and its view of the buffer's storage."""
    b = rec.buffer_of(t)
    if b is None:
        raise Unsupported("a tensor the trace does not know")
    if t.dtype not in C10_DTYPES:
        raise Unsupported(f"a tensor of dtype {t.dtype}")
    return {"t": b, "size": [int(d) for d in t.shape], "stride": [int(s) for s in t.stride()],
            "offset": int(t.storage_offset()), "dtype": C10_DTYPES[t.dtype]}


def _float(rec: Recorder, v: float, items: list[int]) -> Json:
    if math.isinf(v) or math.isnan(v):
        record = {"f": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    else:
        record = {"f": float(v)}
    for frame in reversed(rec.tracked):
        expr = frame.get(float(v))
        if expr is not None:
            record["expr"] = expr
            _items_of(rec, expr, items)
            break
    return record


def _items_of(rec: Recorder, expr: Json, items: list[int]) -> None:
    if isinstance(expr, list):
        if expr and expr[0] == "item":
            items.append(expr[1]["t"])
        elif expr and expr[0] == "setting":
            rec.settings_read[expr[1]] = expr[2]
        else:
            for e in expr[1:]:
                _items_of(rec, e, items)


def encode(rec: Recorder, v: Any, items: list[int]) -> Json:
    """One argument as JSON (Note [Call records]); `items` collects the
    buffers that tracked scalars read."""
    if isinstance(v, torch.Tensor):
        return tensor_ref(rec, v)
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return _float(rec, v, items)
    if isinstance(v, (list, tuple)):
        return [encode(rec, x, items) for x in v]
    if isinstance(v, torch.dtype):
        if v not in C10_DTYPES:
            raise Unsupported(f"dtype {v}")
        return {"dtype": C10_DTYPES[v]}
    if isinstance(v, torch.layout):
        if v not in C10_LAYOUTS:
            raise Unsupported(f"layout {v}")
        return {"layout": C10_LAYOUTS[v]}
    if isinstance(v, torch.memory_format):
        return {"memory_format": C10_MEMORY_FORMATS[v]}
    if isinstance(v, torch.device):
        return {"device": v.type}
    if isinstance(v, str):
        return {"s": v}
    raise Unsupported(f"an argument of type {type(v).__name__}")


def record_call(rec: Recorder, func: Any, args: Sequence[Any], kwargs: dict[str, Any],
                out_tensors: Sequence[torch.Tensor],
                fresh_ids: dict[int, int]) -> tuple[Json, list[int]]:
    """The call record of one op; returns (call, buffers its tracked scalars
    read). `fresh_ids` maps id(tensor) of each new output to its buffer."""
    schema = func._schema
    call: dict[str, Json] = {"op": schema.name, "overload": schema.overload_name}
    items: list[int] = []
    try:
        call["args"] = [encode(rec, a, items) for a in args]
        call["kwargs"] = {k: encode(rec, v, items) for k, v in kwargs.items()}
    except Unsupported as e:
        return {"op": schema.name, "overload": schema.overload_name,
                "unsupported": str(e)}, []
    call["results"] = [fresh_ids.get(id(t)) for t in out_tensors]
    if torch.Tag.nondeterministic_seeded in func.tags:
        call["rng"] = True
    return call, items


def remap(value: Json, new_id: dict[int, int]) -> Json:
    """The call record with the graph's final buffer ids."""
    if isinstance(value, dict):
        out: dict[str, Json] = {}
        for k, v in value.items():
            if k == "t":
                out[k] = new_id[v]
            elif k == "results":
                out[k] = [None if b is None else new_id.get(b) for b in v]
            else:
                out[k] = remap(v, new_id)
        return out
    if isinstance(value, list):
        return [remap(v, new_id) for v in value]
    return value


class TrackedSettings:
    """Note [Tracked settings]: each param group's float lr a TrackedFloat
    for the `with` block (the traced optimizer step), then the group's own
    value again."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.saved: list[Any] = []

    def __enter__(self) -> None:
        for i, group in enumerate(self.optimizer.param_groups):
            lr = group.get("lr")
            self.saved.append(lr)
            if isinstance(lr, (int, float)) and not isinstance(lr, bool):
                group["lr"] = TrackedFloat(float(lr), ["setting", f"group{i}.lr", float(lr)])

    def __exit__(self, *exc: Any) -> None:
        for group, lr in zip(self.optimizer.param_groups, self.saved):
            group["lr"] = lr
