"""The optimizers of memwall's model sources, by name."""
from __future__ import annotations

from typing import Iterable

import torch

from memwall.errors import fail

def make_optimizer(name: str, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """torch's optimizer `name` (sgd, momentum, adam, adamw) over `params`.

    foreach=False: the per-parameter loop, whose ops the graph lists one
    parameter at a time, as the zoo's graphs do (torch 2.x defaults to the
    foreach kernels, which batch all parameters into one op per step)."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, foreach=False)
    if name == "momentum":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=False)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, foreach=False)
    fail(f"unknown optimizer '{name}' (known: sgd, momentum, adam, adamw)")
