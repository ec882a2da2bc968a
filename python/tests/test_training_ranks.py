"""memwall.Trainer under torchrun (Note [Ranks under torchrun] in
memwall/training.py): each process a rank with its own batches, bit for
bit as data-parallel training in one process (the reference below, as
Note [Data-parallel reference] in memwall/values/reference.py describes
it: every rank's step from the same generator state, gradients divided by
the number of ranks and summed in rank order, one optimizer step). On one
host, and on two hosts made of network namespaces."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from test_training import ROOT, WHY_NOT, model_and_optimizer

pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)

TESTS = str(ROOT / "python" / "tests")
PACKAGE = str(ROOT / "python")
STEPS = 4

RANK = f"""
import json, os, sys, hashlib, torch, torch.nn.functional as F
sys.path[:0] = [{TESTS!r}, {PACKAGE!r}]  # this checkout's memwall, not an installed one
import memwall
from test_training import model_and_optimizer
from test_training_ranks import STEPS, rank_batches, digest, schedule
out, stage, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rank = int(os.environ["RANK"])
model, optimizer = model_and_optimizer("adamw")
scheduler = schedule(optimizer)
trainer = memwall.Trainer(model, optimizer, loss_fn=F.cross_entropy, budget="60%peak",
                          zero_stage=stage)
torch.manual_seed(5)
checkpoint = os.path.join(out, f"checkpoint{{rank}}.pt")
start = 0
if mode == "resume":  # a new process, from the rank's own checkpoint
    saved = torch.load(checkpoint, weights_only=False)
    trainer.load_state_dict(saved["trainer"])
    scheduler.load_state_dict(saved["scheduler"])
    start = trainer.steps
losses = []
for k, b in enumerate(rank_batches(rank)[start:STEPS // 2 if mode == "first" else STEPS]):
    losses.append(trainer.step(b).item())
    scheduler.step()
    if k == 0:  # a validation pass between steps (stage 3: on the gathered parameters)
        with trainer.gathered(), torch.no_grad():
            model.eval()
            assert model(b[0]).shape == (32, 10)
            model.train()
if mode == "first":
    torch.save({{"trainer": trainer.state_dict(), "scheduler": scheduler.state_dict()}}, checkpoint)
    sys.exit(0)
trainer.close()
with open(os.path.join(out, f"rank{{rank}}.json"), "w") as f:
    json.dump({{"rank": rank, "losses": losses, "digest": digest(model), "ranks": trainer.ranks}}, f)
"""


def schedule(optimizer: Any) -> Any:
    """A learning rate that changes every step (Note [Tracked settings] in
    memwall/tracer/calls.py)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (s + 1))


def rank_batches(rank: int) -> list[Any]:
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g))
            for _ in range(STEPS)]


def digest(model: torch.nn.Module) -> str:
    import hashlib
    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(p.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def data_parallel_reference(ranks: int) -> tuple[list[list[float]], str]:
    model, optimizer = model_and_optimizer("adamw")
    scheduler = schedule(optimizer)
    params = [p for p in model.parameters()]
    data = [rank_batches(r) for r in range(ranks)]
    torch.manual_seed(5)
    losses: list[list[float]] = [[] for _ in range(ranks)]
    for k in range(STEPS):
        start = torch.get_rng_state()
        total: list[torch.Tensor] = []
        for r in range(ranks):
            torch.set_rng_state(start)
            model.zero_grad(set_to_none=True)
            x, y = data[r][k]
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            losses[r].append(loss.item())
            part = [p.grad / ranks for p in params]
            total = part if not total else [a + b for a, b in zip(total, part)]
        for p, g in zip(params, total):
            p.grad = g
        optimizer.step()
        scheduler.step()
    return losses, digest(model)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def results(out_dir: Path) -> dict[int, dict[str, Any]]:
    found = {}
    for path in out_dir.glob("rank*.json"):
        r = json.loads(path.read_text())
        found[r["rank"]] = r
    return found


def check(found: dict[int, dict[str, Any]], ranks: int, first: int = 0) -> None:
    """The ranks' losses from step `first` on and final model against the
    reference's."""
    # torchrun gives each worker OMP_NUM_THREADS=1, and a kernel's bits
    # depend on its threads: the reference runs with one too.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        losses, final = data_parallel_reference(ranks)
    finally:
        torch.set_num_threads(threads)
    assert sorted(found) == list(range(ranks))
    for r in range(ranks):
        assert found[r]["ranks"] == ranks
        assert found[r]["losses"] == losses[r][first:], r
        assert found[r]["digest"] == final, r


def torchrun(out: Path, stage: int, mode: str) -> None:
    script = out / "rank.py"
    script.write_text(RANK)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-port", str(free_port()), str(script), str(out), str(stage),
                           mode], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_two_ranks_under_torchrun(tmp_path: Path, stage: int) -> None:
    """ZeRO stages 0-3: whole states, or each rank a shard of the optimizer
    states (Note [Sharded states] in memwall/training.py), and in stage 3
    of the parameters (Note [Sharded parameters]), with a learning-rate
    schedule."""
    torchrun(tmp_path, stage, "all")
    check(results(tmp_path), 2)


@pytest.mark.parametrize("stage", [0, 2, 3])
def test_two_ranks_resume_from_their_checkpoints(tmp_path: Path, stage: int) -> None:
    """Each rank saves Trainer.state_dict() (from stage 1 on its shard of
    the optimizer states, as DeepSpeed's checkpoints are per rank; whole
    parameters, gathered in stage 3) and the
    scheduler's halfway, and new processes resume from them: the rest of
    the run is bit for bit the run that never stopped."""
    torchrun(tmp_path, stage, "first")
    assert not list(tmp_path.glob("rank*.json"))
    torchrun(tmp_path, stage, "resume")
    check(results(tmp_path), 2, first=STEPS // 2)


def make_namespaces(tag: str) -> str:
    """Two network namespaces joined by a veth pair (10.47.0.1 and .2);
    the reason when they cannot be made."""
    if shutil.which("ip") is None:
        return "no ip command (Debian's iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    steps = [["ip", "netns", "add", f"{tag}a"], ["ip", "netns", "add", f"{tag}b"],
             ["ip", "link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}y"],
             ["ip", "link", "set", f"{tag}x", "netns", f"{tag}a"],
             ["ip", "link", "set", f"{tag}y", "netns", f"{tag}b"],
             ["ip", "-n", f"{tag}a", "addr", "add", "10.47.0.1/24", "dev", f"{tag}x"],
             ["ip", "-n", f"{tag}b", "addr", "add", "10.47.0.2/24", "dev", f"{tag}y"]]
    for ns, dev in (("a", "x"), ("b", "y")):
        steps += [["ip", "-n", f"{tag}{ns}", "link", "set", "lo", "up"],
                  ["ip", "-n", f"{tag}{ns}", "link", "set", f"{tag}{dev}", "up"]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            return f"{' '.join(step)}: {done.stderr.strip()}"
    return ""


def test_two_hosts_in_network_namespaces(tmp_path: Path) -> None:
    tag = f"mw{os.getpid() % 100000}"
    why = make_namespaces(tag)
    try:
        if why:
            pytest.skip(f"cannot make two hosts of network namespaces: {why}")
        script = tmp_path / "rank.py"
        script.write_text(RANK)
        port = str(free_port())
        children = []
        for node, (ns, dev) in enumerate((("a", "x"), ("b", "y"))):
            # One thread, as torchrun gives its workers when there are several.
            env = dict(os.environ, GLOO_SOCKET_IFNAME=f"{tag}{dev}", OMP_NUM_THREADS="1")
            children.append(subprocess.Popen(
                ["ip", "netns", "exec", f"{tag}{ns}", sys.executable, "-m",
                 "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                 "--node-rank", str(node), "--master-addr", "10.47.0.1", "--master-port", port,
                 str(script), str(tmp_path), "0", "all"], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True))
        try:
            for child in children:
                _, err = child.communicate(timeout=600)
                assert child.returncode == 0, err[-3000:]
        finally:
            for child in children:  # a failed rank's peer must not outlive the test
                if child.poll() is None:
                    child.kill()
                    child.wait()
        check(results(tmp_path), 2)
    finally:
        for ns in ("a", "b"):
            subprocess.run(["ip", "netns", "del", f"{tag}{ns}"], capture_output=True)
