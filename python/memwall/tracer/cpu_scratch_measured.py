"""16-bit CPU kernels' scratch, measured by running the kernel once.

Note [Measured 16-bit scratch]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
In bf16 and fp16 the CPU's GEMMs (mm, addmm, bmm, baddbmm), its flash
attention (forward and backward) and oneDNN's convolutions go to oneDNN's
brgemm kernels, whose scratchpad (packed blocks of B, fp32 accumulators per
thread) comes from PyTorch's CPU allocator: 34,432 B beside a [32, 256]
bf16 output on an AVX512-BF16 CPU with 2 threads, for example. Its size
follows oneDNN's blocking heuristics, which depend on the ISA, the thread
count and every dimension, so unlike the fp32 rules of cpu_scratch.py it is
not written down as a formula: a trace for the CPU's kernels runs each such
op once, on zeros of the same shapes, strides and dtypes, at the trace's
thread count (the executor's, in the same process), and records the
allocations it makes as the rules' events (scratch.replay): an allocation
still live at the end is an output. The kernel's allocations are read
from torch.profiler's allocation events (profile_memory). Measured once per
op and shapes; torch's generator is put back after. A trace taken while
another profiler runs measures nothing (0, as before this note).

Note [Measured fp32 scratch]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The fp32 rules of cpu_scratch.py (oneDNN's convolutions, batch norm,
layer norm) were read off AVX-512 CPUs. On an AVX2-only CPU (an AMD EPYC
seen here) oneDNN picks other kernels: convolution_backward allocates a
scratchpad the rules do not know (53,272 B beside a [4, 128, 16, 16]
gradient in ResNet-18) and makes the bias gradient between its reorders,
so laid-out plans met an op that had no room in its arena. A trace for the
CPU's kernels therefore measures every op with a rule the same way, in any
dtype, and falls back to the rule only while another profiler runs. Their
scratch is one allocation per call, not per thread, so the other threads'
share (with_other_threads) is added to the 16-bit kernels' alone.
MEMWALL_SCRATCH_RULES=1 in the environment traces with the fp32 rules
instead (their tests, tests/importers/fidelity_test.cc, and a trace made
as before this note).
"""
from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from memwall.errors import quiet_native_stderr
from memwall.tracer.cpu_scratch import CPU_RULES
from memwall.tracer.scratch import Rule, replay

# Overload packets whose 16-bit kernels take scratch from the allocator.
MEASURED = {"mm", "addmm", "bmm", "baddbmm", "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_flash_attention_for_cpu_backward", "convolution",
            "convolution_backward", "native_layer_norm_backward"}
HALF = (torch.float16, torch.bfloat16)

_measured: dict[Any, Rule] = {}


def applies(name: str, args: tuple, kwargs: dict[str, Any]) -> bool:
    """Whether the op's scratch is measured: one of MEASURED with a 16-bit
    floating tensor argument, or any op with an fp32 rule (Note [Measured
    fp32 scratch])."""
    if name in CPU_RULES and os.environ.get("MEMWALL_SCRATCH_RULES") != "1":
        return True
    return _half_kernel(name, args, kwargs)


def _half_kernel(name: str, args: tuple, kwargs: dict[str, Any]) -> bool:
    if name not in MEASURED:
        return False
    return any(isinstance(t, torch.Tensor) and t.dtype in HALF
               for t in tree_flatten((args, kwargs))[0])


def _key(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return ("t", tuple(v.shape), tuple(v.stride()), v.storage_offset(), v.dtype,
                v.untyped_storage().nbytes())
    return repr(v)


def _zeros_like(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor of t's view (shape, strides, offset) over zeros of its
    storage's size."""
    elements = max(1, t.untyped_storage().nbytes() // t.element_size())
    return torch.zeros(elements, dtype=t.dtype).as_strided(t.shape, t.stride(),
                                                           t.storage_offset())


def measured(func: Any, args: tuple, kwargs: dict[str, Any]) -> Rule | None:
    """The op's scratch as the rules give it (scratch.Scratch), measured
    (Note [Measured 16-bit scratch]); None while another profiler runs (an
    op with an fp32 rule then takes the rule)."""
    key = (str(func), torch.get_num_threads(), tuple(_key(a) for a in tree_flatten(args)[0]),
           tuple(sorted((k, _key(v)) for k, v in kwargs.items())))
    if key not in _measured:
        if torch._C._autograd._profiler_enabled():  # a profile running now: no nesting
            return 0 if _half_kernel(func.overloadpacket.__name__, args, kwargs) else None
        _measured[key] = _measure(func, args, kwargs)
    return _measured[key]


def _measure(func: Any, args: tuple, kwargs: dict[str, Any]) -> Rule:
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    real = tree_map(lambda v: _zeros_like(v) if isinstance(v, torch.Tensor) else v,
                    (args, kwargs))
    rng = torch.get_rng_state()
    try:
        with quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU],
                                            profile_memory=True) as prof:
            out = func(*real[0], **real[1])
        # The outputs stay live through the profile (that is how they are
        # told from scratch); they go while a profiler watches too, or
        # PyTorch's CPU memory reporter would count them allocated for the
        # rest of the process, in a later profile's "Total Allocated" (a
        # step `memwall bench fidelity` measures in the same process).
        with quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU],
                                            profile_memory=True):
            del out
    finally:
        torch.set_rng_state(rng)
    allocations: list[tuple[int, int, int]] = []  # (time, bytes (< 0: a free), address)

    def walk(nodes: Any) -> None:
        for n in nodes:
            if n.tag == _EventType.Allocation:
                allocations.append((n.start_time_ns, int(n.extra_fields.alloc_size),
                                    int(n.extra_fields.ptr)))
            walk(n.children)

    walk(prof.profiler.kineto_results.experimental_event_tree())
    allocations.sort()
    # Which allocations the kernel frees again (scratch); the rest are outputs.
    freed_by: dict[int, int] = {}  # a free's index -> its allocation's
    open_at: dict[int, int] = {}  # address -> allocation index
    for i, (_, nbytes, address) in enumerate(allocations):
        if nbytes > 0:
            open_at[address] = i
        elif address in open_at:
            freed_by[i] = open_at.pop(address)
    scratch = set(freed_by.values())
    events: list[tuple[Any, ...]] = []
    for i, (_, nbytes, _) in enumerate(allocations):
        if nbytes > 0:
            events.append(("+", f"a{i}", nbytes) if i in scratch else ("out", nbytes))
        elif i in freed_by:
            events.append(("-", f"a{freed_by[i]}"))
    if not events:
        return 0
    if _half_kernel(func.overloadpacket.__name__, args, kwargs):
        events = with_other_threads(events, torch.get_num_threads())
    return replay(events)._replace(first=skips_before_outputs(events))


def skips_before_outputs(events: list[tuple[Any, ...]]) -> tuple[tuple[int, int], ...]:
    """Per output, (bytes, scratch allocations of its size since the last
    output of that size): the executor's arena gives each allocation of an
    output's size to the first output of that size not yet placed, after
    letting that many go by (Note [Scratch before its output] in
    src/exec/executor_compute.cc). replay() counts the earlier outputs too,
    which for a kernel with several outputs of one size (flash attention's
    gradients of q, k and v) would send the later ones elsewhere."""
    since: dict[int, int] = {}
    first = []
    for e in events:
        if e[0] == "+":
            since[e[2]] = since.get(e[2], 0) + 1
        elif e[0] == "out":
            first.append((e[1], since.pop(e[1], 0)))
    return tuple(first)


def with_other_threads(events: list[tuple[Any, ...]], threads: int) -> list[tuple[Any, ...]]:
    """Note [Measured 16-bit scratch]: scratch a kernel allocates per
    iteration of its parallel loop (sizes allocated and freed again several
    times in one call: the CPU flash attention backward's per-block
    buffers) is live in every thread at once when the threads' iterations
    overlap, which the measured order shows only some of the time; the
    events get (threads - 1) more of the most such scratch live at once,
    from the first of it to its last free: the worst case, which a budget
    must hold."""
    sizes: dict[int, int] = {}
    for e in events:
        if e[0] == "+":
            sizes[e[2]] = sizes.get(e[2], 0) + 1
    recurring = {b for b, n in sizes.items() if n >= 2}
    if threads <= 1 or not recurring:
        return events
    keys = {e[1] for e in events if e[0] == "+" and e[2] in recurring}
    live = most = 0
    first = last = -1
    size_of: dict[str, int] = {}
    for i, e in enumerate(events):
        if e[0] == "+" and e[1] in keys:
            size_of[e[1]] = e[2]
            live += e[2]
            most = max(most, live)
            first = i if first < 0 else first
        elif e[0] == "-" and e[1] in keys:
            live -= size_of[e[1]]
            last = i
    extra = (threads - 1) * most
    return (events[:first] + [("+", "other threads", extra)] + events[first:last + 1]
            + [("-", "other threads")] + events[last + 1:])
