"""memwall.Trainer's ranks under torchrun (training.py): one plan for every
rank, the store the executors meet through, and the stage-3 parameters
gathered whole.

Note [Ranks under torchrun]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Under torchrun --nproc-per-node N (one host or several), each process is a
rank (RANK of WORLD_SIZE) with its own batches. Rank 0 traces and plans the
step of one rank of N in ZeRO stage `zero_stage` (stage 0: every rank holds
whole states, and gradients are averaged as torch DDP averages them) and
hands the plan to the others through torch.distributed's TCPStore at
MASTER_ADDR:MASTER_PORT (the env:// rendezvous), so that every rank runs
the same plan whatever the planner's time limit found. The executors then
meet through the same store (Note [Meeting through a TCPStore] in
src/exec/executor_comm.cc). Every rank must step with batches of the same
shapes, as DDP requires.

Note [Sharded states]
~~~~~~~~~~~~~~~~~~~~~
From ZeRO stage 1 on each rank keeps a 1/N shard of every optimizer state
of a parameter's size (Note [Shards at run time] in
src/exec/executor_comm.cc): the session starts it from its slice of the
whole state, and the optimizer's state then holds that shard (a flat tensor
of ceil(n/N) elements, the last rank's padded), as DeepSpeed's ZeRO keeps a
rank's partition. optimizer.state_dict() and Trainer.state_dict() hold the
rank's; resuming takes the same number of ranks, each from its own (or
whole states, which each rank slices). In stages 1 and 2 the parameters
stay whole on every rank.

Note [Sharded parameters]
~~~~~~~~~~~~~~~~~~~~~~~~~
ZeRO stage 3 shards the parameters themselves: between steps each Parameter
is a view of the rank's flat shard (ceil(n/N) elements), as DeepSpeed's
stage 3 keeps a partition per parameter, and the model cannot run forward
on them. ``with trainer.gathered():`` gives every parameter whole for a
validation pass or a look at the weights (an all_gather over gloo:
torch.distributed's default process group, or one made here on the ranks'
store and destroyed with the session; every rank must enter it), as copies
whose changes are not kept. Trainer.state_dict() holds whole parameters
(gathered: a collective) and the rank's optimizer shards; close() leaves
the model whole. A new batch shape first makes the model whole, then
traces it.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

from memwall.training_inputs import master_address, ranks_from_env


class Ranks:
    """This process's rank of `ranks` (None: torchrun's WORLD_SIZE) and what
    the ranks share: torch.distributed's TCPStore and, for stage 3, a
    process group."""

    def __init__(self, ranks: int | None) -> None:
        self.rank, self.ranks = ranks_from_env(ranks)
        self._store: Any = None  # torch.distributed.TCPStore, made when first needed
        self._sessions = 0  # names each session's keys in the store
        self._own_group = False  # a process group made here (gather)
        self._groups_made = 0

    def store(self) -> Any:
        from datetime import timedelta

        import torch.distributed as dist

        if self._store is None:
            address, port = master_address()
            agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
            self._store = dist.TCPStore(address, port, self.ranks,
                                        is_master=self.rank == 0 and not agent,
                                        timeout=timedelta(seconds=600), wait_for_workers=False,
                                        multi_tenant=True)
        return self._store

    def same_plan(self, plan: Any, index: int) -> Any:
        """Note [Ranks under torchrun]: rank 0's plan (`plan` there, None
        elsewhere), which every rank runs."""
        from memwall.plans import Plan

        key = f"memwall/plan{index}"
        if plan is not None:
            self.store().set(key, json.dumps({"plan": plan.plan_text, "graph": plan.graph_text,
                                              "table": plan.table, "json": plan.json,
                                              "gpu": plan.gpu}))
            return plan
        made = json.loads(self.store().get(key))
        return Plan(made["plan"], made["graph"], made["table"], made["json"], made["gpu"])

    def session_store(self) -> tuple[str, str]:
        """The store ("tcp://HOST:PORT") and key prefix the next session's
        executors meet through; ("", "") for one rank."""
        self._sessions += 1
        if self.ranks == 1:
            return "", ""
        address, port = master_address()
        return f"tcp://{address}:{port}", f"memwall/session{self._sessions - 1}/"

    def gather(self, shards: list[tuple[Any, tuple[int, ...]]]) -> list[Any]:
        """Note [Sharded parameters]: each (rank's flat shard, whole shape)
        whole, from every rank's shard; a collective."""
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            # Ours, so destroyed by end_group(): gloo's threads must not
            # outlive the interpreter (std::terminate at exit).
            prefix = f"memwall/gather{self._groups_made}/"
            dist.init_process_group("gloo", store=dist.PrefixStore(prefix, self.store()),
                                    rank=self.rank, world_size=self.ranks)
            self._groups_made += 1
            self._own_group = True
        wholes = []
        for shard, shape in shards:
            parts = [torch.empty_like(shard) for _ in range(self.ranks)]
            dist.all_gather(parts, shard.clone())
            wholes.append(torch.cat(parts)[:math.prod(shape)].view(shape).clone())
        return wholes

    def end_group(self) -> None:
        """The process group gather() made, if it made one."""
        if self._own_group:
            import torch.distributed as dist

            dist.destroy_process_group()
            self._own_group = False
