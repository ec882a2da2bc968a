"""Where a traced model comes from. Every source is a function taking no
arguments that returns a Built (or any 4-tuple in its order): torchvision's
classifiers (vision.py), a user's script (script.py), Hugging Face
configurations (hf.py, hf_configs.py) and memwall's built-in models
(builtin.py); optimizers.py makes the optimizers they train with."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from memwall.errors import fail


class Built(NamedTuple):
    """What a model source builds: the model, an example batch (a pair
    (inputs, target); target may be None), the loss function and the
    optimizer over the model's parameters."""
    model: torch.nn.Module
    batch: Any
    loss_fn: Callable[..., torch.Tensor]
    optimizer: torch.optim.Optimizer


# A model source: builds a fresh model, batch, loss and optimizer per call.
Build = Callable[[], Any]


def check_built(built: Any) -> Built:
    """`built` as a Built, after checking the model and the optimizer."""
    model, batch, loss_fn, optimizer = built
    if not isinstance(model, torch.nn.Module):
        fail("the model must be a torch.nn.Module")
    if not isinstance(optimizer, torch.optim.Optimizer):
        fail("the optimizer must be a torch.optim.Optimizer")
    return Built(model, batch, loss_fn, optimizer)
