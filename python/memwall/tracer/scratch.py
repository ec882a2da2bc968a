"""Kernel scratch: memory an aten kernel allocates for itself while it runs
and frees before it returns (reorders into blocked layouts, reduction
buffers). memwall's graph carries it as an op's `workspace`: bytes live
only while the op runs, on top of its inputs and outputs. The rules are
per device, because the kernels are; docs/cost-model.md ("Kernel scratch")
gives each rule with its source and the measurements that confirmed it.

This module holds what every device's rules share (the Scratch record, the
replay of a kernel's allocations and their packing), the rules of ATen's
device-independent code and cuBLAS's workspace; cpu_scratch.py holds the
CPU kernels' rules.

Shapes only: every rule reads tensor sizes and scalar arguments, so it
applies to meta tensors (the trace) and real ones alike. This module needs
no torch.
"""
from __future__ import annotations

import collections
import os
import re
from typing import Any, Mapping, NamedTuple, Sequence, Union

# Note [Workspace span] (graph/types.h): `workspace` is what the scratch adds
# to the live total, counted against the op's outputs as if they existed
# from the op's start; `span` is the scratch's own highest total, the one
# range a layout must give it when the outputs have addresses of their own.
#
# `first` (Note [Scratch before its output] in src/exec/executor_compute.cc):
# per output, in the order the kernel makes them, (bytes, how many
# allocations of its size the kernel makes before it). An arena gives an
# output's offset to the first allocation of its size, and oneDNN's
# convolutions make their blocked copies of that size first.
#
# `at` (Note [Scratch offsets] in src/exec/device_memory.cc): per scratch
# allocation, in the order the kernel makes them, (bytes, offset in the
# op's workspace), a packing of their lifetimes in the span. The executor
# places each there: first fit in the order they come fragments a
# workspace of exactly the span (ResNet-18's layer3.0.downsample backward:
# a blocked output gradient and weight, then the blocked input gradient
# above them, then a strided copy of its size that found two free ranges
# too short for it).


class Scratch(NamedTuple):
    """An op's scratch (see above): `workspace` and `span` in bytes; `first`,
    per output, (bytes, allocations of that size before it); `at`, per
    scratch allocation, (bytes, offset in the workspace)."""
    workspace: int
    span: int
    first: tuple[tuple[int, int], ...] = ()
    at: tuple[tuple[int, int], ...] = ()


# A kernel's allocation event (replay()): ("+", key, bytes), ("-", key) or
# ("out", bytes).
Event = tuple

# What a rule returns: bytes, or a Scratch where the span differs.
Rule = Union[int, Scratch]


def tensor_bytes(t: Any) -> int:
    """Bytes of a tensor's elements (its view, not its storage)."""
    return t.numel() * t.element_size()


def as_scratch(value: Rule) -> Scratch:
    """A rule's result (bytes, or a Scratch) as a Scratch."""
    if isinstance(value, Scratch):
        return value
    return Scratch(int(value), int(value))


def scratch_first(scratch: Scratch, out_bytes: Sequence[int]) -> list[int] | None:
    """Per output of an op (their bytes, in the op's order): how many
    allocations of its size its kernel makes before it, from the rule's
    events; None when there are none to say."""
    pending = list(scratch.first)
    counts: list[int] = []
    for nbytes in out_bytes:
        match = next((i for i, (b, _) in enumerate(pending) if b == nbytes), None)
        counts.append(0 if match is None else pending.pop(match)[1])
    return counts if any(counts) else None


def replay(events: Sequence[Event]) -> Scratch:
    """A kernel's allocations in the order it makes them, as the rules below
    model them: ("+", key, bytes) scratch, ("out", bytes) an output (kept),
    ("-", key) a free. Returns Scratch(workspace, span): the highest
    scratch + outputs so far, less all the outputs; and the highest scratch."""
    outputs = sum(e[1] for e in events if e[0] == "out")
    live: dict[str, int] = {}
    scratch = made = workspace = span = 0
    sizes: collections.Counter[int] = collections.Counter()  # allocations so far, by bytes
    first: list[tuple[int, int]] = []
    for e in events:
        if e[0] == "+":
            live[e[1]] = e[2]
            scratch += e[2]
            if e[2] > 0:
                sizes[e[2]] += 1
        elif e[0] == "-":
            scratch -= live.pop(e[1])
        else:
            made += e[1]
            first.append((e[1], sizes[e[1]]))
            sizes[e[1]] += 1
        span = max(span, scratch)
        workspace = max(workspace, scratch + made - outputs)
    at, height = pack(events, span)
    return Scratch(max(workspace, 0), max(span, height), tuple(first), at)


def _pack_lifetimes(lives: Sequence[Sequence[int]], align: int) -> tuple[list[int], int]:
    """First fit, longest lifetime first: (offsets in the order given, the
    height they reach). `lives` are (bytes, first event, last event)."""
    order = sorted(range(len(lives)), key=lambda i: (lives[i][1] - lives[i][2], lives[i][1],
                                                     -lives[i][0]))
    placed: list[tuple[int, int, int, int]] = []  # (offset, bytes, first, last)
    offsets = [0] * len(lives)
    for i in order:
        nbytes, lo, hi = lives[i]
        clash = sorted((o, o + b) for o, b, a, z in placed if a <= hi and lo <= z)
        offset = 0
        for start, end in clash:
            if offset + nbytes <= start:
                break
            offset = max(offset, -(-end // align) * align)
        offsets[i] = offset
        placed.append((offset, nbytes, lo, hi))
    return offsets, max((o + b for o, b, _, _ in placed), default=0)


def pack(events: Sequence[Event], span: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """Offsets in the workspace for a rule's scratch allocations (`at` of
    Scratch) and the height they reach: 64-byte aligned as PyTorch's CPU
    allocator aligns when that fits the span, else packed to the byte."""
    lives: list[list[int]] = []
    open_at: dict[str, int] = {}
    for k, e in enumerate(events):
        if e[0] == "+" and e[2] > 0:
            open_at[e[1]] = len(lives)
            lives.append([e[2], k, len(events)])
        elif e[0] == "-" and e[1] in open_at:
            lives[open_at.pop(e[1])][2] = k - 1
    if not lives:
        return (), 0
    offsets, height = _pack_lifetimes(lives, 64)
    if height > span:
        tight, tight_height = _pack_lifetimes(lives, 1)
        if tight_height < height:
            offsets, height = tight, tight_height
    return tuple((b, o) for (b, _, _), o in zip(lives, offsets)), height


# Rules of ATen's device-independent code, for every device.
ANY_DEVICE_RULES: set[str] = {"mse_loss"}


def any_device_workspace(name: str, args: Sequence[Any]) -> Rule:
    """mse_loss with a reduction (Loss.cpp) computes the unreduced
    elementwise loss into a temporary the size of the input, then reduces
    it (apply_loss_reduction)."""
    if name == "mse_loss" and args and (len(args) < 3 or int(args[2]) != 0):
        return tensor_bytes(args[0])
    return 0


# cuBLAS ---------------------------------------------------------------------

# PyTorch's cuBLAS workspace (aten/src/ATen/cuda/CublasHandlePool.cpp,
# parseChosenWorkspaceSize): CUBLAS_WORKSPACE_CONFIG ":SIZE_KiB:COUNT[...]"
# when set, else ":4096:2:16:8" = 8,519,680 bytes (32 MiB on Hopper and
# Blackwell, compute capability 9.x/10.x/12.x). One per (handle, stream);
# handles are per thread, and autograd runs backward on its own thread per
# device, so a training step holds two.
CUBLAS_DEFAULT_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8
CUBLAS_OPS: set[str] = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot",
                        "_scaled_mm"}


def cublas_workspace_bytes(environ: Mapping[str, str] | None = None) -> int:
    """Bytes of one cuBLAS workspace: CUBLAS_WORKSPACE_CONFIG's sum of
    SIZE_KiB * COUNT pairs in `environ` (os.environ by default), else
    PyTorch's default."""
    config = (environ if environ is not None else os.environ).get("CUBLAS_WORKSPACE_CONFIG")
    if config:
        pairs = re.findall(r":([0-9]+):([0-9]+)", config)
        if pairs:
            return sum(int(size) * 1024 * int(count) for size, count in pairs)
    return CUBLAS_DEFAULT_WORKSPACE
