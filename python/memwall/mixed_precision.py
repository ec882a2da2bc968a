"""memwall.MixedPrecision: mixed-precision training as DeepSpeed's bf16 and
fp16 optimizers run it, in eager PyTorch and under memwall.Trainer alike.

    model = model.to(torch.bfloat16)                     # 16-bit parameters and activations
    optimizer = memwall.MixedPrecision(model.parameters(), "adamw", lr=1e-3, weight_decay=0.1)

Note [Mixed-precision steps]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The model's parameters, activations and gradients are 16-bit; the optimizer
keeps an fp32 master copy of each 16-bit parameter (its state "master",
made from the parameter at its first step) and fp32 moments, as ZeRO's
mixed-precision training does (Rajbhandari et al., "ZeRO", SC'20, section
3: "fp16 parameters and gradients ... fp32 copy of the parameters, momentum
and variance"). Per parameter, in order: the gradient is upcast to fp32,
torch's own single-tensor Adam, AdamW or SGD updates the master
(torch.optim.adam.adam, torch.optim.sgd.sgd with foreach=False: the same
kernels as torch's optimizer), and the master is copied back into the
16-bit parameter (a round to nearest). One parameter's ops are
consecutive, read one gradient and update that parameter and its states:
memwall's planner recognises the run as the parameter's step (Note [Traced
optimizer steps] in src/swap/optimizer_steps.cc) and can move it to the
host. A parameter the model keeps in fp32 is its own master. No loss
scaling: bf16 has fp32's exponent range; fp16 training that needs a loss
scale is not covered.
"""
from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Iterable

import torch

KINDS = ("sgd", "adam", "adamw")


class MixedPrecision(torch.optim.Optimizer):
    """`kind` "adam", "adamw" (lr, betas, eps, weight_decay as torch's) or
    "sgd" (lr, momentum, dampening, weight_decay, nesterov); per-group
    settings as any torch optimizer takes them (Note [Mixed-precision
    steps])."""

    def __init__(self, params: Iterable[Any], kind: str = "adamw", lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float | None = None, momentum: float = 0.0,
                 dampening: float = 0.0, nesterov: bool = False) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown optimizer '{kind}' (known: {', '.join(KINDS)})")
        if weight_decay is None:
            weight_decay = 1e-2 if kind == "adamw" else 0.0  # torch's defaults
        defaults = dict(kind=kind, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum=momentum, dampening=dampening, nesterov=nesterov)
        super().__init__(params, defaults)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's, but the fp32 masters and moments stay fp32 (torch casts a
        floating state to its parameter's dtype)."""
        super().load_state_dict(state_dict)
        saved = chain.from_iterable(g["params"] for g in state_dict["param_groups"])
        mine = chain.from_iterable(g["params"] for g in self.param_groups)
        for saved_id, p in zip(saved, mine):
            for key, value in state_dict["state"].get(saved_id, {}).items():
                if isinstance(value, torch.Tensor) and key != "step":
                    self.state[p][key] = value.to(device=p.device)

    def _state(self, p: torch.Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state[p]
        if not state:
            if p.dtype != torch.float32:
                state["master"] = p.detach().clone(memory_format=torch.preserve_format).float()
            if group["kind"] in ("adam", "adamw"):
                # torch.optim.Adam's: a 0-d fp32 step counter and two moments.
                master = state.get("master", p)
                state["step"] = torch.zeros((), dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(master, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(master,
                                                       memory_format=torch.preserve_format)
        return state

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> None:  # type: ignore[override]
        from torch.optim.adam import adam
        from torch.optim.sgd import sgd
        for group in self.param_groups:
            kind = group["kind"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._state(p, group)
                master = state.get("master", p)
                grad = p.grad.float()  # the gradient itself when it is fp32
                if kind in ("adam", "adamw"):
                    beta1, beta2 = group["betas"]
                    adam([master], [grad], [state["exp_avg"]], [state["exp_avg_sq"]], [],
                         [state["step"]], foreach=False, capturable=False,
                         differentiable=False, fused=None, grad_scale=None, found_inf=None,
                         has_complex=False, decoupled_weight_decay=kind == "adamw",
                         amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
                         weight_decay=group["weight_decay"], eps=group["eps"], maximize=False)
                else:
                    buffers = [state.get("momentum_buffer")]
                    sgd([master], [grad], buffers, foreach=False, fused=None,
                        weight_decay=group["weight_decay"], momentum=group["momentum"],
                        lr=group["lr"], dampening=group["dampening"],
                        nesterov=group["nesterov"], maximize=False)
                    if group["momentum"]:
                        state["momentum_buffer"] = buffers[0]
                del grad
                if master is not p:
                    p.copy_(master)
