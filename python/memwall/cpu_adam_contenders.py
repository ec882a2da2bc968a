"""The contenders of `memwall bench cpu-adam` that live in Python:
torch.optim.AdamW (foreach=True, fused=True) and DeepSpeed's
DeepSpeedCPUAdam, timed by one long-lived interpreter per thread count
(src/importers/cpu_adam_contenders.cc starts it).

    python <dir>/memwall/cpu_adam_contenders.py THREADS

One request a line on stdin ("N REPEATS none|bf16"), one JSON answer a
line on stdout: the best seconds of REPEATS AdamW steps over N fp32
parameters per contender ("<name>_error" when it failed), with a copy into
bf16 after each step when asked. The first line out says what the
interpreter has: {"torch": version, "deepspeed": ...}, or {"error": ...}.
Needs nothing of memwall but this file.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from typing import Any, Callable


def say(obj: dict[str, Any]) -> None:
    """Writes one JSON answer line."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def best_of(opt: Any, p: Any, half: Any, repeats: int) -> float:
    """The best seconds of `repeats` steps of `opt` (after one warm-up step:
    states allocated, pages touched), each followed by `half.copy_(p)` when
    `half` is not None: the second pass ZeRO-Offload makes for the device's
    copy."""
    def step() -> None:
        opt.step()
        if half is not None:
            half.copy_(p.detach())
    step()
    best = 1e30
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    return best


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, or its type's name."""
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def main(argv: list[str]) -> int:
    """Answers requests until stdin ends; argv: [THREADS]."""
    threads = int(argv[0])
    try:
        import torch
    except ImportError:
        say({"error": "torch is not importable"})
        return 0
    torch.set_num_threads(threads)
    about: dict[str, Any] = {"torch": torch.__version__}
    deepspeed_adam = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its accelerator notice
            import deepspeed
            from deepspeed.ops.adam import DeepSpeedCPUAdam
        about["deepspeed"] = "deepspeed " + deepspeed.__version__
        deepspeed_adam = DeepSpeedCPUAdam
    except Exception:
        about["deepspeed"] = ("not installed (scripts/install-deps.sh --deepspeed installs it into "
                              "memwall's environment)")
    say(about)

    for line in sys.stdin:
        n_text, repeats_text, copy = line.split()
        n, repeats = int(n_text), int(repeats_text)
        out: dict[str, Any] = {}
        makers: list[tuple[str, Callable[[Any], Any]]] = [
            ("foreach", lambda p: torch.optim.AdamW([p], lr=1e-3, foreach=True)),
            ("fused", lambda p: torch.optim.AdamW([p], lr=1e-3, fused=True))]
        if deepspeed_adam is not None:
            # AdamW mode (decoupled weight decay, as torch's AdamW); its C++ op
            # compiles on first use.
            makers.append(("deepspeed_cpu_adam", lambda p: deepspeed_adam(
                [p], lr=1e-3, weight_decay=1e-2, adamw_mode=True)))
        for name, make in makers:
            p = torch.nn.Parameter(torch.full((n,), 0.5))
            p.grad = torch.full((n,), 0.01)
            half = torch.empty(n, dtype=torch.bfloat16) if copy == "bf16" else None
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    out[name] = best_of(make(p), p, half, repeats)
            except Exception as e:
                out[name + "_error"] = first_line(e)
            del p, half
        say(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
