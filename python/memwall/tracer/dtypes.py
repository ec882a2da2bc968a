"""dtypes: memwall's names (include/memwall/graph/types.h)."""
from __future__ import annotations

import torch

from memwall.errors import fail

DTYPES: dict[torch.dtype, str] = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}
# FlashAttention's RNG seed and offset are uint64 scalars: the graph
# has no unsigned 64-bit type, and the bytes are what it needs of them.
if hasattr(torch, "uint64"):
    DTYPES[torch.uint64] = "int64"


def dtype_name(dtype: torch.dtype) -> str:
    """memwall's name of a torch dtype ("fp32", "bf16", "int64", ...).

    memwall's graph has no int16/complex buffers; those are rare enough in
    training that naming them in a clear error beats guessing a layout."""
    if dtype not in DTYPES:
        fail(f"tensors of dtype {dtype} are not supported by memwall.graph/1")
    return DTYPES[dtype]
