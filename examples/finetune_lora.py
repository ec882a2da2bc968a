"""LoRA fine-tuning of a Hugging Face model under a memwall plan, on this
machine's CPU, with a validation pass every few steps.

    python examples/finetune_lora.py                  # GPT-2 shaped, 60 steps, half the eager peak
    python examples/finetune_lora.py --check-eager    # and the same with plain PyTorch, bit for bit

The model is built from a configuration (transformers' GPT2Config, nothing
downloaded); its weights stay frozen and low-rank adapters (LoRA: Hu et
al., 2021, arXiv:2106.09685) on the attention's and MLP's projections are
trained. The data is examples/train_gpt.py's generated corpus.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import memwall  # noqa: E402
from train_gpt import add_model_options, batch_at, corpus, parse_budget, progress  # noqa: E402


class LoRA(nn.Module):
    """y = base(x) + (x A^T) B^T * alpha / r, the base frozen; B starts at
    zero, so the adapted model starts as the base."""

    def __init__(self, base: nn.Module, fan_in: int, fan_out: int, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.a = nn.Parameter(torch.empty(rank, fan_in))
        self.b = nn.Parameter(torch.zeros(fan_out, rank))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.a.t()) @ self.b.t() * self.scale


def make_model(args: argparse.Namespace) -> tuple[nn.Module, torch.optim.Optimizer]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(args.seed)
    config = GPT2Config(vocab_size=256, n_positions=args.context, n_embd=args.width,
                        n_layer=args.layers, n_head=args.heads, resid_pdrop=args.dropout,
                        embd_pdrop=args.dropout, attn_pdrop=0.0, use_cache=False,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    model.requires_grad_(False)
    for block in model.transformer.h:
        # GPT-2's projections are Conv1D: weight [in, out].
        for holder, name in ((block.attn, "c_attn"), (block.attn, "c_proj"),
                             (block.mlp, "c_fc"), (block.mlp, "c_proj")):
            conv = getattr(holder, name)
            fan_in, fan_out = conv.weight.shape
            setattr(holder, name, LoRA(conv, fan_in, fan_out, args.rank, args.alpha))
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    return model, torch.optim.AdamW(trainable, lr=args.lr)


def hf_batch(data: torch.Tensor, step: int, args: argparse.Namespace) -> Any:
    """A step's batch as the model takes it: keywords, its own loss."""
    x, y = batch_at(data, step, args.batch, args.context, args.seed)
    return ({"input_ids": x, "labels": x.clone()}, None)


def validation_loss(model: nn.Module, data: torch.Tensor, args: argparse.Namespace) -> float:
    model.eval()
    with torch.no_grad():
        inputs, _ = hf_batch(data, 10**6, args)
        loss = model(**inputs).loss.item()
    model.train()
    return loss


def digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def train(args: argparse.Namespace, data: torch.Tensor, use_memwall: bool) -> dict[str, Any]:
    model, optimizer = make_model(args)
    result: dict[str, Any] = {"losses": [], "times": [], "peaks": [], "validation": []}
    trainer = None
    if use_memwall:
        example = hf_batch(data, 0, args)
        estimate = memwall.estimate(model, example, None, optimizer, gpu=args.gpu, kernels="cpu")
        result["eager_peak"] = int(estimate.eager_peak_bytes or estimate.peak_bytes)
        result["budget"] = parse_budget(args.budget, result["eager_peak"])
        trainer = memwall.Trainer(model, optimizer, budget=result["budget"], gpu=args.gpu)
    torch.manual_seed(args.seed + 1)
    bar = progress(args.steps, args.json, "memwall" if use_memwall else "eager")
    for step in range(args.steps):
        batch = hf_batch(data, step, args)
        start = time.perf_counter()
        if trainer is not None:
            loss = trainer.step(batch).item()
            result["peaks"].append(trainer.last_step["device_peak_bytes"])
        else:
            optimizer.zero_grad(set_to_none=True)
            out = model(**batch[0])
            out.loss.backward()
            optimizer.step()
            loss = out.loss.item()
        result["times"].append(time.perf_counter() - start)
        result["losses"].append(loss)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")
        if args.eval_every and (step + 1) % args.eval_every == 0:
            result["validation"].append(validation_loss(model, data, args))
    if bar is not None:
        bar.close()
    if trainer is not None:
        result["plan"] = trainer.plan
        trainer.close()
    result["digest"] = digest(model)
    result["trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    result["parameters"] = sum(p.numel() for p in model.parameters())
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--budget", default="50%",
                        help="device bytes or a share of the eager peak (default 50%%)")
    parser.add_argument("--check-eager", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--gpu", default="l4")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--alpha", type=float, default=16.0)
    add_model_options(parser, eval_every=20)
    args = parser.parse_args()
    data = corpus()
    try:
        run = train(args, data, use_memwall=True)
    except memwall.Error as e:
        print(f"finetune_lora: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, memwall.BadInput) else 1
    eager = train(args, data, use_memwall=False) if args.check_eager else None
    median = (lambda t: statistics.median(t[1:]) if len(t) > 1 else None)
    result = {
        "losses": run["losses"], "eager_losses": eager["losses"] if eager else None,
        "validation_losses": run["validation"],
        "bitwise_equal": (run["losses"] == eager["losses"] and run["digest"] == eager["digest"]
                          and run["validation"] == eager["validation"]) if eager else None,
        "eager_peak_bytes": run["eager_peak"], "budget_bytes": run["budget"],
        "measured_peak_bytes": max(run["peaks"]), "predicted_peak_bytes": run["plan"].peak_bytes,
        "step_time_s": median(run["times"]),
        "eager_step_time_s": median(eager["times"]) if eager else None,
        "predicted_step_time_s": run["plan"].iteration_time_s,
        "trainable_parameters": run["trainable"], "parameters": run["parameters"],
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(run["plan"])
    print(f"\n{result['trainable_parameters']:,} of {result['parameters']:,} parameters trained; "
          f"device peak {result['measured_peak_bytes']:,} B measured, "
          f"{result['predicted_peak_bytes']:,} B predicted, budget {result['budget_bytes']:,} B")
    for i, v in enumerate(run["validation"]):
        line = f"validation after step {(i + 1) * args.eval_every}: {v:.6f}"
        if eager:
            line += f"   eager {eager['validation'][i]:.6f}"
        print(line)
    if eager:
        print("bitwise equal to eager PyTorch: " + ("yes" if result["bitwise_equal"] else "NO"))
        return 0 if result["bitwise_equal"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
