// A pipeline plan of a zoo GPT-2 or Llama written as what runs it under
// PyTorch (Note [Torch layouts] in src/planner/torch_layout.cc): the model,
// the stages' blocks, the mesh, and the torchrun command that starts
// `python -m memwall.parallel` (python/memwall/parallel.py) on every rank.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/planner/pipeline_plan.h"

namespace memwall {

// The layout file: `plan_json` (the plan's --json) with "format", "model",
// "shape" (every dimension), "seq", "micro_batch", "dtype", "optimizer",
// "sequence_parallel", "padded_vocab", "torchrun", and per chunk "layers"
// [first, end), "embedding", "head". Throws Error for a graph that is not
// a zoo GPT-2 or Llama, and for a cut inside a block (PyTorch's pipelining
// runs whole modules).
nlohmann::json torch_layout(nlohmann::json plan_json, const Graph& graph, const Hardware& node,
                            const PipelinePlan& plan);

// The torchrun command line of the plan (`layout` the layout file's path
// as the script names it).
std::string torchrun_command(const Hardware& node, const PipelinePlan& plan,
                             const std::string& layout);

// A POSIX shell script that runs torchrun_command on one node, the layout
// file beside it.
std::string torchrun_script(const Hardware& node, const PipelinePlan& plan);

}  // namespace memwall
