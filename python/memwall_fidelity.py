# `memwall bench fidelity`'s measurement: runs one real training step on the
# CPU under PyTorch's autograd profiler with profile_memory=True, which logs
# every allocation and free of the CPU allocator in order with the running
# total, and reports the peak and the op that reached it. memwall_trace.py
# calls it beside the meta-device trace of the same step, so that the C++
# side compares memwall's prediction with the measurement
# (docs/cost-model.md, "Fidelity").
import bisect
import json
import math
import os
import tempfile


def _torch():
    import torch
    return torch


def live_storage_bytes(tensors):
    """Bytes of the distinct storages behind `tensors` (views share one)."""
    seen = set()
    total = 0
    for t in tensors:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in seen:
            seen.add(key)
            total += storage.nbytes()
    return total


def _peak_op(events, peak_ts):
    """The outermost aten op running at `peak_ts` (the one the graph
    records: what it calls is inside it) and the autograd node around it."""
    around = [e for e in events
              if e.get("ph") == "X" and e.get("cat") == "cpu_op"
              and e["ts"] <= peak_ts <= e["ts"] + e.get("dur", 0)]
    around.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    aten = [e["name"] for e in around if e["name"].startswith("aten::")]
    node = [e["name"] for e in around
            if not e["name"].startswith(("aten::", "autograd::", "Optimizer."))]
    return (aten[0] if aten else "-"), (node[-1] if node else "")


# Top-level aten ops of the CPU run named as the graph's op types: the
# profiler sees the composite op the model called, the graph the kernel it
# dispatched to.
_GRAPH_TYPE = {
    "conv1d": "convolution", "conv2d": "convolution", "conv3d": "convolution",
    "_convolution": "convolution", "batch_norm": "native_batch_norm",
    "layer_norm": "native_layer_norm",
}


def op_scratch(events):
    """Per top-level aten op, in order: its graph op type and its scratch,
    the highest running total inside it minus the total at its end (its
    outputs included) or before it, whichever is higher
    (docs/cost-model.md, "Kernel scratch")."""
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    times = [e["ts"] for e in memory]
    totals = [e["args"].get("Total Allocated", 0) for e in memory]
    ops = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                  and e["name"].startswith("aten::")), key=lambda e: (e["ts"], -e.get("dur", 0)))
    out = []
    end = -1
    for o in ops:
        if o["ts"] < end:
            continue  # inside the previous top-level op
        end = o["ts"] + o.get("dur", 0)
        i, j = bisect.bisect_left(times, o["ts"]), bisect.bisect_right(times, end)
        scratch = 0
        if i < j:
            before = totals[i - 1] if i > 0 else 0
            scratch = max(max(totals[i:j]) - max(totals[j - 1], before), 0)
        name = o["name"][len("aten::"):]
        out.append([_GRAPH_TYPE.get(name, name), int(scratch)])
    return out


class _quiet_stderr:
    """Sends file descriptor 2 to /dev/null for a while: the profiler's
    native library logs its own start and stop there. Errors still raise."""

    def __enter__(self):
        import sys
        sys.stderr.flush()
        self.saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)
        return False


def measure_step(step, persistent):
    """Runs `step()` (one training iteration) under the profiler. Returns
    the measured peak: the bytes of `persistent()` (model states and the
    batch, alive before the step) plus the highest running total the
    allocator reported during the step, and the op at that moment."""
    torch = _torch()
    from torch.autograd.profiler import profile
    baseline = live_storage_bytes(persistent())
    with _quiet_stderr():  # the profiler's start and stop lines (and its GPU probe's)
        with profile(profile_memory=True) as prof:
            step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    peak_event = max(memory, key=lambda e: e["args"].get("Total Allocated", 0), default=None)
    if peak_event is None:
        return {"measured_peak_bytes": baseline, "baseline_bytes": baseline,
                "measured_peak_op": "-", "measured_peak_node": "", "op_scratch": [],
                "torch": torch.__version__}
    op, node = _peak_op(events, peak_event["ts"])
    return {"measured_peak_bytes": baseline + int(peak_event["args"]["Total Allocated"]),
            "baseline_bytes": baseline, "measured_peak_op": op, "measured_peak_node": node,
            "op_scratch": op_scratch(events), "torch": torch.__version__}


# ---------------------------------------------------------------------------
# Built-in models of the fidelity set (beside torchvision's classifiers)


def gpt(vocab, positions, layers, hidden, heads, batch, seq, dropout):
    """A GPT-2-shaped model (model, batch, loss_fn, optimizer): learned token
    and position embeddings, pre-LN blocks with a fused QKV projection (with
    bias), plain (not flash) causal attention with dropout on the
    probabilities, a GELU MLP of width 4h, dropout on the embeddings and both
    residual branches, a final LayerNorm and an LM head tied to the token
    embedding; cross-entropy over all b*s positions; Adam (foreach=False) in
    fp32. tests/python/gpt2_small.py builds GPT-2 small with it."""
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.ln_2 = nn.LayerNorm(hidden)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.fc_proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x, mask):
            # Scale and mask before the softmax: the scores are transient,
            # the softmax output (and its dropout) is what backward keeps.
            b, s, h = x.shape
            d = h // heads
            q, k, v = self.qkv(self.ln_1(x)).split(h, dim=2)
            q, k, v = (t.view(b, s, heads, d).transpose(1, 2) for t in (q, k, v))
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)) + mask
            probs = F.dropout(F.softmax(scores, dim=-1), dropout, self.training)
            a = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
            x = x + F.dropout(self.proj(a), dropout, self.training)
            m = self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
            return x + F.dropout(m, dropout, self.training)

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(positions, hidden)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)

        def forward(self, ids, positions):
            x = F.dropout(self.wte(ids) + self.wpe(positions), dropout, self.training)
            # One additive causal mask shared by every layer (no gradient).
            mask = torch.full((ids.shape[1], ids.shape[1]), float("-inf")).triu(1)
            for block in self.h:
                x = block(x, mask)
            return F.linear(self.ln_f(x), self.wte.weight)

    model = Gpt()
    ids = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch, seq))

    def loss_fn(logits, target):
        return F.cross_entropy(logits.view(-1, vocab), target.view(-1))

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    return model, ((ids, torch.arange(seq)), labels), loss_fn, optimizer


def gpt_mini(dropout):
    """gpt() small enough for a CPU step in seconds: 2 layers, h=128, 4
    heads, s=128, vocab 2048, batch 4."""
    return gpt(vocab=2048, positions=128, layers=2, hidden=128, heads=4, batch=4, seq=128,
               dropout=dropout)


def linear_toy():
    """Issue 20's toy: two bias-free Linear(2000, 2000), batch 16, MSE, Adam
    (foreach=False), where torch's single-tensor Adam keeps the previous
    parameter's denom alive while it allocates the next one's."""
    torch = _torch()
    nn = torch.nn
    model = nn.Sequential(nn.Linear(2000, 2000, bias=False), nn.Linear(2000, 2000, bias=False))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return model, (torch.randn(16, 2000), torch.randn(16, 2000)), torch.nn.functional.mse_loss, \
        optimizer


BUILTINS = {
    "gpt-mini": lambda: gpt_mini(0.1),
    "gpt-mini-nodropout": lambda: gpt_mini(0.0),
    "linear-toy": linear_toy,
}
