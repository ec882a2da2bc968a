"""`memwall calibrate`'s compute probe (--calibrate): achieved FLOP/s of
matmul (per dtype) and convolution, and memory bandwidth, of the compute
device torch sees (the GPU when CUDA is available, else the CPU), measured
with torch in this separate process so that memwall's core never links
libtorch. The command line prints measure()'s JSON object;
docs/cost-model.md ("Calibration")."""
from __future__ import annotations

import time
from typing import Any, Callable


def _best_seconds(fn: Callable[[], Any], sync: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: kernel selection, caches, lazy initialization
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def measure(quick: bool = False) -> dict[str, Any]:
    """Measures the compute device; `quick` uses small sizes and fewer
    repeats (tests). Returns {"device", "torch", "threads", ["name",
    "device_memory_bytes"], "matmul": {dtype: {"n", "flops_per_s"}},
    "conv2d_fp32", "memory_bytes_per_s"}."""
    import torch
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    repeats = 2 if quick else 5
    out: dict[str, Any] = {"device": "cuda" if cuda else "cpu", "torch": torch.__version__,
           "threads": torch.get_num_threads()}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        out["name"] = props.name
        out["device_memory_bytes"] = int(props.total_memory)
    # Matmul: n x n by n x n, 2 n^3 FLOPs. The CPU's half types are slow
    # without AMX/AVX512-BF16, so they get smaller sizes there.
    sizes = {"fp32": 4096, "bf16": 4096, "fp16": 4096} if cuda else \
        {"fp32": 1024, "bf16": 512, "fp16": 256}
    if quick:
        sizes = {k: max(v // 4, 64) for k, v in sizes.items()}
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    matmul = {}
    for name, n in sizes.items():
        a = torch.randn(n, n, device=device).to(dtypes[name])
        b = torch.randn(n, n, device=device).to(dtypes[name])
        if cuda and name == "fp32":
            torch.backends.cuda.matmul.allow_tf32 = False
        seconds = _best_seconds(lambda: torch.mm(a, b), sync, repeats)
        matmul[name] = {"n": n, "flops_per_s": 2.0 * n ** 3 / seconds}
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        n = sizes["fp32"]
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        seconds = _best_seconds(lambda: torch.mm(a, b), sync, repeats)
        matmul["tf32"] = {"n": n, "flops_per_s": 2.0 * n ** 3 / seconds}
        torch.backends.cuda.matmul.allow_tf32 = False
    out["matmul"] = matmul
    # Convolution: a ResNet stage's 3x3 convolution, 2 * N*Cout*H*W*Cin*9 FLOPs.
    n, c, hw = (8, 128, 28) if not quick else (2, 64, 14)
    x = torch.randn(n, c, hw, hw, device=device)
    w = torch.randn(c, c, 3, 3, device=device)
    seconds = _best_seconds(lambda: torch.nn.functional.conv2d(x, w, padding=1), sync, repeats)
    out["conv2d_fp32"] = {"shape": [n, c, hw, hw],
                          "flops_per_s": 2.0 * n * c * hw * hw * c * 9 / seconds}
    # Memory bandwidth: a copy reads and writes every byte.
    elements = (64 if quick else 256) * (1 << 20) // 4
    src = torch.empty(elements, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    seconds = _best_seconds(lambda: dst.copy_(src), sync, repeats)
    out["memory_bytes_per_s"] = 2.0 * elements * 4 / seconds
    return out
