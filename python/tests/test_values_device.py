"""`python -m memwall --values DIR --device cpu|cuda` (memwall/tracer/devices.py,
Note [Run inputs] in memwall/values/files.py): the refusals in one line
(exit 2, nothing left in DIR), the device-generic path on the CPU writing
what it always did, and on a GPU the graph's meta and the CUDA generator's
state (skipped without one). The GPU case also runs as a script on a
machine without pytest (exit 77 when skipped)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

try:
    import pytest
except ImportError:  # a GPU machine without pytest: run as a script (below)
    pytest = None  # type: ignore[assignment]

PYTHON_DIR = Path(__file__).resolve().parents[1]
PREFIX = "memwall-trace: error: "


def tracer(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "memwall", *args], capture_output=True,
                          text=True, env=env, timeout=600)


def refused(done: subprocess.CompletedProcess) -> str:
    """The one line a refusal prints, checked to be the only one."""
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), done.stderr
    return lines[0][len(PREFIX):]


def test_cuda_without_a_gpu_is_refused_in_one_line(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: the refusal is for machines without one")
    out = tmp_path / "values"
    why = refused(tracer("--builtin", "linear-toy", "--values", str(out), "--device", "cuda"))
    assert why.startswith("--device cuda: no CUDA GPU is visible to torch"), why
    assert "torch.cuda.is_available() is false" in why
    assert not out.exists()  # refused before anything is written


def test_device_needs_values(tmp_path: Path) -> None:
    why = refused(tracer("--builtin", "linear-toy", "--out", str(tmp_path / "g.json"),
                         "--device", "cpu"))
    assert why.startswith("--device needs --values"), why
    assert not (tmp_path / "g.json").exists()


def test_ranks_and_kernels_other_than_the_device_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "values"
    why = refused(tracer("--builtin", "linear-toy", "--values", str(out), "--device", "cuda",
                         "--ranks", "2"))
    assert why.startswith("--ranks 2 with --device cuda:") and "not supported yet" in why
    why = refused(tracer("--builtin", "linear-toy", "--values", str(out), "--kernels", "cuda"))
    assert why == "--values runs the kernels of --device cpu on real tensors, not --kernels cuda"
    assert not out.exists()


def test_a_moved_batch_keeps_its_shared_storages() -> None:
    from memwall.tracer.devices import move_batch
    sequence = torch.arange(10, dtype=torch.int64)
    batch = ((sequence[:-1], {"scale": torch.ones(2, 3).t()}), sequence[1:])
    (inputs, extra), target = move_batch(batch, torch.device("cpu"))
    # Copies (new storages), still sharing one where the batch did.
    assert inputs.untyped_storage()._cdata != sequence.untyped_storage()._cdata
    assert inputs.untyped_storage()._cdata == target.untyped_storage()._cdata
    assert torch.equal(inputs, sequence[:-1]) and torch.equal(target, sequence[1:])
    assert (target.storage_offset(), target.stride()) == (1, (1,))
    assert extra["scale"].stride() == (1, 3) and torch.equal(extra["scale"], torch.ones(3, 2))


def test_the_cpu_path_writes_no_device_keys(tmp_path: Path) -> None:
    from memwall.sources import Built
    from memwall.tracer.trace import run_one
    from memwall.values.reference import write_values

    def build() -> Built:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout(0.5))
        return Built(model, (torch.randn(2, 4), torch.randn(2, 3)), torch.nn.functional.mse_loss,
                     torch.optim.Adam(model.parameters(), lr=0.1, foreach=False))

    traced = run_one("toy", {"model": "toy"}, False, build, values=True)
    assert traced.step is not None and traced.step.device == torch.device("cpu")
    meta = traced.graph["meta"]
    assert (meta["device"], meta["kernels"], meta["threads"]) == (
        "cpu", "cpu", torch.get_num_threads())
    assert "gpu" not in meta
    write_values(traced.graph, traced.step, 2, 0, str(tmp_path))
    state = json.loads((tmp_path / "state.json").read_text())
    assert list(state)[:4] == ["seed", "threads", "rng", "torch"] and "rng_device" not in state
    assert state["rng"]["bytes"] == torch.get_rng_state().numel()  # the CPU generator's


def why_no_gpu() -> str:
    return "" if torch.cuda.is_available() else \
        "no CUDA GPU: torch.cuda.is_available() is false (the trace on CUDA needs one)"


def check_a_trace_on_cuda(out: Path) -> None:
    """gpt-mini (dropout, a head tied to its embedding, a mask made in
    forward without a device) traced on the GPU, twice: the meta, the
    generator's state, and the same bytes both times."""
    runs = []
    for name in ("a", "b"):
        done = tracer("--builtin", "gpt-mini", "--values", str(out / name), "--device", "cuda",
                      "--steps", "2", "--seed", "5")
        assert done.returncode == 0, done.stderr
        runs.append(out / name)
    graph = json.loads((runs[0] / "graph.json").read_text())
    meta = graph["meta"]
    assert (meta["device"], meta["kernels"]) == ("cuda", "cuda")
    assert meta["gpu"] == torch.cuda.get_device_name(0) and "threads" not in meta
    assert any(op.get("call", {}).get("rng") for op in graph["ops"])  # dropout's
    assert any(b["name"].startswith("cublas_workspace.") for b in graph["buffers"])
    state = json.loads((runs[0] / "state.json").read_text())
    assert state["rng_device"] == "cuda" and "threads" not in state
    assert state["rng"]["bytes"] == 16  # the philox generator's seed and offset
    with open(runs[0] / "state.bin", "rb") as f:
        f.seek(state["rng"]["offset"])
        seed, _offset = struct.unpack("<Qq", f.read(16))
    assert seed == 5
    eager = json.loads((runs[0] / "eager.json").read_text())
    assert len(eager["losses"]) == 2 and all(x == x for x in eager["losses"])
    # Deterministic kernels: a second process writes the same bytes.
    for name in ("state.bin", "eager.bin", "eager.json"):
        assert (runs[0] / name).read_bytes() == (runs[1] / name).read_bytes(), name


def test_a_trace_on_cuda(tmp_path: Path) -> None:
    if why_no_gpu():
        pytest.skip(why_no_gpu())
    check_a_trace_on_cuda(tmp_path)


if __name__ == "__main__":
    if why_no_gpu():
        print(f"skipped: {why_no_gpu()}")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        check_a_trace_on_cuda(Path(tmp))
    print("test_a_trace_on_cuda: passed")
