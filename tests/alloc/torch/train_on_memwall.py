"""A real PyTorch training run on memwall's allocator (src/alloc/torch).

Usage: $(scripts/install-deps.sh --print-python) train_on_memwall.py LIBRARY POLICY

Trains a small CNN for a few steps with PyTorch's own CPU allocator, installs
memwall's allocator with POLICY through LIBRARY (libmemwall_torch_alloc.so),
trains the same model again from the same seed, and checks that

  - the losses are bitwise equal (the allocator must not change results),
  - the second run's tensors really came from memwall (allocations counted,
    parameters and activations inside its segments),
  - its statistics are consistent: allocated <= reserved, peaks >= current,
    after the last step the snapshot's live blocks match the live count, add
    up to the allocated bytes and hold at least the parameters, gradients
    and momentum, and once the run's tensors are gone, the bytes still
    allocated are the ones allocated before it.

Exit code 77 (ctest's skip) when torch cannot be imported.
"""
import ctypes
import gc
import json
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # torch not installed: skip, saying so
    print(f"SKIP: torch is not installed for {sys.executable} ({e})")
    sys.exit(77)

STEPS = 5


def train(probe=lambda model: None):
    """Losses of STEPS steps of a small CNN with SGD + momentum, from seed 0;
    probe(model) runs after the last step, while every tensor is alive."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * 16 * 16, 10),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(32, 3, 32, 32)
    y = torch.randint(0, 10, (32,))
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    probe(model)
    return losses


def snapshot(lib):
    return json.loads(lib.memwall_torch_stats_json().decode())


def inside(address, snap):
    return any(s["address"] <= address < s["address"] + s["virtual_bytes"]
               for s in snap["segments"])


def main():
    library, policy = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)  # the same reduction order in both runs
    baseline = train()

    lib = ctypes.CDLL(library)
    lib.memwall_torch_stats_json.restype = ctypes.c_char_p
    lib.memwall_torch_last_error.restype = ctypes.c_char_p
    lib.memwall_torch_install.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
    if lib.memwall_torch_install(policy.encode(), 1 << 30) != 0:
        sys.exit(f"install failed: {lib.memwall_torch_last_error().decode()}")
    before = snapshot(lib)["stats"]

    seen = {}

    def probe(model):
        params = list(model.parameters())
        seen["snapshot"] = snapshot(lib)
        seen["addresses"] = [t.data_ptr() for p in params for t in (p, p.grad)]
        # Parameters, gradients and SGD's momentum buffers, all alive now.
        seen["state_bytes"] = 3 * sum(p.numel() * p.element_size() for p in params)

    losses = train(probe)
    during = seen["snapshot"]
    gc.collect()
    after = snapshot(lib)["stats"]

    print(f"policy {policy}: losses {losses}")
    print(f"baseline       : losses {baseline}")
    stats = during["stats"]
    print(f"stats after the last step: {json.dumps(stats)}")
    errors = []
    if losses != baseline:
        errors.append("losses differ from the run on PyTorch's allocator")
    if stats["alloc_calls"] < 10 * STEPS:
        errors.append(f"only {stats['alloc_calls']} allocations went through memwall")
    if not all(inside(a, during) for a in seen["addresses"]):
        errors.append("a parameter or gradient lies outside memwall's segments")
    if stats["allocated_bytes"] < seen["state_bytes"]:
        errors.append(f"allocated {stats['allocated_bytes']} below parameters, gradients and "
                      f"momentum ({seen['state_bytes']})")
    for s in (before, stats, after):
        if s["allocated_bytes"] > s["reserved_bytes"]:
            errors.append(f"allocated {s['allocated_bytes']} > reserved {s['reserved_bytes']}")
        if s["peak_allocated_bytes"] < s["allocated_bytes"]:
            errors.append("peak allocated below allocated")
        if s["peak_reserved_bytes"] < s["reserved_bytes"]:
            errors.append("peak reserved below reserved")
    live_blocks = [b for seg in during["segments"] for b in seg["blocks"] if b["allocated"]]
    if len(live_blocks) != stats["live_allocations"]:
        errors.append(f"{len(live_blocks)} live blocks in the snapshot, "
                      f"{stats['live_allocations']} counted")
    if sum(b["bytes"] for b in live_blocks) != stats["allocated_bytes"]:
        errors.append("the snapshot's live blocks do not add up to allocated_bytes")
    # Zero-size requests return no block and are not freed.
    if after["allocated_bytes"] != before["allocated_bytes"]:
        errors.append(f"{after['allocated_bytes'] - before['allocated_bytes']} bytes still "
                      "allocated after the run's tensors are gone")
    for e in errors:
        print(f"FAIL: {e}")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
