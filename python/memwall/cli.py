"""The tracer's command line: records one training iteration (forward, loss,
backward, optimizer step) op by op and writes it as a memwall.graph/1 JSON
graph. `memwall trace` embeds this package in its binary and runs it with
torch 2.x, in memwall's Python environment (python/requirements.txt, made
by scripts/install-deps.sh --torch) unless the user names another
interpreter; docs/trace.md explains every rule applied.

    python -m memwall --torchvision resnet50 --batch 32 [--image 224] --out g.json
    python -m memwall --script my_model.py:build --out g.json
    python -m memwall --hf llama2-7b [--seq 512] [--dtype bf16] [--lora 8] --out g.json
    python -m memwall --builtin gpt-mini --values DIR [--steps 3] [--ranks 2]
    python -m memwall --builtin gpt-mini --values DIR --device cuda
    python -m memwall --sweep DIR --batch 8        (every torchvision classifier)
    python -m memwall --calibrate [--quick]

Bad input ends with one line "memwall-trace: error: <message>" on stderr and
exit code 2; the C++ side forwards that line.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from memwall.errors import ERROR_PREFIX, TraceError, fail, first_line

if TYPE_CHECKING:
    import torch

    from memwall.sources import Build
    from memwall.tracer.trace import Traced


def _torch_missing(error: str) -> str:
    return (f"PyTorch is not installed for {sys.executable} ({error}; "
            "scripts/install-deps.sh --torch makes memwall's environment with torch and "
            "torchvision, or point --python or MEMWALL_PYTHON at an interpreter that has them)")


def parser() -> argparse.ArgumentParser:
    """The tracer's options."""
    from memwall.sources.builtin import BUILTINS as BUILTIN_MODELS
    from memwall.sources.hf_configs import BUILTINS as HF_MODELS
    p = argparse.ArgumentParser(prog="python -m memwall")
    p.add_argument("--torchvision")
    p.add_argument("--script")
    p.add_argument("--sweep")
    p.add_argument("--only", help="--sweep: these comma-separated models only")
    p.add_argument("--batch", type=int, help="default 32; 1 with --hf")
    p.add_argument("--image", type=int)
    p.add_argument("--optimizer", help="default adam; adamw with --hf")
    p.add_argument("--hf", help="a Hugging Face model built from its configuration: "
                   + ", ".join(HF_MODELS))
    p.add_argument("--hf-config", help="a transformers config.json (with model_type)")
    p.add_argument("--seq", type=int, default=512, help="--hf: sequence length")
    p.add_argument("--dtype", default="bf16", help="--hf: fp32, or bf16/fp16 mixed "
                   "precision (16-bit model, fp32 master weights and optimizer states)")
    p.add_argument("--lora", type=int, help="--hf: LoRA adapters of this rank")
    p.add_argument("--lora-targets", default="q,v", help="--lora: q,k,v,o,gate,up,down "
                   "or all-linear")
    p.add_argument("--lora-alpha", type=float, default=8.0, help="--lora: alpha (peft's 8)")
    p.add_argument("--measure", action="store_true")
    p.add_argument("--kernels", choices=["cuda", "cpu"])
    p.add_argument("--builtin", help="a model of memwall's fidelity set: "
                   + ", ".join(BUILTIN_MODELS))
    p.add_argument("--threads", type=int, help="torch.set_num_threads before tracing")
    p.add_argument("--calibrate", action="store_true",
                   help="measure the compute device (memwall calibrate) and print JSON")
    p.add_argument("--quick", action="store_true", help="--calibrate: small sizes")
    p.add_argument("--measure-peak", help="also run the step for real (on the CPU under the "
                   "profiler's allocator records; with --kernels cuda on the GPU, by the CUDA "
                   "caching allocator's peak) and write the measured peak here")
    p.add_argument("--values", help="trace on real tensors (of --device) and write the "
                   "graph, the values the step starts from and eager's results to this "
                   "directory (Note [Run inputs] in memwall/values/files.py)")
    p.add_argument("--device", choices=["cpu", "cuda"], help="--values: the device the "
                   "step and eager's steps run on (default cpu; cuda: the GPU's kernels, "
                   "deterministic, memwall/tracer/devices.py)")
    p.add_argument("--steps", type=int, default=3, help="--values: eager steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ranks", type=int, default=1, help="--values: the eager reference "
                   "over this many data-parallel ranks (Note [Data-parallel reference])")
    p.add_argument("--out")
    return p


def main(argv: list[str]) -> int:
    """The tracer's work for `argv`; raises TraceError on bad input."""
    args = parser().parse_args(argv)
    global _USER_SCRIPT
    _USER_SCRIPT = args.script.rpartition(":")[0] if args.script else None
    import torch

    from memwall.sources.builtin import BUILTINS
    from memwall.sources.script import build_script
    from memwall.sources.vision import build_torchvision, default_image
    from memwall.tracer.devices import real_device
    from memwall.tracer.graph_writer import graph_name, write_json
    from memwall.tracer.trace import run_one

    hf = args.hf is not None or args.hf_config is not None
    args.batch = args.batch if args.batch is not None else (1 if hf else 32)
    args.optimizer = args.optimizer or ("adamw" if hf else "adam")
    if args.batch <= 0 or (args.image is not None and args.image <= 0):
        fail("--batch and --image must be positive")
    if args.measure and args.kernels == "cuda":
        fail("--measure runs the CPU's kernels; --kernels cuda needs the meta-device trace")
    if args.device is not None and not args.values:
        fail("--device needs --values (a trace without values runs on the meta device; "
             "--kernels names whose kernels it stands for)")
    device_name = args.device or "cpu"
    if args.values and args.measure:
        fail("--values runs the step on real tensors for its values, not measured "
             "(no --measure)")
    if args.values and args.kernels not in (None, device_name):
        fail(f"--values runs the kernels of --device {device_name} on real tensors, not "
             f"--kernels {args.kernels}")
    if args.ranks > 1 and device_name != "cpu":
        fail(f"--ranks {args.ranks} with --device {device_name}: the data-parallel reference "
             "runs on the CPU only (not supported yet)")
    args.kernels = args.kernels or ("cpu" if args.measure or args.values else "cuda")
    if args.threads is not None:
        if args.threads <= 0:
            fail("--threads must be positive")
        torch.set_num_threads(args.threads)
    if args.steps <= 0:
        fail("--steps must be positive")
    if args.ranks <= 0:
        fail("--ranks must be positive")
    if args.ranks > 1 and not args.values:
        fail("--ranks needs --values")
    # Before anything touches CUDA (torch.manual_seed seeds its generators).
    device = real_device(device_name)
    torch.manual_seed(args.seed)
    if args.calibrate:
        from memwall.calibrate import measure
        try:
            print(json.dumps(measure(args.quick)))
        except Exception as e:
            fail(f"calibration failed: {type(e).__name__}: {first_line(e)}")
        return 0
    if args.sweep:
        return sweep(args)
    if not args.out and not args.values:
        fail("--out is required")
    values = bool(args.values)
    if args.values:
        os.makedirs(args.values, exist_ok=True)
    traced: Traced
    if args.torchvision:
        args.image = args.image or default_image(args.torchvision)
        meta = {"model": args.torchvision, "batch": args.batch, "image": args.image,
                "optimizer": args.optimizer}

        def build() -> Any:
            return build_torchvision(args.torchvision, args.batch, args.image, args.optimizer)

        traced = run_one(args.torchvision, meta, args.measure, build, args.kernels,
                         values=values, device=device)
        graph = traced.graph
        graph["name"] = graph_name(args.torchvision, graph["meta"])
        graph["meta"]["origin"] = {"torchvision": args.torchvision, "batch": args.batch,
                                   "image": args.image, "optimizer": args.optimizer}
    elif hf:
        traced, build = trace_hf(args, values, device)
    elif args.builtin:
        if args.builtin not in BUILTINS:
            fail(f"unknown built-in model '{args.builtin}' (known: {', '.join(BUILTINS)})")
        build = BUILTINS[args.builtin]
        traced = run_one(args.builtin, {"model": args.builtin}, args.measure, build,
                         args.kernels, values=values, device=device)
        graph = traced.graph
        graph["name"] = graph_name(args.builtin, graph["meta"])
        graph["meta"]["origin"] = {"builtin": args.builtin}
    elif args.script:
        path, _, function = args.script.rpartition(":")
        name = os.path.splitext(os.path.basename(path))[0]

        def build() -> Any:
            return build_script(args.script)

        traced = run_one(args.script, {"model": name, "function": function}, args.measure,
                         build, args.kernels, values=values, device=device)
        graph = traced.graph
        graph["name"] = graph_name(name, graph["meta"], function)
        graph["meta"]["origin"] = {"script": f"{os.path.abspath(path)}:{function}"}
    else:
        fail("give --torchvision NAME, --builtin NAME, --hf NAME, --hf-config FILE or "
             "--script FILE.py:FUNCTION")
    if traced.step is not None:
        from memwall.values.reference import write_values
        write_values(traced.graph, traced.step, args.steps, args.seed, args.values, args.ranks)
        return 0
    write_json(traced.graph, args.out)
    if args.measure_peak:
        from memwall.fidelity import measure_real_step
        measured = measure_real_step(build, "cuda" if args.kernels == "cuda" else "cpu")
        measured["threads"] = torch.get_num_threads()
        write_json(measured, args.measure_peak)
    return 0


def trace_hf(args: argparse.Namespace, values: bool,
             device: torch.device) -> tuple[Traced, Build]:
    """--hf NAME / --hf-config FILE (memwall.sources.hf); returns the trace
    and its build."""
    from memwall.sources.hf import Lora, builder
    from memwall.sources.hf_configs import resolve
    from memwall.tracer.graph_writer import graph_name
    from memwall.tracer.trace import run_one
    if args.hf is not None and args.hf_config is not None:
        fail("give --hf NAME or --hf-config FILE, not both")
    if args.lora is None and (args.lora_targets != "q,v" or args.lora_alpha != 8.0):
        fail("--lora-targets and --lora-alpha need --lora RANK")
    key, hf_model, model_type, cfg = resolve(args.hf, args.hf_config)
    lora = None if args.lora is None else Lora(args.lora, args.lora_alpha, args.lora_targets)
    info: dict[str, Any] = {}
    build = builder(key, model_type, cfg, args.batch, args.seq, args.dtype, args.optimizer,
                    lora, info)
    meta = {"model": key, "hf_model": hf_model, "batch": args.batch, "seq": args.seq,
            "optimizer": args.optimizer}
    traced = run_one(key, meta, args.measure, build, args.kernels, values=values,
                     device=device)
    graph = traced.graph
    graph["meta"].update(info)
    # run_one names the parameters' dtype; --dtype names the training recipe
    # (bf16: 16-bit parameters with fp32 master weights).
    graph["meta"]["dtype"] = args.dtype
    graph["name"] = graph_name(key, graph["meta"])
    # memwall run traces it again for its values: the config by its full path.
    source = hf_model if args.hf else os.path.abspath(args.hf_config)
    graph["meta"]["origin"] = {"hf" if args.hf else "hf_config": source, "batch": args.batch,
                               "seq": args.seq, "dtype": args.dtype,
                               "optimizer": args.optimizer}
    if lora is not None:
        graph["meta"]["origin"].update(lora=args.lora, lora_alpha=graph["meta"]["lora_alpha"],
                                       lora_targets=args.lora_targets)
    return traced, build


def sweep(args: argparse.Namespace) -> int:
    """Traces every torchvision classifier in this one process (one torch
    import for all); writes DIR/<name>.json and prints one line per model:
    "<name> ok <seconds>" or "<name> error <message>"."""
    from memwall.sources.vision import build_torchvision, default_image, torchvision_models
    from memwall.tracer.graph_writer import graph_name, write_json
    from memwall.tracer.trace import run_one
    os.makedirs(args.sweep, exist_ok=True)
    names = torchvision_models()
    if args.only:
        names = [n for n in args.only.split(",") if n]
    for name in names:
        start = time.perf_counter()
        image = args.image or default_image(name)
        try:
            meta = {"model": name, "batch": args.batch, "image": image,
                    "optimizer": args.optimizer}
            graph = run_one(name, meta, False, lambda: build_torchvision(
                name, args.batch, image, args.optimizer), args.kernels, calls=False).graph
            graph["name"] = graph_name(name, graph["meta"])
            write_json(graph, os.path.join(args.sweep, f"{name}.json"))
            print(f"{name} ok {time.perf_counter() - start:.2f}", flush=True)
        except Exception as e:  # one model's failure must not hide the others'
            print(f"{name} error {type(e).__name__}: {first_line(e)}", flush=True)
    return 0


# Note [A script that exits]: the user's script runs in the tracer's
# process, so a sys.exit() in it (or in its model's forward) ends the
# tracer before it writes anything, which once read as an invalid graph
# "(a tracer bug)". The SystemExit it raises is reported here as the
# script's; an os._exit() cannot be caught, and the C++ side
# (src/importers/torch_trace.cc) says the same when the process ends
# without its output or its verdict. argparse's own exits come before the
# script is known.
_USER_SCRIPT: str | None = None
_MUST_RETURN = ("its function must return (model, batch, loss_fn, optimizer) and the training "
                "step must return to the tracer")


def run(argv: list[str]) -> int:
    """main(argv) with every failure as one line on stderr and exit code 2
    (a script's sys.exit included: Note [A script that exits])."""
    try:
        import torch  # noqa: F401  the tracer's modules need it
    except ImportError as e:
        sys.stderr.write(f"{ERROR_PREFIX}{_torch_missing(str(e))}\n")
        return 2
    try:
        return main(argv)
    except SystemExit as e:
        if _USER_SCRIPT is None:
            raise
        sys.stderr.write(f"{ERROR_PREFIX}{_USER_SCRIPT}: the script called sys.exit({e.code!r}) "
                         f"before the trace was written: {_MUST_RETURN}\n")
        return 2
    except TraceError as e:
        sys.stderr.write(f"{ERROR_PREFIX}{e}\n")
        return 2
    except Exception as e:  # a tracer bug: still one line, with where it came from
        tb = traceback.extract_tb(e.__traceback__)
        where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
        sys.stderr.write(f"{ERROR_PREFIX}internal tracer error: {type(e).__name__}: "
                         f"{first_line(e)}{where}\n")
        return 2
