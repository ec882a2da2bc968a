"""The recorder (memwall/tracer/recorder.py, step.py, trace.py) on small
modules: which ops it records, with which buffers, kinds and names, and the
graph it writes. Expected values follow from the module's arithmetic: a
Linear(4, 3) with bias has 4 x 3 + 3 = 15 parameters, its forward is one
addmm of [2, 4] by [4, 3] (2 x 2 x 4 x 3 + 2 x 3 = 54 FLOPs, flops.py), and
so on, each stated where it is checked.
"""
import pytest
import torch
from torch import nn

from memwall.errors import TraceError
from memwall.sources import Built
from memwall.tracer.recorder import Recorder
from memwall.tracer.trace import run_one


def linear_sgd():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    batch = (torch.randn(2, 4), torch.randn(2, 3))
    return Built(model, batch, nn.functional.mse_loss,
                 torch.optim.SGD(model.parameters(), lr=0.1, foreach=False))


def by_name(graph):
    return {b["name"]: b for b in graph["buffers"]}


def ops_of(graph, phase=None):
    return [op for op in graph["ops"] if phase is None or op["phase"] == phase]


@pytest.fixture(autouse=True)
def default_cublas(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)


def test_a_linear_layer_on_the_meta_device():
    graph = run_one("linear", {"model": "linear"}, False, linear_sgd).graph
    assert graph["format"] == "memwall.graph/1"
    meta = graph["meta"]
    assert (meta["param_count"], meta["dtype"], meta["batch"]) == (15, "fp32", 2)
    # SGD's lr reaches the update as a setting (Note [Tracked settings]).
    assert (meta["device"], meta["kernels"], meta["calls"]) == (
        "meta", "cuda", {"runnable": True, "settings": {"group0.lr": 0.1}})
    buffers = by_name(graph)
    assert (buffers["weight"]["kind"], buffers["weight"]["bytes"]) == ("param", 4 * 3 * 4)
    assert (buffers["bias"]["kind"], buffers["bias"]["shape"]) == ("param", [3])
    assert (buffers["input"]["kind"], buffers["input"]["bytes"]) == ("input", 2 * 4 * 4)
    assert buffers["target"]["kind"] == "input"
    assert buffers["weight.grad"]["kind"] == "grad"
    assert buffers["bias.grad"]["kind"] == "grad"
    # Forward: the transposed weight is a view (no op); addmm makes the output.
    forward = ops_of(graph, "forward")
    addmm = forward[0]
    assert (addmm["name"], addmm["type"]) == ("model.addmm", "addmm")
    assert addmm["flops"] == 2 * 2 * 4 * 3 + 2 * 3 == 54
    assert [graph["buffers"][b]["name"] for b in addmm["in"][:3]] == ["bias", "input", "weight"]
    # cuBLAS's workspaces (CUDA kernels): one per thread, made by its first
    # matmul, 8,519,680 B each (scratch.py).
    assert buffers["cublas_workspace.forward"]["bytes"] == 8_519_680
    assert buffers["cublas_workspace.backward"]["bytes"] == 8_519_680
    # The loss, MSE with a mean: mse_loss's input-sized temporary (scratch.py).
    loss = next(op for op in forward if op["type"] == "mse_loss")
    assert (loss["name"], loss["workspace"]) == ("loss.mse_loss", 2 * 3 * 4)
    # SGD steps each parameter in place, in the optimizer phase.
    steps = ops_of(graph, "optimizer")
    updated = {graph["buffers"][b]["name"] for op in steps for b in op["updates"]}
    assert updated == {"weight", "bias"}
    assert {op["name"].rpartition(".")[0] for op in steps} == {"weight", "bias"}


def test_graph_ids_and_producers_are_consistent():
    graph = run_one("linear", {"model": "linear"}, False, linear_sgd).graph
    assert [b["id"] for b in graph["buffers"]] == list(range(len(graph["buffers"])))
    assert [op["id"] for op in graph["ops"]] == list(range(len(graph["ops"])))
    made = {}
    for op in graph["ops"]:
        for b in op["out"]:
            assert b not in made, "a buffer made twice"
            made[b] = op["id"]
    for b in graph["buffers"]:
        persistent = b["kind"] in ("param", "optim_state", "input")
        assert (b["id"] in made) != persistent, b["name"]


def test_adam_states_exist_before_the_first_op():
    def build():
        model = nn.Linear(4, 3, bias=False)
        return Built(model, (torch.randn(2, 4), torch.randn(2, 3)), nn.functional.mse_loss,
                     torch.optim.Adam(model.parameters(), foreach=False))

    graph = run_one("adam", {}, False, build).graph
    buffers = by_name(graph)
    # the warm-up step made Adam's step count and two moments
    for state in ("weight.step", "weight.exp_avg", "weight.exp_avg_sq"):
        assert buffers[state]["kind"] == "optim_state"
    assert buffers["weight.exp_avg"]["bytes"] == 4 * 3 * 4
    assert buffers["weight.step"]["bytes"] == 4  # a 0-d fp32 tensor


def test_batch_norm_updates_its_running_statistics():
    def build():
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4))
        return Built(model, (torch.randn(2, 3, 8, 8), None), lambda out: out.sum(),
                     torch.optim.SGD(model.parameters(), lr=0.1, foreach=False))

    graph = run_one("bn", {}, False, build).graph
    buffers = by_name(graph)
    assert buffers["1.running_mean"]["kind"] == "optim_state"
    bn = next(op for op in graph["ops"] if op["type"] == "native_batch_norm")
    assert bn["name"] == "1.native_batch_norm"
    updated = {graph["buffers"][b]["name"] for b in bn["updates"]}
    assert {"1.running_mean", "1.running_var"} <= updated
    conv = next(op for op in graph["ops"] if op["type"] == "convolution")
    # 2 x (2 x 4 x 8 x 8 outputs) x (3 x 3 x 3) + 512 for the bias
    assert (conv["name"], conv["flops"]) == ("0.convolution", 2 * 512 * 27 + 512)


@pytest.mark.parametrize("kernels,mask_dtype", [("cuda", "bool"), ("cpu", "fp32")])
def test_dropout_keeps_the_mask_its_kernels_keep(kernels, mask_dtype):
    def build():
        model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
        return Built(model, (torch.randn(4, 8), None), lambda out: out.sum(),
                     torch.optim.SGD(model.parameters(), lr=0.1, foreach=False))

    graph = run_one("dropout", {}, False, build, kernels).graph
    saved = [b for b in graph["buffers"] if b["name"].startswith("1.")]
    # CUDA: native_dropout's output and a 1-byte mask; the CPU: bernoulli_'s
    # mask in the input's dtype, then the product.
    assert mask_dtype in {b["dtype"] for b in saved}
    masks = [b for b in saved if b["dtype"] == mask_dtype and b["shape"] == [4, 8]]
    assert masks and masks[0]["bytes"] == 32 * (1 if mask_dtype == "bool" else 4)


def test_eager_lifetimes_on_real_tensors():
    traced = run_one("linear", {"model": "linear"}, False, linear_sgd, values=True)
    graph = traced.graph
    assert (graph["meta"]["device"], graph["meta"]["kernels"]) == ("cpu", "cpu")
    for b in graph["buffers"]:
        free = b["eager_free"]
        if b["kind"] in ("param", "input", "optim_state"):
            assert free is None, b["name"]  # alive at the end of the step
        elif free is not None:
            assert 0 <= free < len(graph["ops"])
    # the values the step starts from: every parameter's bytes as they were
    step = traced.step
    weight = step.recorder.by_storage[step.model.weight.untyped_storage()._cdata]
    assert len(step.recorder.values[weight]) == 4 * 3 * 4
    assert step.recorder.loss_value == pytest.approx(
        nn.functional.mse_loss(*_forward_before_the_step()).item())


def _forward_before_the_step():
    model, (x, target), _, _ = linear_sgd()
    return model(x), target


def test_a_recorder_outside_recording_records_nothing():
    recorder = Recorder(measure=False, kernels="cpu")
    with recorder:
        torch.ones(4) + 1
    assert recorder.ops == [] and recorder.buffers == []


def test_a_loss_that_is_no_scalar_is_refused():
    def build():
        model = nn.Linear(4, 3)
        return Built(model, (torch.randn(2, 4), None), lambda out: out,
                     torch.optim.SGD(model.parameters(), lr=0.1))

    with pytest.raises(TraceError, match="scalar"):
        run_one("bad", {}, False, build)
