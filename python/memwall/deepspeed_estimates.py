"""DeepSpeed's own model-state memory estimators on a model built from its
Hugging Face configuration on the meta device, for `memwall bench
published` (docs/cost-model.md, "DeepSpeed's estimators side by side").

    python -m memwall deepspeed-estimates REQUEST.json

REQUEST is a list of {"id", "config" (a config.json with model_type),
"stage" (2 or 3), "gpus_per_node", "nodes", "cpu_offload",
"offload_params"}. The answer, one JSON object on stdout, maps each id to
DeepSpeed's figures, or to {"error": why}: the parameter counts its
`model_to_params` reads from the model and the (cpu, gpu) bytes of
`estimate_zero2_model_states_mem_needs` or
`estimate_zero3_model_states_mem_needs`, the functions its
`..._all_live` estimators print, with their default buffer factor 1.5.

The counts are DeepSpeed's `model_to_params` rules, taken over here only
because they tell shared parameters apart by `p.data_ptr()`, which is 0 for
every tensor on the meta device (it would count one parameter): shared
parameters count once (by identity here), and ZeRO-3's largest layer is
the most parameters one module holds itself (recurse=False).
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

from memwall.errors import first_line


def _model(config: dict[str, Any]) -> Any:
    import torch
    from memwall.sources.hf import build_model
    cfg = {k: v for k, v in config.items() if k != "model_type"}
    with torch.device("meta"):
        return build_model("deepspeed-estimates", config["model_type"], cfg, "bf16", 1)


def _estimate(request: dict[str, Any]) -> dict[str, Any]:
    with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed logs on import
        from deepspeed.runtime.zero import stage3, stage_1_and_2
    model = _model(request["config"])
    per_node, nodes = int(request["gpus_per_node"]), int(request["nodes"])
    offload = bool(request["cpu_offload"])
    total = sum({id(p): p.numel() for p in model.parameters()}.values())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    if int(request["stage"]) == 3:
        cpu, gpu, _ = stage3.estimate_zero3_model_states_mem_needs(
            total_params=total, largest_layer_params=largest, num_gpus_per_node=per_node,
            num_nodes=nodes, cpu_offload=offload,
            cpu_offload_params=bool(request["offload_params"]), zero_init=True,
            additional_buffer_factor=1.5)
        return {"total_params": int(total), "largest_layer_params": int(largest),
                "cpu_bytes": int(cpu), "gpu_bytes": int(gpu)}
    cpu, gpu = stage_1_and_2.estimate_zero2_model_states_mem_needs(
        total_params=total, num_gpus_per_node=per_node, num_nodes=nodes, cpu_offload=offload,
        additional_buffer_factor=1.5)
    return {"total_params": int(total), "cpu_bytes": int(cpu), "gpu_bytes": int(gpu)}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("memwall: error: deepspeed-estimates takes one request file\n")
        return 2
    with open(argv[0], encoding="utf-8") as f:
        requests = json.load(f)
    answer: dict[str, Any] = {}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import deepspeed
        answer["deepspeed"] = f"deepspeed {deepspeed.__version__}"
    except Exception as e:  # not installed, or it fails to import
        answer["error"] = (f"deepspeed does not import ({first_line(e)}); "
                           "scripts/install-deps.sh --deepspeed installs it")
        print(json.dumps(answer))
        return 0
    rows: dict[str, Any] = {}
    for request in requests:
        try:
            rows[request["id"]] = _estimate(request)
        except Exception as e:  # one row's failure names itself, the others go on
            rows[request["id"]] = {"error": f"{type(e).__name__}: {first_line(e)}"}
    answer["rows"] = rows
    print(json.dumps(answer))
    return 0
