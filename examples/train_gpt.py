"""Train a small GPT from scratch under a memwall plan, on this machine's CPU.

    python examples/train_gpt.py                   # 200 steps at half the eager peak
    python examples/train_gpt.py --check-eager     # and the same with plain PyTorch
    python examples/train_gpt.py --budget 4MiB --steps 50 --json

The corpus is made here (sentences from a small grammar, byte tokens), so
nothing is downloaded. The training loop is the usual one; memwall's part
is the Trainer, which traces and plans the step at the first batch and
then runs the plan on each new batch (docs/python.md).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import memwall  # noqa: E402


# ---- The model --------------------------------------------------------------------------

class Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A GPT-2-shaped decoder: token and position embeddings, pre-norm
    blocks, a head tied to the token embedding."""

    def __init__(self, vocab: int, context: int, layers: int, width: int, heads: int,
                 dropout: float) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight
        nn.init.normal_(self.tokens.weight, std=0.02)
        nn.init.normal_(self.positions.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1])
        x = self.drop(self.tokens(idx) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


# ---- The data ---------------------------------------------------------------------------

SUBJECTS = ["the cat", "a dog", "the old sailor", "my sister", "the machine", "every child",
            "the river", "a stranger", "the teacher", "our neighbour"]
VERBS = ["sees", "finds", "remembers", "carries", "follows", "builds", "paints", "hears"]
OBJECTS = ["a red kite", "the small boat", "an open door", "the last letter", "a quiet song",
           "the long road", "a broken clock", "the green hill"]
ENDINGS = ["at night", "in the morning", "before the rain", "by the sea", "after school",
           "without a word", "again and again", "near the old bridge"]


def corpus(sentences: int = 20000, seed: int = 0) -> torch.Tensor:
    """Byte tokens of sentences from a small grammar, made the same each time."""
    rng = random.Random(seed)
    text = " ".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                    f"{rng.choice(ENDINGS)}." for _ in range(sentences))
    return torch.tensor(list(text.encode()), dtype=torch.long)


def batch_at(data: torch.Tensor, step: int, batch: int, context: int,
             seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step `step`'s batch: random windows, the same for a step whoever asks
    (a resumed run reads the batches it would have read)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(data) - context - 1, (batch,), generator=g)
    x = torch.stack([data[s:s + context] for s in starts])
    y = torch.stack([data[s + 1:s + context + 1] for s in starts])
    return x, y


# ---- Training ---------------------------------------------------------------------------

def make_model(args: argparse.Namespace) -> tuple[GPT, torch.optim.Optimizer]:
    torch.manual_seed(args.seed)
    model = GPT(256, args.context, args.layers, args.width, args.heads, args.dropout)
    if getattr(args, "dtype", "fp32") == "bf16":
        # Mixed precision: bf16 weights and activations, fp32 masters and
        # moments in the optimizer (memwall.MixedPrecision), in both runs.
        model.to(torch.bfloat16)
        optimizer: torch.optim.Optimizer = memwall.MixedPrecision(
            model.parameters(), "adamw", lr=args.lr, weight_decay=0.1)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    return model, optimizer


def lr_at(step: int, args: argparse.Namespace) -> float:
    """The learning rate of step `step` (from 0): with --schedule cosine a
    linear warm-up over --warmup steps, then a cosine decay to a tenth of
    --lr at --steps (nanoGPT's shape); a function of the step alone, so a
    resumed run sets the same rates. Set on the optimizer's groups before
    each step, memwall's Trainer follows it (Note [Tracked settings])."""
    if args.schedule == "constant":
        return args.lr
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    done = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr / 10 + 0.5 * (1 + math.cos(math.pi * min(1.0, done))) * (args.lr - args.lr / 10)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def params_digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def progress(total: int, quiet: bool, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, disable=quiet, leave=False, dynamic_ncols=True)


def train_eager(args: argparse.Namespace, data: torch.Tensor, first: int) -> dict[str, Any]:
    model, optimizer = make_model(args)
    torch.manual_seed(args.seed + 1)
    losses, times = [], []
    bar = progress(args.steps - first, args.json, "eager")
    for step in range(first, args.steps):
        x, y = batch_at(data, step, args.batch, args.context, args.seed)
        set_lr(optimizer, lr_at(step, args))
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = lm_loss(model(x), y)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
    if bar is not None:
        bar.close()
    return {"losses": losses, "times": times, "digest": params_digest(model)}


def parse_budget(text: str, eager_peak: int) -> int:
    if text.endswith("%"):
        return int(eager_peak * float(text[:-1]) / 100)
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "B": 1}
    for unit, scale in units.items():
        if text.endswith(unit):
            return int(float(text[:-len(unit)]) * scale)
    return int(text)


def train_memwall(args: argparse.Namespace, data: torch.Tensor) -> dict[str, Any]:
    model, optimizer = make_model(args)
    example = batch_at(data, 0, args.batch, args.context, args.seed)
    estimate = memwall.estimate(model, example, lm_loss, optimizer, gpu=args.gpu, kernels="cpu")
    eager_peak = int(estimate.eager_peak_bytes or estimate.peak_bytes)
    budget = parse_budget(args.budget, eager_peak)
    trainer = memwall.Trainer(model, optimizer, loss_fn=lm_loss, budget=budget, gpu=args.gpu,
                              strategy=args.strategy, nvme=args.nvme_dir)
    first = 0
    if args.resume:
        trainer.load_state_dict(torch.load(args.resume, weights_only=False))
        first = trainer.steps
    else:
        torch.manual_seed(args.seed + 1)
    last = args.stop_at if args.stop_at else args.steps
    losses, times, peaks = [], [], []
    bar = progress(last - first, args.json, "memwall")
    for step in range(first, last):
        x, y = batch_at(data, step, args.batch, args.context, args.seed)
        set_lr(optimizer, lr_at(step, args))
        start = time.perf_counter()
        loss = trainer.step((x, y))
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        peaks.append(trainer.last_step["device_peak_bytes"])
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", device=f"{peaks[-1] / 2**20:.1f}MiB")
        if args.eval_every and (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                vx, vy = batch_at(data, 10**6, args.batch, args.context, args.seed)
                validation = lm_loss(model(vx), vy).item()
            model.train()
            if not args.json:
                print(f"step {step + 1}: validation loss {validation:.4f}")
    if bar is not None:
        bar.close()
    if args.stop_at and args.checkpoint:
        torch.save(trainer.state_dict(), args.checkpoint)
    trainer.close()
    return {"losses": losses, "times": times, "peaks": peaks, "first": first,
            "digest": params_digest(model), "eager_peak": eager_peak, "budget": budget,
            "plan": trainer.plan, "params": sum(p.numel() for p in model.parameters())}


def add_model_options(parser: argparse.ArgumentParser, eval_every: int) -> None:
    """The model's shape, the data and the training's settings (both examples')."""
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=eval_every,
                        help="a validation pass every N steps (model.eval() between steps)")


def median_after_first(times: list[float]) -> float | None:
    return statistics.median(times[1:]) if len(times) > 1 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--budget", default="50%",
                        help="device bytes (4MiB, 4000000) or a share of the eager peak (50%%)")
    parser.add_argument("--check-eager", action="store_true",
                        help="train the same model with plain PyTorch and compare, bit for bit")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--gpu", default="l4", help="the profile the plan is made for "
                        "(a built-in name or memwall calibrate's file)")
    parser.add_argument("--strategy", default="auto",
                        help="auto, a single technique, or remat:NAME (remat:keep-all keeps "
                        "every tensor on the device)")
    parser.add_argument("--nvme-dir", default=None)
    add_model_options(parser, eval_every=0)
    parser.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                        help="the learning rate: warm-up then cosine decay, or --lr throughout")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up steps (cosine)")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                        help="bf16: mixed precision (memwall.MixedPrecision)")
    parser.add_argument("--stop-at", type=int, default=0,
                        help="stop after this step and save --checkpoint")
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--resume", default="", help="a --checkpoint to go on from")
    args = parser.parse_args()
    if args.stop_at and not args.checkpoint:
        parser.error("--stop-at needs --checkpoint")
    data = corpus()
    try:
        run = train_memwall(args, data)
    except memwall.Error as e:
        print(f"train_gpt: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, memwall.BadInput) else 1
    eager = train_eager(args, data, run["first"]) if args.check_eager else None
    plan = run["plan"]
    result = {
        "losses": run["losses"],
        "eager_losses": eager["losses"] if eager else None,
        "bitwise_equal": (run["losses"] == eager["losses"] and run["digest"] == eager["digest"]
                          if eager and not args.stop_at else None),
        "eager_peak_bytes": run["eager_peak"],
        "budget_bytes": run["budget"],
        "measured_peak_bytes": max(run["peaks"]) if run["peaks"] else 0,
        "predicted_peak_bytes": plan.peak_bytes,
        "step_time_s": median_after_first(run["times"]),
        "eager_step_time_s": median_after_first(eager["times"]) if eager else None,
        "predicted_step_time_s": plan.iteration_time_s,
        "params_sha256": run["digest"],
        "parameters": run["params"],
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(plan)
    print(f"\n{run['params']:,} parameters; budget {result['budget_bytes']:,} B of an eager peak "
          f"of {result['eager_peak_bytes']:,} B")
    print(f"device peak {result['measured_peak_bytes']:,} B measured, "
          f"{result['predicted_peak_bytes']:,} B predicted")
    every = max(1, len(run["losses"]) // 10)
    for i in range(0, len(run["losses"]), every):
        line = f"step {run['first'] + i + 1:4d}  loss {run['losses'][i]:.6f}"
        if eager:
            line += f"   eager {eager['losses'][i]:.6f}"
        print(line)
    if result["step_time_s"] is not None:
        print(f"step time {result['step_time_s'] * 1e3:.1f} ms (median after the first)"
              + (f", eager {result['eager_step_time_s'] * 1e3:.1f} ms" if eager else ""))
    if eager:
        print("bitwise equal to eager PyTorch: " + ("yes" if result["bitwise_equal"] else "NO"))
        return 0 if result["bitwise_equal"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
