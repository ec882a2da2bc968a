"""Value files: raw bytes and their JSON index.

Note [Run inputs]
~~~~~~~~~~~~~~~~~
`python -m memwall --values DIR --steps N --seed S` traces the step on real
CPU tensors after torch.manual_seed(S) and writes DIR/graph.json and:
  state.json + state.bin   the bytes of every buffer that exists before
                           the first op (parameters, optimizer states,
                           running statistics, the batch, constants) as
                           the traced step found them, and the CPU
                           generator's state then;
  eager.json + eager.bin   the losses of N plain eager steps on the same
                           batch (the traced step is the first) and the
                           bytes of every parameter and optimizer state
                           after them.
Index files: {"buffers": [{"id", "name", "offset", "bytes"}], ...}; ids
and names are the graph's (memwall's rewrites renumber buffers but keep
their names). state.json's other fields: "seed", "rng" (where state.bin
holds the generator's state: {"offset", "bytes"}), "torch", and on the
CPU "threads" (and "ranks" with --ranks).

With `--device cuda` (memwall/tracer/devices.py) the model is built on the
CPU as above, then moved to cuda:0, and the traced step and eager's steps
run there under deterministic settings (CUBLAS_WORKSPACE_CONFIG
":4096:8" unless set, torch.use_deterministic_algorithms(True), no cuDNN
benchmark). Every file is the same but for what is the device's:
  - the bytes are the storages' on the GPU, read back to the host;
  - the rng blob is the CUDA default generator's state
    (torch.cuda.get_rng_state(0)): 16 bytes, the seed (uint64) then the
    philox offset (int64), little-endian, as at the traced step's start;
  - state.json says "rng_device": "cuda" and has no "threads"; without
    "rng_device" (the CPU's files) the blob is the CPU generator's;
  - the graph's meta says "device": "cuda", "kernels": "cuda" and "gpu"
    (torch.cuda.get_device_name), with no "threads".
Buffers keep no device: a storage torch itself keeps on the CPU (a
torch.optim step count outside capturable or fused mode) is one like the
others. --ranks > 1 is refused there (the data-parallel reference runs on
the CPU only).
"""
from __future__ import annotations

import ctypes
import json
import os
from typing import Any

import torch


def storage_bytes(storage: torch.UntypedStorage) -> bytes:
    """A storage's bytes, copied to the host: a device storage's through a
    CPU copy first (its data_ptr is no host address)."""
    if not storage.nbytes():
        return b""
    if storage.device.type != "cpu":
        # An explicit CPU device: a torch.device context (devices.running_on)
        # must not send the copy back to the GPU.
        host = torch.empty(storage.nbytes(), dtype=torch.uint8, device="cpu").untyped_storage()
        host.copy_(storage)
        storage = host
    return ctypes.string_at(storage.data_ptr(), storage.nbytes())


class ValueFile:
    """A .bin file of buffers' bytes, written through PATH.tmp, and its index."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tmp = f"{path}.tmp"
        self.f = open(self.tmp, "wb")
        self.offset = 0
        self.entries: list[dict[str, Any]] = []

    def add(self, buffer_id: int, data: bytes, name: str) -> None:
        """Appends one buffer's bytes under its graph id and name."""
        self.entries.append({"id": buffer_id, "name": name, "offset": self.offset,
                             "bytes": len(data)})
        self.f.write(data)
        self.offset += len(data)

    def add_blob(self, data: bytes) -> dict[str, int]:
        """Appends bytes that are no buffer's; returns where they are."""
        start = self.offset
        self.f.write(data)
        self.offset += len(data)
        return {"offset": start, "bytes": len(data)}

    def close(self, index_path: str, extra: dict[str, Any]) -> None:
        """Puts the .bin file in place and writes its index: `extra`'s fields,
        then "buffers"."""
        self.f.close()
        os.replace(self.tmp, self.path)
        index = dict(extra)
        index["buffers"] = self.entries
        with open(f"{index_path}.tmp", "w") as f:
            json.dump(index, f)
        os.replace(f"{index_path}.tmp", index_path)
