"""Note [Foreach lists] (src/swap/optimizer_impl.cc) against torch itself:
the bytes torch.optim's multi-tensor (foreach) Adam holds beyond its
tensors, measured here on the CPU, are the workspace `memwall trace
--optimizer-impl foreach` gives the group's last step."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from test_estimate import memwall_binary

SCRIPT = """
import torch

def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.GELU(),
                                torch.nn.Linear(96, 40), torch.nn.GELU(),
                                torch.nn.Linear(40, 10))
    batch = (torch.randn(8, 48), torch.randint(0, 10, (8,)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return model, batch, torch.nn.functional.cross_entropy, optimizer
"""


class NewStorages(TorchDispatchMode):
    """The most bytes the storages that ops make hold at once, checked after
    each op: a storage is alive until its last reference goes."""

    def __init__(self) -> None:
        super().__init__()
        self.alive: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        seen = {StorageWeakRef(t.untyped_storage()).cdata
                for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                ref = StorageWeakRef(t.untyped_storage())
                if ref.cdata not in seen and ref.cdata not in self.alive:
                    self.alive[ref.cdata] = (ref, t.untyped_storage().nbytes())
        self.alive = {k: v for k, v in self.alive.items() if not v[0].expired()}
        self.peak = max(self.peak, sum(n for _, n in self.alive.values()))
        return out


def foreach_step_peak() -> tuple[int, int]:
    """(bytes torch's foreach Adam step makes and holds at once, parameter
    count): the script's model after one step, so that no state is new."""
    namespace: dict[str, Any] = {}
    exec(SCRIPT, namespace)
    model, (x, y), loss_fn, _ = namespace["build"]()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    for measured in (False, True):
        optimizer.zero_grad(set_to_none=False)
        loss_fn(model(x), y).backward()
        if not measured:
            optimizer.step()
            continue
        with NewStorages() as mode:
            optimizer.step()
    return mode.peak, sum(p.numel() for p in model.parameters())


@pytest.mark.skipif(memwall_binary() is None, reason="no memwall binary (MEMWALL_BINARY)")
def test_the_foreach_list_is_what_torch_holds(tmp_path: Path) -> None:
    measured, params = foreach_step_peak()
    # torch/optim/adam.py, _multi_tensor_adam: one fp32 list the size of
    # every exp_avg_sq (sqrt, then div_ and add_ in place), 4 bytes a
    # parameter.
    assert measured == 4 * params
    script = tmp_path / "mlp.py"
    script.write_text(textwrap.dedent(SCRIPT))
    graph_path = tmp_path / "graph.json"
    subprocess.run([str(memwall_binary()), "trace", "--script", f"{script}:build",
                    "--optimizer-impl", "foreach", "--out", str(graph_path),
                    "--python", sys.executable], check=True, capture_output=True)
    graph = json.loads(graph_path.read_text())
    steps = [op for op in graph["ops"] if op["phase"] == "optimizer"]
    assert len(steps) == 6  # one fused step per parameter
    assert [op.get("workspace", 0) for op in steps][-1] == measured
    # The other steps hold only their own temporaries: the for-loop's sqrt
    # and its quotient, two of the parameter's size at once.
    weight = 96 * 48 * 4
    assert steps[0].get("workspace", 0) == 2 * weight
