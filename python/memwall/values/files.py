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
their names).
"""
from __future__ import annotations

import ctypes
import json
import os
from typing import Any

import torch


def storage_bytes(storage: torch.UntypedStorage) -> bytes:
    """A CPU storage's bytes, copied."""
    return ctypes.string_at(storage.data_ptr(), storage.nbytes()) if storage.nbytes() else b""


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
