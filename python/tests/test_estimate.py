"""memwall.estimate (memwall/estimates.py): a model's step traced on the
meta device in this process and inspected by the C++ side (memwall_core),
the same figures as ``memwall trace`` then ``memwall inspect``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import memwall
from memwall.errors import Error

WHY_NO_CORE = ""
try:
    from memwall.native import core
    core()
except Error as e:
    WHY_NO_CORE = str(e)

pytestmark = pytest.mark.skipif(bool(WHY_NO_CORE), reason=WHY_NO_CORE)


def mlp() -> tuple[torch.nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    return model, (torch.randn(8, 32), torch.randint(0, 10, (8,)))


def test_the_breakdown_of_a_small_mlp() -> None:
    model, batch = mlp()
    e = memwall.estimate(model, batch, loss_fn=torch.nn.functional.cross_entropy,
                         optimizer="adamw", gpu="a100-80g")
    # Linear(32, 64) and Linear(64, 10): 32*64 + 64 + 64*10 + 10 parameters.
    assert e.param_count == e.trainable_param_count == 2762
    assert e.bytes_by_kind["param"] == e.bytes_by_kind["grad"] == 2762 * 4
    # AdamW's state per parameter tensor (torch.optim.AdamW): exp_avg and
    # exp_avg_sq of its size, and a one-element fp32 step.
    assert e.bytes_by_kind["optim_state"] == 2 * 2762 * 4 + 4 * 4
    assert e.gpu == "a100-80g" and e.fits and e.shortfall_bytes == 0
    assert e.eager_peak_bytes is not None and e.peak_bytes <= e.eager_peak_bytes
    assert str(e).startswith("Sequential on a100-80g")
    assert [p.device.type for p in model.parameters()] == ["cpu"] * 4  # the model is untouched


def memwall_binary() -> Path | None:
    given = os.environ.get("MEMWALL_BINARY")
    path = Path(given) if given else Path(__file__).resolve().parents[2] / "build" / "memwall"
    return path if path.exists() else None


@pytest.mark.skipif(memwall_binary() is None, reason="no memwall binary (MEMWALL_BINARY)")
def test_in_process_agrees_with_trace_then_inspect(tmp_path: Path) -> None:
    script = tmp_path / "mlp.py"
    script.write_text(textwrap.dedent("""
        import torch

        def build():
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 10))
            batch = (torch.randn(8, 32), torch.randint(0, 10, (8,)))
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
            return model, batch, torch.nn.functional.cross_entropy, optimizer
    """))
    binary = str(memwall_binary())
    graph = tmp_path / "graph.json"
    subprocess.run([binary, "trace", "--script", f"{script}:build", "--out", str(graph),
                    "--python", sys.executable], check=True, capture_output=True)
    cli = json.loads(subprocess.run([binary, "inspect", "--graph", str(graph), "--gpu", "l4",
                                     "--json"], check=True, capture_output=True,
                                    text=True).stdout)
    model, batch = mlp()
    e = memwall.estimate(model, batch, loss_fn=torch.nn.functional.cross_entropy, gpu="l4")
    for key in ("param_count", "ops", "buffers", "peak_bytes", "eager_peak_bytes",
                "activation_bytes", "optim_state_bytes", "temp_bytes", "iteration_time_s"):
        assert e.json[key] == cli[key], key


def test_bad_input_is_one_line() -> None:
    model, batch = mlp()
    with pytest.raises(memwall.BadInput, match="^unknown GPU 'nope' "):
        memwall.estimate(model, batch, loss_fn=torch.nn.functional.cross_entropy, gpu="nope")
    with pytest.raises(memwall.BadInput, match="pair"):
        memwall.estimate(model, batch[0], gpu="l4")
    with pytest.raises(memwall.BadInput, match="no .loss"):
        memwall.estimate(model, batch, gpu="l4")
    with pytest.raises(memwall.BadInput, match="unknown optimizer"):
        memwall.estimate(model, batch, loss_fn=torch.nn.functional.cross_entropy,
                         optimizer="lion", gpu="l4")


def test_mixed_precision_keeps_fp32_masters() -> None:
    model, batch = mlp()
    e = memwall.estimate(model, batch, loss_fn=torch.nn.functional.cross_entropy,
                         optimizer="adamw", gpu="a100-80g", dtype="bf16")
    # Mixed precision (Micikevicius et al. 2018, as ZeRO counts it): 16-bit
    # parameters and gradients, and per parameter tensor an fp32 master,
    # AdamW's two fp32 moments and its one-element fp32 step.
    assert e.bytes_by_kind["param"] == e.bytes_by_kind["grad"] == 2762 * 2
    assert e.bytes_by_kind["optim_state"] == 3 * 2762 * 4 + 4 * 4
    assert [p.dtype for p in model.parameters()] == [torch.float32] * 4  # the model is untouched
    with pytest.raises(memwall.BadInput, match="unknown dtype 'int8'"):
        memwall.estimate(model, batch, loss_fn=torch.nn.functional.cross_entropy, dtype="int8")


def test_frozen_parameters_get_no_optimizer_state() -> None:
    model, batch = mlp()
    for p in model[0].parameters():
        p.requires_grad_(False)
    e = memwall.estimate(model, batch, loss_fn=torch.nn.functional.cross_entropy, gpu="l4")
    trainable = 64 * 10 + 10  # the second Linear's weight and bias
    assert e.param_count == 2762 and e.trainable_param_count == trainable
    assert e.bytes_by_kind["optim_state"] == 2 * trainable * 4 + 2 * 4
