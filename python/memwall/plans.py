"""memwall.plan: how to train your model on a GPU within a memory budget,
in-process. The step is traced on the meta device as memwall.estimate
traces it; the C++ planner (memwall_core: memwall/planner/plan_to_run.h)
searches where model states live, what to recompute and what to swap,
lays the plan out in its budget and checks that it runs where ``memwall
run`` runs it, as ``memwall plan --out`` does."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from memwall.errors import BadInput
from memwall.estimates import trace_graph, profile_args


@dataclass
class Simulation:
    """A plan judged by the simulator (``print()``: ``memwall simulate``'s table)."""
    valid: bool
    iteration_time_s: float
    peak_bytes: dict[str, int]
    table: str = field(repr=False)
    json: dict[str, Any] = field(repr=False)

    def __str__(self) -> str:
        return self.table


@dataclass
class Plan:
    """A plan that runs (``print()``: ``memwall plan``'s table). ``plan_text``
    is the memwall.plan/1 file, ``graph_text`` the graph it plans (a ZeRO or
    offload rewrite of the traced step)."""
    plan_text: str = field(repr=False)
    graph_text: str = field(repr=False)
    table: str = field(repr=False)
    json: dict[str, Any] = field(repr=False)
    gpu: str | None = None  # the profile it was made on, as given (a name or a file)

    @property
    def iteration_time_s(self) -> float:
        return float(self.json["iteration_time_s"])

    @property
    def peak_bytes(self) -> int:
        return int(self.json["peak_bytes"])

    @property
    def budget_bytes(self) -> int:
        return int(self.json["budget"])

    def __str__(self) -> str:
        return self.table

    def save(self, path: str) -> None:
        """Writes the plan to `path` and its graph beside it (PATH less .json,
        then .graph.json), as ``memwall plan --out PATH`` names them: ``memwall
        simulate --graph ... --plan PATH`` and ``memwall run`` read them."""
        for target, text in ((path, self.plan_text), (graph_path(path), self.graph_text)):
            write_whole(target, text)

    def simulate(self, gpu: str | None = None) -> Simulation:
        """The plan simulated again, on the profile it was made on or on `gpu`."""
        return simulate_texts(self.graph_text, self.plan_text, gpu or self.gpu)


def simulate_texts(graph_text: str, plan_text: str, gpu: str | None = None) -> Simulation:
    """A plan file's text of a graph file's text, simulated on the plan's own
    profile or on `gpu` (``memwall simulate --graph --plan``)."""
    from memwall.native import core
    native = core()
    name, file = profile_args(gpu) if gpu else ("", "")
    try:
        text, table = native.simulate(graph_text, plan_text, name, file)
    except native.Error as e:
        raise BadInput(str(e)) from None
    j = json.loads(text)
    return Simulation(valid=j["valid"], iteration_time_s=j["iteration_time_s"],
                      peak_bytes=j["peak_bytes"], table=table, json=j)


def write_whole(target: str, text: str) -> None:
    """Writes `text` to `target` through a temporary file beside it: the file
    is whole or not there; BadInput naming it when it cannot be written."""
    temporary = f"{target}.tmp-{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, target)
    except OSError as e:
        raise BadInput(f"{target}: cannot write it ({e.strerror})") from None
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def graph_path(plan_path: str) -> str:
    """Where a plan's graph lives beside it: PATH less .json, then .graph.json."""
    stem = plan_path[:-5] if plan_path.endswith(".json") else plan_path
    return stem + ".graph.json"


def load_plan(path: str) -> Plan:
    """A plan saved by Plan.save (or ``memwall plan --out``, its graph
    written beside it), judged by the simulator on its own profile."""
    try:
        with open(path, encoding="utf-8") as f:
            plan_text = f.read()
        with open(graph_path(path), encoding="utf-8") as f:
            graph_text = f.read()
    except OSError as e:
        raise BadInput(f"{e.filename}: cannot read it ({e.strerror})") from None
    judged = simulate_texts(graph_text, plan_text)
    return Plan(plan_text, graph_text, judged.table, judged.json)


def plan(model: Any, batch: Any, loss_fn: Callable[..., Any] | None = None,
         optimizer: Any = "adamw", gpu: str = "rtx4090", budget: str | int | None = None,
         strategy: str = "auto", time_limit: float = 10.0, dtype: str | None = None,
         name: str | None = None, kernels: str = "cuda", ranks: int = 1,
         zero_stage: int | None = None) -> Plan:
    """A plan for one training step of `model` on `batch` (as memwall.estimate
    takes them, `dtype` too) on `gpu` within `budget`: bytes (an int, or "20GiB"), a
    share of the GPU's memory ("60%gpu") or of the keep-all plan's peak
    ("50%peak"); None for the GPU's memory less a framework reserve.
    `strategy`: "auto" or one single technique (vdnn, capuchin,
    zero-offload, zero-infinity, patrickstar). `optimizer` and `kernels`
    as memwall.estimates.trace_graph takes them: a plan that
    memwall.Trainer runs on the emulated device is traced for "cpu"
    kernels with the training's own optimizer. `ranks` > 1: one rank's plan
    of data-parallel training over that many ranks (ZeRO's rank graph;
    `zero_stage` 0-3, or None for the planner's choice), each rank with a
    micro-batch like `batch`. Raises BadInput with one
    line when nothing fits or the input is bad."""
    from memwall.native import core
    graph = trace_graph(model, batch, loss_fn, optimizer, name, dtype, kernels)
    native = core()
    gpu_name, gpu_file = profile_args(gpu)
    try:
        made = native.plan(json.dumps(graph, separators=(",", ":")), gpu_name, gpu_file,
                           "" if budget is None else str(budget), strategy, time_limit, True,
                           ranks, -1 if zero_stage is None else zero_stage)
    except native.Error as e:
        raise BadInput(str(e)) from None
    return Plan(made.plan_text, made.graph_text, made.table, json.loads(made.json), gpu)
