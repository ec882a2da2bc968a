"""The PyTorch tracer: one training iteration, op by op, as memwall.graph/1.

- ``meta_device``: builds and runs a model on the meta device (no weights);
- ``recorder``: the dispatch mode that records every aten op;
- ``step``: one training iteration (forward, loss, backward, optimizer) under it;
- ``trace``: builds a model, traces it and writes the graph's meta;
- ``devices``: the device a trace for values runs on (the CPU or a CUDA GPU);
- ``graph_writer``: the recorded iteration as memwall.graph/1 JSON;
- ``flops``, ``scratch``, ``cpu_scratch``: per-op FLOP and kernel-scratch rules;
- ``calls``: each op's call record, for ``memwall run``;
- ``dtypes``: memwall's dtype names.

Every module but ``scratch`` imports torch.
"""
