// A pipeline plan written as what runs it under PyTorch (torch_layout.h).
//
// Note [Torch layouts]
// ~~~~~~~~~~~~~~~~~~~~
// `memwall plan --pipeline-parallel P [--tensor-parallel T] --torchrun DIR`
// writes DIR/layout.json (the plan's --json, plus the fields below) and
// DIR/torchrun.sh. On every rank `python -m memwall.parallel layout.json`
// (python/memwall/parallel.py, docs/torch-layout.md) builds the zoo model
// as PyTorch modules, splits its tensors with DTensor's parallelize_module
// and its blocks into torch.distributed.pipelining stages as the plan says,
// and trains. What it needs beyond the plan's figures:
//  - the model: its zoo name and every dimension (full_model_shape), the
//    sequence, the micro-batch, the dtype and the optimizer (the graph's
//    meta), and the vocabulary as the graph pads it (Megatron's multiple of
//    128 t: the embedding table's rows times t);
//  - per chunk the blocks [first, end) it holds, and whether it holds the
//    embedding (the first chunk) and the final norm, head and loss (the
//    last). PyTorch's pipelining runs whole modules, so a plan that cuts
//    inside a block (Tarnawski's programme may) is refused: --partition even
//    cuts only between blocks.
// Ranks are Megatron-LM's order, as the plan places them (docs/pipeline.md):
// tensor-parallel ranks fastest, then data-parallel, then pipeline, so
// global rank = stage x (D x T) + replica x T + tensor rank.
#include "memwall/planner/torch_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/layers.h"
#include "memwall/models/zoo.h"
#include "memwall/sim/pipeline_chunks.h"

namespace memwall {
namespace {

int64_t meta_int(const Graph& graph, const char* key, int64_t fallback) {
  const auto it = graph.meta.find(key);
  return it != graph.meta.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

// The options' shape as the graph's meta records the dimensions given.
ModelShape given_shape(const Graph& graph) {
  ModelShape shape;
  const auto it = graph.meta.find("shape");
  if (it == graph.meta.end() || !it->is_object()) return shape;
  const auto dim = [&](const char* key) { return it->value(key, int64_t{0}); };
  shape.layers = dim("layers");
  shape.hidden = dim("hidden");
  shape.heads = dim("heads");
  shape.kv_heads = dim("kv_heads");
  shape.ffn = dim("ffn");
  shape.vocab = dim("vocab");
  shape.positions = dim("positions");
  return shape;
}

// The padded vocabulary: the rows of the rank's embedding table times t.
int64_t padded_vocab(const Graph& graph, int64_t tensor_parallel) {
  for (const Buffer& b : graph.buffers) {
    if ((b.name == "wte.weight" || b.name == "tok_embeddings.weight") && b.shape.size() == 2) {
      return b.shape[0] * tensor_parallel;
    }
  }
  fail("torch layout: {} has no token embedding table (wte or tok_embeddings)", graph.name);
}

}  // namespace

nlohmann::json torch_layout(nlohmann::json plan_json, const Graph& graph, const Hardware& node,
                            const PipelinePlan& plan) {
  const std::string model = graph.meta.value("model", std::string());
  if (!model.starts_with("gpt2") && !model.starts_with("llama")) {
    fail("--torchrun writes the GPT-2 and Llama models of the zoo; {} is not one", graph.name);
  }
  if (plan.context_parallel > 1) {
    // PyTorch's own context parallelism (torch.distributed.tensor.
    // experimental.context_parallel) is experimental and not DTensor's
    // parallelize_module: the runner does not build it.
    fail("--torchrun: python -m memwall.parallel runs tensor, sequence and pipeline "
         "parallelism; it does not run context parallelism ({} ranks)",
         plan.context_parallel);
  }
  ModelOptions options;
  options.shape = given_shape(graph);
  const ModelShape shape = full_model_shape(model, options);
  const ChunkedGraph chunked(graph, node);
  const std::vector<int> starts = chunked.cut_points(false);  // 0, then layers 1, 2, ...
  const Layers layers = find_layers(graph);
  const auto layer_count = static_cast<int64_t>(layers.names.size());
  if (layer_count != shape.layers) {
    fail("torch layout: {} shows {} blocks where its shape has {}", graph.name, layer_count,
         shape.layers);
  }
  // Each chunk's first block: the index of its cut among the blocks' starts.
  std::vector<int64_t> first_block;
  for (size_t k = 0; k < plan.cut.size(); ++k) {
    const auto at = std::find(starts.begin(), starts.end(), plan.cut[k]);
    if (at == starts.end()) {
      fail("--torchrun: the plan cuts chunk {} inside a block (at {}), and PyTorch's pipelining "
           "runs whole blocks: give --partition even",
           k, plan.chunk_names.at(k));
    }
    first_block.push_back(at - starts.begin());
  }
  const int64_t t = plan.tensor_parallel;
  nlohmann::json fields = {
      {"format", "memwall-torch-layout/1"},
      {"model", model},
      {"shape",
       {{"layers", shape.layers},
        {"hidden", shape.hidden},
        {"heads", shape.heads},
        {"kv_heads", shape.kv_heads},
        {"ffn", shape.ffn},
        {"vocab", shape.vocab},
        {"positions", shape.positions}}},
      {"seq", meta_int(graph, "seq", 0)},
      {"micro_batch", meta_int(graph, "batch", 0)},
      {"dtype", graph.meta.value("dtype", std::string())},
      {"optimizer", graph.meta.value("optimizer", std::string())},
      {"sequence_parallel", graph.meta.value("sequence_parallel", false)},
      {"padded_vocab", padded_vocab(graph, t)},
      {"torchrun", torchrun_command(node, plan, "layout.json")}};
  nlohmann::json& chunks = plan_json.at("chunks");
  for (size_t k = 0; k < first_block.size(); ++k) {
    const int64_t end = k + 1 < first_block.size() ? first_block[k + 1] : layer_count;
    chunks.at(k)["layers"] = {first_block[k], end};
    chunks.at(k)["embedding"] = k == 0;
    chunks.at(k)["head"] = k + 1 == first_block.size();
  }
  plan_json.update(fields);
  return plan_json;
}

std::string torchrun_command(const Hardware& node, const PipelinePlan& plan,
                             const std::string& layout) {
  const int per_node = std::min(plan.gpus, std::max(node.gpus_per_node, 1));
  const int nodes = (plan.gpus + per_node - 1) / per_node;
  std::string command = fmt::format("torchrun --nnodes {} --nproc-per-node {}", nodes, per_node);
  if (nodes > 1) {
    command +=
        " --node-rank \"${NODE_RANK:-0}\" --master-addr \"${MASTER_ADDR:-127.0.0.1}\" "
        "--master-port \"${MASTER_PORT:-29500}\"";
  }
  return command + " -m memwall.parallel " + layout;
}

std::string torchrun_script(const Hardware& node, const PipelinePlan& plan) {
  return fmt::format(
      "#!/bin/sh\n"
      "# memwall plan's layout: {} pipeline stages x {} tensor-parallel x {} data-parallel "
      "ranks, {} GPUs.\n"
      "# Run it on every node (NODE_RANK=0, 1, ...; MASTER_ADDR the first node) where\n"
      "# memwall's Python package is importable; extra arguments go to memwall.parallel.\n"
      "here=$(cd \"$(dirname \"$0\")\" && pwd) || exit 1\n"
      "exec {} \"$@\"\n",
      plan.shape.devices, plan.tensor_parallel, plan.data_parallel, plan.gpus,
      torchrun_command(node, plan, "\"$here/layout.json\""));
}

}  // namespace memwall
