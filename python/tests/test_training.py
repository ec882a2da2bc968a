"""memwall.Trainer (memwall/training.py): a model trained under a plan in
the user's own loop, a new batch each step, equal bit for bit to the same
loop in plain eager PyTorch (the reference: torch's own optimizer on the
same model, seed and batches), with the model's tensors usable between
steps and one clear exception for each kind of bad input or failure."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import memwall
from test_estimate import WHY_NO_CORE

WHY_NOT = WHY_NO_CORE
if not WHY_NOT and not os.path.exists(os.environ.get("MEMWALL_EXEC_LIBRARY", "")):
    WHY_NOT = ("no executor library (libmemwall_exec.so) beside memwall_core: memwall was built "
               "without libtorch")
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)

ROOT = Path(__file__).resolve().parents[2]


def model_and_optimizer(kind: str = "adamw") -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(256, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 10))
    if kind == "momentum":
        return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)


def batches(n: int, size: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(size, 64, generator=g), torch.randint(0, 10, (size,), generator=g))
            for _ in range(n)]


def eager_losses(model: torch.nn.Module, optimizer: Any, data: list[Any],
                 scheduler: Any = None) -> list[float]:
    """The reference: the same loop in plain eager PyTorch."""
    torch.manual_seed(5)
    losses = []
    for x, y in data:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses


def eager(kind: str, data: list[Any]) -> tuple[list[float], torch.nn.Module, Any]:
    model, optimizer = model_and_optimizer(kind)
    return eager_losses(model, optimizer, data), model, optimizer


def assert_same_states(model: torch.nn.Module, optimizer: Any, model2: torch.nn.Module,
                       optimizer2: Any) -> None:
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        assert torch.equal(a, b), name
    s1, s2 = optimizer.state_dict()["state"], optimizer2.state_dict()["state"]
    assert s1.keys() == s2.keys()
    for k in s1:
        for key in s1[k]:
            assert torch.equal(s1[k][key], s2[k][key]), (k, key)


@pytest.mark.parametrize("kind,budget,strategy,nvme", [
    ("adamw", None, "auto", False),          # the device's memory: auto offloads for speed
    ("adamw", "50%peak", "auto", False),     # recomputation within half the keep-all peak
    ("momentum", "60%peak", "auto", False),
    ("adamw", None, "zero-infinity", True),  # states on NVMe, read back after each step
])
def test_bitwise_equal_to_eager(kind: str, budget: str | None, strategy: str, nvme: bool,
                                tmp_path: Path) -> None:
    data = batches(5)
    reference, model_e, optimizer_e = eager(kind, data)
    model, optimizer = model_and_optimizer(kind)
    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget=budget,
                              strategy=strategy, nvme=str(tmp_path) if nvme else None)
    torch.manual_seed(5)
    losses, peaks = [], []
    for x, y in data:
        losses.append(trainer.step((x, y)).item())
        peaks.append(trainer.last_step["device_peak_bytes"])
    assert losses == reference
    assert_same_states(model_e, optimizer_e, model, optimizer)
    # True: within the budget on every step, the same on every step, and
    # within 1% of the plan's simulated peak (Note [Emulated device]).
    assert max(peaks) <= trainer.plan.budget_bytes
    assert len(set(peaks)) == 1
    assert abs(peaks[0] - trainer.plan.peak_bytes) <= trainer.plan.peak_bytes // 100
    if nvme:
        assert trainer.nvme_reserved_bytes > 0
    trainer.close()
    assert_same_states(model_e, optimizer_e, model, optimizer)  # copies now, the same
    assert not list(tmp_path.iterdir())  # no swap file left


def test_the_model_between_steps_and_save_resume() -> None:
    data = batches(6)
    reference, model_e, optimizer_e = eager("adamw", data)
    model, optimizer = model_and_optimizer("adamw")
    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget="50%peak")
    torch.manual_seed(5)
    losses = [trainer.step(b).item() for b in data[:3]]
    # A validation pass between steps, and the usual ways to save.
    model.eval()
    with torch.no_grad():
        validation = model(data[0][0])
    model.train()
    assert validation.shape == (32, 10)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    checkpoint = trainer.state_dict()
    losses += [trainer.step(b).item() for b in data[3:]]
    assert losses == reference
    trainer.close()
    # Resuming in another trainer from step 3 lands on the same bits.
    model2, optimizer2 = model_and_optimizer("adamw")
    resumed = memwall.Trainer(model2, optimizer2, loss_fn=F.cross_entropy, budget="50%peak")
    resumed.load_state_dict(checkpoint)
    assert resumed.steps == 3
    assert [resumed.step(b).item() for b in data[3:]] == reference[3:]
    assert_same_states(model_e, optimizer_e, model2, optimizer2)
    # Loading into an open session writes every copy it holds.
    resumed.load_state_dict(checkpoint)
    assert [resumed.step(b).item() for b in data[3:]] == reference[3:]
    resumed.close()
    buffer.seek(0)
    assert torch.load(buffer).keys() == model.state_dict().keys()


def bf16_model_and_optimizer(kind: str) -> tuple[torch.nn.Module, Any]:
    """The model in bf16 with memwall.MixedPrecision (fp32 masters and
    moments, Note [Mixed-precision steps] in memwall/mixed_precision.py)."""
    model, _ = model_and_optimizer()
    model.to(torch.bfloat16)
    settings: dict[str, Any] = (dict(lr=0.05, momentum=0.9) if kind == "sgd"
                                else dict(lr=1e-3, weight_decay=0.01))
    return model, memwall.MixedPrecision(model.parameters(), kind, **settings)


@pytest.mark.parametrize("kind,budget", [("adamw", "50%peak"), ("sgd", None)])
def test_mixed_precision_bit_for_bit_and_resumed(kind: str, budget: str | None) -> None:
    """bf16 parameters, activations and gradients; fp32 masters and moments
    in the optimizer: bit for bit as the same optimizer in eager PyTorch,
    through plans that recompute or swap and step on the host, with the
    16-bit kernels' scratch measured (Note [Measured 16-bit scratch]) so
    the device peak is the plan's; resumed from step 3 in another trainer,
    the masters' fp32 bits included."""
    data = [(x.to(torch.bfloat16), y) for x, y in batches(6)]
    model_e, optimizer_e = bf16_model_and_optimizer(kind)
    reference = eager_losses(model_e, optimizer_e, data)
    model, optimizer = bf16_model_and_optimizer(kind)
    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget=budget)
    torch.manual_seed(5)
    losses, peaks = [], []
    for b in data[:3]:
        loss = trainer.step(b)
        assert loss.dtype == torch.bfloat16  # the model's loss, as eager's
        losses.append(loss.item())
        peaks.append(trainer.last_step["device_peak_bytes"])
    checkpoint = trainer.state_dict()
    losses += [trainer.step(b).item() for b in data[3:]]
    assert losses == reference
    assert max(peaks) <= trainer.plan.budget_bytes
    assert abs(peaks[0] - trainer.plan.peak_bytes) <= trainer.plan.peak_bytes // 100
    trainer.close()
    assert_same_states(model_e, optimizer_e, model, optimizer)
    assert optimizer.state_dict()["state"][0]["master"].dtype == torch.float32
    model2, optimizer2 = bf16_model_and_optimizer(kind)
    resumed = memwall.Trainer(model2, optimizer2, loss_fn=F.cross_entropy, budget=budget)
    resumed.load_state_dict(checkpoint)
    assert [resumed.step(b).item() for b in data[3:]] == reference[3:]
    resumed.close()
    assert_same_states(model_e, optimizer_e, model2, optimizer2)


def test_bad_input_and_failures() -> None:
    data = batches(2)
    model, optimizer = model_and_optimizer("adamw")
    with memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy) as trainer:
        trainer.step(data[0])
        # One session per process at a time.
        other_model, other_optimizer = model_and_optimizer("adamw")
        other = memwall.Trainer(other_model, other_optimizer, loss_fn=F.cross_entropy)
        with pytest.raises(memwall.BadInput, match="another executor"):
            other.step(data[0])
        # Only the lr is followed (Note [Tracked settings]): a setting that
        # may change which ops run is refused, naming it.
        optimizer.param_groups[0]["betas"] = (0.8, 0.999)
        with pytest.raises(memwall.BadInput, match=r"group 0's betas: \(0.9, 0.999\) -> "
                                                   r"\(0.8, 0.999\)"):
            trainer.step(data[1])
        optimizer.param_groups[0]["betas"] = (0.9, 0.999)
        trainer.step(data[1])
    # A budget below what any plan needs names the bound, as the command does.
    model, optimizer = model_and_optimizer("adamw")
    with pytest.raises(memwall.BadInput, match=r"^no plan fits a device budget of 4096 bytes.*"
                                               r"no plan can fit .* holds \d+ bytes .* in all$"):
        memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget=4096).step(data[0])
    # A host pool too small for the states the plan keeps there.
    model, optimizer = model_and_optimizer("adamw")
    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, strategy="zero-offload",
                              host_bytes=8192)
    with pytest.raises(memwall.OutOfMemory, match="host pool"):
        trainer.step(data[0])
    with pytest.raises(memwall.BadInput, match="torch.optim.Optimizer"):
        memwall.Trainer(model, "adamw")  # type: ignore[arg-type]
    rmsprop = torch.optim.RMSprop(model.parameters())
    with pytest.raises(memwall.BadInput, match="RMSprop"):
        memwall.Trainer(model, rmsprop)
    plan = memwall.plan(model, data[0], F.cross_entropy, optimizer=optimizer)  # CUDA kernels
    with pytest.raises(memwall.BadInput, match="kernels=\"cpu\""):
        memwall.Trainer(model, optimizer, plan, F.cross_entropy).step(data[0])


@pytest.mark.parametrize("kind,budget", [("adamw", "50%peak"), ("momentum", "60%peak")])
def test_a_learning_rate_schedule_is_followed(kind: str, budget: str,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    """Note [Tracked settings]: a warm-up then cosine schedule (torch's
    LambdaLR, stepped after each step as with torch's optimizer) trains bit
    for bit as eager PyTorch, through plans that run the optimizer on the
    host, and across a batch of other shapes (a second session)."""
    import math

    def schedule(optimizer: Any) -> Any:
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: (s + 1) / 3 if s < 3 else 0.5 * (1 + math.cos(math.pi * s / 8)))

    data = batches(8)
    data[5] = batches(1, size=16)[0]
    model_e, optimizer_e = model_and_optimizer(kind)
    reference = eager_losses(model_e, optimizer_e, data, schedule(optimizer_e))
    model, optimizer = model_and_optimizer(kind)
    scheduler = schedule(optimizer)
    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget=budget)
    torch.manual_seed(5)
    losses = []
    for b in data:
        losses.append(trainer.step(b).item())
        scheduler.step()
    assert losses == reference
    assert optimizer.param_groups[0]["lr"] == optimizer_e.param_groups[0]["lr"]
    assert trainer._tracked == {"group0.lr": pytest.approx(optimizer.defaults["lr"] / 3)}
    assert "optimizer.step()" not in capfd.readouterr().err  # torch's order check is content
    trainer.close()
    assert_same_states(model_e, optimizer_e, model, optimizer)


def test_batches_of_other_shapes_are_planned_once(capfd: pytest.CaptureFixture[str]) -> None:
    """Note [Batches of other shapes]: bucketed batch sizes, each planned
    once, bit for bit as eager PyTorch trains on the same sequence."""
    big, small = batches(3, size=32), batches(3, size=16)
    data = [big[0], small[0], small[1], big[1], small[2], big[2]]
    reference, model_e, optimizer_e = eager("adamw", data)
    model, optimizer = model_and_optimizer("adamw")
    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget="60%peak")
    torch.manual_seed(5)
    assert [trainer.step(b).item() for b in data] == reference
    assert len(trainer._plans) == 2
    assert capfd.readouterr().err.count("a batch of new shapes (float32 [16, 64], int64 [16])") == 1
    trainer.close()
    assert_same_states(model_e, optimizer_e, model, optimizer)
    model, optimizer = model_and_optimizer("adamw")
    with memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, max_plans=1) as one:
        one.step(big[0])
        with pytest.raises(memwall.BadInput, match="at most max_plans=1"):
            one.step(small[0])


def test_data_dependent_control_flow_is_refused() -> None:
    class Branchy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            if h.sum() > 0:  # another batch may take the other branch
                h = h * 2
            return self.b(h)

    model = Branchy()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy)
    with pytest.raises(memwall.BadInput, match=r"reads a bool value after op \d+ \(.*gt\) "
                                               r"\(data-dependent control flow"):
        trainer.step(batches(1)[0])


INTERRUPTED = """
import sys, torch, torch.nn.functional as F
sys.path[:0] = [sys.argv[2], sys.argv[2] + "/.."]  # this checkout's memwall
import memwall
from test_training import model_and_optimizer, batches
model, optimizer = model_and_optimizer("adamw")
trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, strategy="zero-infinity",
                          nvme=sys.argv[1])
data = batches(2)
trainer.step(data[0])
print("training", flush=True)
while True:
    trainer.step(data[1])
"""


def test_ctrl_c_leaves_no_swap_file(tmp_path: Path) -> None:
    swap = tmp_path / "swap"
    swap.mkdir()
    child = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(swap), str(ROOT / "python" /
                              "tests")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "training"
        # The NVMe engine unlinks its swap file once it has it open (Note
        # [Swap file names] in src/runtime/swap_dir.cc): no name to leave.
        assert not list(swap.iterdir())
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:  # a failed check: the loop must not outlive the test
            child.kill()
            child.wait()
    # Python ends an uncaught KeyboardInterrupt by dying of SIGINT again.
    assert child.returncode == -signal.SIGINT and "KeyboardInterrupt" in err
    assert not list(swap.iterdir())


def run_example(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "train_gpt.py"), "--layers",
                           "1", "--width", "64", "--context", "32", "--batch", "4", "--json",
                           *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_train_gpt_example_and_resume_in_a_new_process(tmp_path: Path) -> None:
    straight = run_example("--steps", "6", "--check-eager")
    assert straight["bitwise_equal"] is True
    assert straight["measured_peak_bytes"] <= straight["budget_bytes"]
    assert straight["budget_bytes"] == straight["eager_peak_bytes"] // 2
    assert straight["measured_peak_bytes"] == straight["predicted_peak_bytes"]
    checkpoint = str(tmp_path / "ckpt.pt")
    run_example("--steps", "6", "--stop-at", "3", "--checkpoint", checkpoint)
    resumed = run_example("--steps", "6", "--resume", checkpoint)
    assert resumed["losses"] == straight["losses"][3:]
    assert resumed["params_sha256"] == straight["params_sha256"]


def test_train_gpt_example_in_bf16() -> None:
    """--dtype bf16: mixed precision (memwall.MixedPrecision) at half the
    eager peak, bit for bit as eager, the device peak the plan's within 1%
    (the 16-bit kernels' scratch measured, Note [Measured 16-bit scratch];
    where the threads' per-block scratch overlaps less than the worst case
    the measured peak is a little under)."""
    result = run_example("--steps", "4", "--check-eager", "--dtype", "bf16")
    assert result["bitwise_equal"] is True
    assert result["measured_peak_bytes"] <= result["budget_bytes"]
    assert abs(result["measured_peak_bytes"] - result["predicted_peak_bytes"]) <= \
        result["predicted_peak_bytes"] // 100


def test_finetune_lora_example() -> None:
    """A Hugging Face GPT-2 built from a config, frozen, with LoRA adapters
    trained under half its eager peak; validation passes between steps."""
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "finetune_lora.py"),
                           "--layers", "1", "--width", "64", "--context", "32", "--batch", "4",
                           "--steps", "4", "--eval-every", "2", "--check-eager", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bitwise_equal"] is True
    assert len(result["validation_losses"]) == 2
    assert result["trainable_parameters"] < result["parameters"]
    assert result["measured_peak_bytes"] <= result["budget_bytes"]
    assert abs(result["measured_peak_bytes"] - result["predicted_peak_bytes"]) <= \
        result["predicted_peak_bytes"] // 100
