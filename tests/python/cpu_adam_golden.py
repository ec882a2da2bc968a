# Golden values for memwall's CPU optimizer step (tests/runtime/
# cpu_optimizer_test.cc): torch.optim.AdamW and torch.optim.SGD with
# foreach=False, three steps on small CPU tensors, printed as one JSON
# object whose floats are their IEEE bit patterns (uint32, and uint16 for
# the bf16/fp16 copies), so that nothing is lost in decimal.
#
# Each AdamW case is run twice: with torch as it is, and with
# Tensor.sqrt replaced by numpy's correctly rounded one. torch's CPU sqrt
# is MKL's vsSqrt, which is 1 ulp low for about 0.6% of float inputs
# (docs/runtime.md), so only the second run can match bit for bit.
#
# usage: python cpu_adam_golden.py SEED   (exit code 77: no torch)
import json
import sys

try:
    import numpy as np
    import torch
except ImportError:
    sys.exit(77)

STEPS = 3

ADAMW_CASES = [
    dict(n=37, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, maximize=False),
    dict(n=1000, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, maximize=False),
    # 1 - beta1 >= 0.5: the other branch of ATen's lerp.
    dict(n=129, lr=3e-2, betas=(0.3, 0.99), eps=1e-6, weight_decay=0.0, maximize=True),
]

SGD_CASES = [
    dict(n=37, lr=1e-2, momentum=0.9, dampening=0.1, weight_decay=1e-2, nesterov=False, maximize=False),
    dict(n=1000, lr=5e-2, momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=True, maximize=False),
    dict(n=129, lr=1e-1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=True),
]


def bits(t):
    return t.detach().contiguous().view(torch.int32).numpy().astype(np.uint32).tolist()


def bits16(t):
    return t.detach().contiguous().view(torch.int16).numpy().astype(np.uint16).tolist()


def exact_sqrt(self):
    # numpy's float32 sqrt is the instruction, correctly rounded.
    return torch.from_numpy(np.sqrt(self.detach().numpy()))


def run(make_optimizer, n, gen, state_keys):
    param0 = torch.randn(n, generator=gen)
    grads = [torch.randn(n, generator=gen) for _ in range(STEPS)]
    p = param0.clone().requires_grad_(True)
    opt = make_optimizer([p])
    for g in grads:
        p.grad = g.clone()
        opt.step()
    state = opt.state[p]
    out = {"param": bits(p)}
    for key in state_keys:
        out[key] = bits(state[key])
    out["bf16"] = bits16(p.detach().to(torch.bfloat16))
    out["fp16"] = bits16(p.detach().half())
    return {"param0": bits(param0), "grads": [bits(g) for g in grads]}, out


def main():
    seed = int(sys.argv[1])
    torch.set_num_threads(1)
    cases = []
    for c in ADAMW_CASES:
        def make(params, c=c):
            return torch.optim.AdamW(params, lr=c["lr"], betas=c["betas"], eps=c["eps"],
                                     weight_decay=c["weight_decay"], maximize=c["maximize"],
                                     foreach=False)
        keys = ["exp_avg", "exp_avg_sq"]
        inputs, torch_out = run(make, c["n"], torch.Generator().manual_seed(seed), keys)
        original = torch.Tensor.sqrt
        torch.Tensor.sqrt = exact_sqrt
        try:
            _, exact_out = run(make, c["n"], torch.Generator().manual_seed(seed), keys)
        finally:
            torch.Tensor.sqrt = original
        cases.append({"optimizer": "adamw", "config": c, **inputs, "torch": torch_out,
                      "exact_sqrt": exact_out})
    for c in SGD_CASES:
        def make(params, c=c):
            return torch.optim.SGD(params, lr=c["lr"], momentum=c["momentum"],
                                   dampening=c["dampening"], weight_decay=c["weight_decay"],
                                   nesterov=c["nesterov"], maximize=c["maximize"], foreach=False)
        keys = ["momentum_buffer"] if c["momentum"] != 0 else []
        inputs, torch_out = run(make, c["n"], torch.Generator().manual_seed(seed), keys)
        cases.append({"optimizer": "sgd", "config": c, **inputs, "torch": torch_out})
    json.dump({"torch": torch.__version__, "steps": STEPS, "cases": cases}, sys.stdout)


if __name__ == "__main__":
    main()
