"""memwall.parallel: a plan's torch layout (`memwall plan --torchrun DIR`)
trained on 4 CPU processes (gloo), each rank's measured memory against
memwall's per-device prediction (docs/torch-layout.md): GPT-2, Llama
(grouped-query attention), and Llama with sequence parallelism."""
from __future__ import annotations

import copy
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memwall.parallel import LayoutError, load, validate

PYTHON_DIR = Path(__file__).resolve().parents[1]
# Each run: tp2 x pp2, 1F1B, 4 micro-batches of 2 x 64 tokens, fp32, Adam.
RUNS: dict[str, list[str]] = {
    "gpt2": ["--model", "gpt2-small", "--shape",
             "layers=4,hidden=256,heads=4,vocab=1024,positions=64"],
    "llama": ["--model", "llama3-8b", "--shape",
              "layers=4,hidden=256,heads=4,kv_heads=2,ffn=512,vocab=1000,positions=128"],
}
RUNS["llama-sp"] = RUNS["llama"] + ["--sequence-parallel"]


def memwall_binary() -> Path | None:
    given = os.environ.get("MEMWALL_BINARY")
    path = Path(given) if given else PYTHON_DIR.parent / "build" / "memwall"
    return path if path.exists() else None


def why_no_gloo() -> str:
    try:
        import torch.distributed as dist
    except ImportError:
        return "no torch"
    if not dist.is_available() or not dist.is_gloo_available():
        return "torch.distributed with gloo is not available"
    return ""


def plan_layout(tmp: Path, model: list[str]) -> dict[str, Any]:
    binary = memwall_binary()
    assert binary is not None
    out = tmp / "layout"
    subprocess.run([str(binary), "plan", *model, "--seq", "64",
                    "--batch", "2", "--dtype", "fp32", "--optimizer", "adam",
                    "--pipeline-parallel", "2", "--tensor-parallel", "2", "--micro-batches", "4",
                    "--schedule", "1f1b", "--partition", "even", "--torchrun", str(out)],
                   check=True, capture_output=True, text=True, timeout=60)
    return json.loads((out / "layout.json").read_text())


def small_layout() -> dict[str, Any]:
    """A valid layout by hand, for the validation tests (no binary needed)."""
    chunk = {"device": 0, "layers": [0, 2], "embedding": True, "head": False}
    return {
        "format": "memwall-torch-layout/1", "model": "gpt2-small",
        "shape": {"layers": 4, "hidden": 256, "heads": 4, "kv_heads": 4, "ffn": 1024,
                  "vocab": 1024, "positions": 64},
        "seq": 64, "micro_batch": 2, "micro_batches": 4, "dtype": "fp32", "optimizer": "adam",
        "sequence_parallel": False, "padded_vocab": 1024, "schedule": "1f1b",
        "pipeline_devices": 2, "tensor_parallel": 2, "data_parallel": 1, "chunks_per_device": 1,
        "chunks": [chunk, {"device": 1, "layers": [2, 4], "embedding": False, "head": True}],
        "devices": [{"peak_bytes": 1, "states_bytes": 1}, {"peak_bytes": 1, "states_bytes": 1}],
    }


def test_a_hand_made_layout_is_valid() -> None:
    assert validate(small_layout())["model"] == "gpt2-small"
    llama = small_layout()
    llama.update(model="llama3-8b", sequence_parallel=True)
    llama["shape"].update(kv_heads=2, ffn=512)
    assert validate(llama)["sequence_parallel"]


@pytest.mark.parametrize("change, message", [
    (lambda l: l.update(format="x"), 'format is "x"'),
    (lambda l: l.pop("shape"), 'has no "shape"'),
    (lambda l: l.update(model="bert-base"), "bert-base is not supported"),
    (lambda l: l["shape"].update(heads=3), "not a multiple of shape.heads"),
    (lambda l: (l.update(model="llama3-8b"), l["shape"].pop("kv_heads")), 'no "kv_heads"'),
    (lambda l: (l.update(model="llama3-8b"), l["shape"].update(kv_heads=3)),
     "not a multiple of shape.kv_heads"),
    (lambda l: (l.update(model="llama3-8b"), l["shape"].update(kv_heads=1)),
     "1 key-value heads"),
    (lambda l: l.update(sequence_parallel=True, seq=63), "sequence-parallel ranks"),
    (lambda l: l.update(seq=65), "longer than shape.positions"),
    (lambda l: l.update(dtype="fp8"), "dtype fp8"),
    (lambda l: l.update(optimizer="lion"), "optimizer lion"),
    (lambda l: l.update(schedule="hanayo"), "schedule hanayo"),
    (lambda l: l.update(micro_batches=True), "micro_batches must be a number"),
    (lambda l: l["chunks"][1].update(layers=[3, 4]), "does not follow layer 2"),
    (lambda l: l["chunks"][1].update(layers=[2, 3]), "hold 3 of 4 layers"),
    (lambda l: l["chunks"][1].update(device=2), "not a pipeline device"),
    (lambda l: l["chunks"][1].update(embedding=True), "embedding must be in chunks[0]"),
    (lambda l: l["devices"].pop(), "1 devices for 2"),
    (lambda l: l.update(padded_vocab=1000), "padded_vocab"),
])
def test_bad_layouts_fail_in_one_line(change: Any, message: str) -> None:
    layout = copy.deepcopy(small_layout())
    change(layout)
    with pytest.raises(LayoutError) as e:
        validate(layout)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_unreadable_files_fail_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="cannot read"):
        load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(LayoutError, match="is not JSON"):
        load(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(LayoutError, match="not a JSON object"):
        load(tmp_path / "list.json")


@pytest.mark.parametrize("heads, kv_heads", [(4, 4), (4, 2), (8, 2), (8, 1)])
def test_llama_kernels_match_autograd(heads: int, kv_heads: int) -> None:
    """memwall.parallel_llama's kernels (one process, no TP) against plain
    autograd of HF's formulas, in fp64: the hidden states and every weight's
    gradient."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from memwall.parallel_kernels import allocate_grads
    from memwall.parallel_llama import EPS, LlamaStage, rope_tables
    b, s, h, ffn = 2, 16, 64, 96
    d = h // heads
    shape = {"layers": 2, "hidden": h, "heads": heads, "kv_heads": kv_heads, "ffn": ffn,
             "vocab": 50, "positions": 32}
    gen = torch.Generator().manual_seed(0)
    stage = LlamaStage("llama3-8b", shape, 50, 0, 2, True, False).double()
    with torch.no_grad():
        for p in stage.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.3 + (p.dim() == 1))
    allocate_grads(stage)
    ids = torch.randint(0, 50, (b, s), generator=gen)
    probe = torch.randn(b, s, h, generator=gen, dtype=torch.float64)
    out = stage(ids)
    (out * probe).sum().backward()

    w = {n: p.detach().clone().requires_grad_() for n, p in stage.named_parameters()}

    def rms(x: Any, scale: Any) -> Any:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * scale

    def rotate(x: Any) -> Any:  # HF's apply_rotary_pos_emb on [b, n, s, d]
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    def heads_of(x: Any, n: int) -> Any:
        return x.view(b, s, n, d).transpose(1, 2)

    cos, sin = rope_tables(s, d, 500000.0, torch.float64, torch.device("cpu"))
    x = F.embedding(ids, w["tok_embeddings.weight"])
    for i in range(2):
        pre = f"layers.{i}."
        a = rms(x, w[pre + "attention_norm.weight"])
        q = rotate(heads_of(a @ w[pre + "attn.wq.weight"].t(), heads))
        k = rotate(heads_of(a @ w[pre + "attn.wk.weight"].t(), kv_heads))
        v = heads_of(a @ w[pre + "attn.wv.weight"].t(), kv_heads)
        groups = heads // kv_heads
        o = F.scaled_dot_product_attention(q, k.repeat_interleave(groups, 1),
                                           v.repeat_interleave(groups, 1), is_causal=True)
        x = x + o.transpose(1, 2).reshape(b, s, h) @ w[pre + "attn.wo.weight"].t()
        m = rms(x, w[pre + "ffn_norm.weight"])
        gated = F.silu(m @ w[pre + "mlp.w1.weight"].t()) * (m @ w[pre + "mlp.w3.weight"].t())
        x = x + gated @ w[pre + "mlp.w2.weight"].t()
    (x * probe).sum().backward()
    assert (out - x).abs().max().item() < 1e-10
    for name, p in stage.named_parameters():
        ref = w[name].grad
        assert (p.grad - ref).abs().max().item() <= 1e-10 * ref.abs().max().item(), name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Run = tuple[dict[str, Any], list[dict]]


_RESULTS: dict[str, Run] = {}


def run_layout(name: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Plan configuration ``name`` and train it on 4 gloo processes, once a
    session (~13 s on 2 cores)."""
    if name in _RESULTS:
        return _RESULTS[name]
    if memwall_binary() is None:
        pytest.skip("no memwall binary (MEMWALL_BINARY)")
    if why_no_gloo():
        pytest.skip(why_no_gloo())
    tmp = tmp_path_factory.mktemp(f"torch_layout_{name}")
    layout = plan_layout(tmp, RUNS[name])
    report = tmp / "report"
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=str(PYTHON_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node",
           "4", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           "-m", "memwall.parallel", str(tmp / "layout" / "layout.json"), "--backend", "gloo",
           "--device", "cpu", "--steps", "3", "--report", str(report)]
    done = subprocess.run(cmd, cwd=PYTHON_DIR, env=env, capture_output=True, text=True,
                          timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((report / f"rank{r}.json").read_text()) for r in range(4)]
    _RESULTS[name] = (layout, ranks)
    return _RESULTS[name]


@pytest.fixture(scope="module", params=list(RUNS))
def run_4_ranks(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_layout(request.param, tmp_path_factory)


def test_ranks_are_megatron_ordered(run_4_ranks: Run) -> None:
    _, ranks = run_4_ranks
    assert [(r["stage"], r["tensor_parallel_rank"]) for r in ranks] == \
        [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_states_match_the_prediction(run_4_ranks: Run) -> None:
    layout, ranks = run_4_ranks
    for r in ranks:
        predicted = layout["devices"][r["stage"]]["states_bytes"]
        # Adam's one-element step counters (4 B a tensor) are not in memwall's states.
        assert 0 <= r["measured_states_bytes"] - predicted <= 4 * 32, r


def test_losses_are_finite(run_4_ranks: Run) -> None:
    _, ranks = run_4_ranks
    last = [r for r in ranks if r["stage"] == 1]
    assert all(len(r["losses"]) == 3 * 4 for r in last)
    assert all(math.isfinite(x) and 0 < x < 20 for r in last for x in r["losses"])


def test_the_layout_is_the_one_planned(run_4_ranks: Run) -> None:
    layout, ranks = run_4_ranks
    assert layout["engine"] == "torch" and layout["tensor_parallel"] == 2
    recv = [r["receive_buffers_bytes"] for r in ranks]
    # Stages exchange [b, s/t, h] under sequence parallelism: half the buffers.
    assert recv == [d["engine_buffers_bytes"] for d in layout["devices"] for _ in range(2)]


# memwall predicts the layout as torch.distributed.pipelining keeps memory
# (Note [Pipeline engines] in src/sim/pipeline_chunks.cc): its M receive
# buffers a stage and its cached stage outputs. docs/torch-layout.md
# accounts for what remains, rank by rank.
def test_peaks_within_3_percent(run_4_ranks: Run) -> None:
    layout, ranks = run_4_ranks
    for r in ranks:
        predicted = layout["devices"][r["stage"]]["peak_bytes"]
        assert abs(r["measured_peak_bytes"] / predicted - 1) <= 0.03, r


def test_sequence_parallelism_is_the_same_computation(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Llama has no dropout: with and without sequence parallelism the 12
    losses (3 steps, Adam updates between) agree to fp32 rounding."""
    runs = {name: [x for r in run_layout(name, tmp_path_factory)[1] if r["stage"] == 1
                   for x in r["losses"]] for name in ("llama", "llama-sp")}
    assert len(runs["llama"]) == len(runs["llama-sp"]) == 2 * 12
    assert max(abs(a - b) for a, b in zip(runs["llama"], runs["llama-sp"])) < 1e-4
