"""memwall.plan (memwall/plans.py): a plan made in-process by the C++
planner, saved as ``memwall plan --out`` writes one, simulated again, and
judged the same by the memwall command."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

import memwall
from test_estimate import WHY_NO_CORE, memwall_binary

pytestmark = pytest.mark.skipif(bool(WHY_NO_CORE), reason=WHY_NO_CORE)


def mlp() -> tuple[torch.nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(6):
        layers += [torch.nn.Linear(512, 512), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))
    return model, (torch.randn(256, 512), torch.randint(0, 10, (256,)))


def test_a_plan_within_most_of_the_keep_all_peak(tmp_path: Path) -> None:
    model, batch = mlp()
    loss = torch.nn.functional.cross_entropy
    plan = memwall.plan(model, batch, loss_fn=loss, gpu="l4", budget="80%peak", time_limit=10)
    assert plan.peak_bytes <= plan.budget_bytes
    assert str(plan).startswith("Sequential on l4: auto")
    assert plan.json["layout"] is not None  # laid out in its budget
    # Note [Budget shares]: N%peak is N% of the keep-all plan's simulated peak.
    keep_all = memwall.plan(model, batch, loss_fn=loss, gpu="l4", strategy="auto",
                            time_limit=2).json
    assert keep_all["budget"] > plan.budget_bytes
    path = str(tmp_path / "mlp.json")
    plan.save(path)
    loaded = memwall.load_plan(path)
    again = plan.simulate()
    assert again.valid and loaded.json == again.json
    assert again.peak_bytes["device"] == plan.peak_bytes
    binary = memwall_binary()
    if binary is not None:
        cli = subprocess.run([str(binary), "simulate", "--graph", str(tmp_path / "mlp.graph.json"),
                              "--plan", path, "--json"], check=True, capture_output=True,
                             text=True)
        judged = json.loads(cli.stdout)
        for key in ("valid", "iteration_time_s", "peak_bytes", "bytes_moved", "budget"):
            assert judged[key] == again.json[key], key


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    model, batch = mlp()
    loss = torch.nn.functional.cross_entropy
    with pytest.raises(memwall.BadInput, match=r"^--budget 50% is ambiguous: write 50%gpu"):
        memwall.plan(model, batch, loss_fn=loss, gpu="l4", budget="50%")
    with pytest.raises(memwall.BadInput, match="nope"):
        memwall.plan(model, batch, loss_fn=loss, gpu="l4", strategy="remat:nope")
    with pytest.raises(memwall.BadInput):
        memwall.plan(model, batch, loss_fn=loss, gpu="l4", budget="4KiB", time_limit=1)
    with pytest.raises(memwall.BadInput, match="cannot read it"):
        memwall.load_plan(str(tmp_path / "none.json"))


def test_a_rematerialization_planner_alone() -> None:
    """remat:NAME as ``memwall plan --strategy remat:NAME --out`` plans it:
    every model state on the device, one planner's recomputation."""
    model, _ = mlp()
    batch = (torch.randn(4096, 512), torch.randint(0, 10, (4096,)))  # activations dominate
    loss = torch.nn.functional.cross_entropy
    keep_all = memwall.plan(model, batch, loss_fn=loss, gpu="l4", strategy="remat:keep-all")
    assert str(keep_all).startswith("Sequential on l4: remat:keep-all")
    assert keep_all.json["recomputed_ops"] == 0
    assert keep_all.peak_bytes == keep_all.json["keep_all_peak_bytes"]
    remat = memwall.plan(model, batch, loss_fn=loss, gpu="l4", strategy="remat:memwall",
                         budget="90%peak", time_limit=5)
    assert remat.peak_bytes <= remat.budget_bytes < keep_all.peak_bytes
    assert remat.json["recomputed_ops"] > 0
    assert remat.simulate().valid
