"""memwall.Trainer's step beside eager PyTorch's, and beside the simulator's
prediction (issue 47's "Fast"), on examples/train_gpt.py's GPT:

1. keep-all (remat:keep-all: every tensor on the device): trainer.step
   against the same eager step, interleaved step by step (the order swapped
   every step) so that the machine's drift falls on both alike; medians
   after the first steps.
2. half the eager peak (auto's plan): the measured step against the plan's
   simulated iteration on a profile calibrated with the model's own kernels
   (memwall.calibrate on gpu="this").

    python bench/python/trainer_step.py [--steps 40] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import memwall  # noqa: E402
import train_gpt  # noqa: E402


def model_args() -> argparse.Namespace:
    return argparse.Namespace(seed=0, context=128, layers=4, width=256, heads=4, dropout=0.1,
                              lr=1e-3)


def eager_step(model, optimizer, x, y) -> float:
    optimizer.zero_grad(set_to_none=True)
    loss = train_gpt.lm_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def keep_all(data, steps: int, gpu: str) -> dict:
    a = model_args()
    model_e, optimizer_e = train_gpt.make_model(a)
    model_m, optimizer_m = train_gpt.make_model(a)
    trainer = memwall.Trainer(model_m, optimizer_m, loss_fn=train_gpt.lm_loss, gpu=gpu,
                              strategy="remat:keep-all")
    eager_s, trainer_s = [], []
    for step in range(steps):
        x, y = train_gpt.batch_at(data, step, 8, a.context, a.seed)
        order = ("eager", "trainer") if step % 2 == 0 else ("trainer", "eager")
        for who in order:
            start = time.perf_counter()
            if who == "eager":
                eager_step(model_e, optimizer_e, x, y)
                eager_s.append(time.perf_counter() - start)
            else:
                trainer.step((x, y)).item()
                trainer_s.append(time.perf_counter() - start)
    trainer.close()
    e, t = statistics.median(eager_s[2:]), statistics.median(trainer_s[2:])
    return {"eager_step_s": e, "trainer_step_s": t, "ratio": t / e}


def half_budget(data, steps: int, gpu: str) -> dict:
    a = model_args()
    model, optimizer = train_gpt.make_model(a)
    example = train_gpt.batch_at(data, 0, 8, a.context, a.seed)
    profile = memwall.calibrate(model, example, optimizer, train_gpt.lm_loss, gpu=gpu)
    estimate = memwall.estimate(model, example, train_gpt.lm_loss, optimizer, gpu=profile,
                                kernels="cpu")
    budget = int(estimate.eager_peak_bytes) // 2
    trainer = memwall.Trainer(model, optimizer, loss_fn=train_gpt.lm_loss, gpu=profile,
                              budget=budget)
    wall, executor = [], []
    for step in range(steps):
        x, y = train_gpt.batch_at(data, step, 8, a.context, a.seed)
        start = time.perf_counter()
        trainer.step((x, y)).item()
        wall.append(time.perf_counter() - start)
        executor.append(trainer.last_step["step_time_s"])
    predicted = trainer.plan.iteration_time_s
    trainer.close()
    measured = statistics.median(wall[2:])
    return {"budget_bytes": budget, "eager_peak_bytes": int(estimate.eager_peak_bytes),
            "measured_step_s": measured, "executor_step_s": statistics.median(executor[2:]),
            "predicted_step_s": predicted, "ratio": measured / predicted, "profile": profile}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--gpu", default="this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = train_gpt.corpus()
    result = {"threads": torch.get_num_threads(), "keep_all": keep_all(data, args.steps, args.gpu),
              "half_budget": half_budget(data, args.steps, args.gpu)}
    if args.json:
        print(json.dumps(result))
        return 0
    k, h = result["keep_all"], result["half_budget"]
    print(f"keep-all: trainer.step {k['trainer_step_s'] * 1e3:.1f} ms, eager "
          f"{k['eager_step_s'] * 1e3:.1f} ms: {k['ratio']:.3f}x")
    print(f"half the eager peak ({h['budget_bytes']:,} of {h['eager_peak_bytes']:,} B): "
          f"measured {h['measured_step_s'] * 1e3:.1f} ms, simulated "
          f"{h['predicted_step_s'] * 1e3:.1f} ms: {h['ratio']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
