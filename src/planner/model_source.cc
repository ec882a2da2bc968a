// A step's graph from a model name or a file (model_source.h).
#include "memwall/planner/model_source.h"

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/parse_values.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

// Zero or negative sizes are refused here: inside ModelOptions 0 means
// "the model's default", which a user typing 0 did not ask for.
int64_t positive(const std::optional<std::string>& value, const char* flag) {
  return value ? parse_count(*value, flag) : 0;
}

}  // namespace

double parse_lora_alpha(const std::string& text) {
  char* end = nullptr;
  const double alpha = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(alpha > 0) || !std::isfinite(alpha)) {
    fail("--lora-alpha must be a positive number (got '{}')", text);
  }
  return alpha;
}

void apply_profile_kernels(const Hardware& hw, Graph& graph, std::vector<std::string>& notes) {
  if (hw.kernel_seconds.empty()) return;
  if (apply_kernel_times(hw, graph) == 0) {
    notes.push_back(
        fmt::format("the profile's {} measured kernels match none of graph \"{}\"'s ops (it was "
                    "calibrated with other graphs): its ops keep the roofline",
                    hw.kernel_seconds.size(), graph.name));
  }
}

std::string graph_text_for(const Hardware& hw, const Graph& graph) {
  if (hw.kernel_seconds.empty()) return graph_to_json_text(graph);
  Graph copy = graph;
  clear_kernel_times(hw, copy);
  return graph_to_json_text(copy);
}

Graph load_model_graph(const ModelSource& source, const Hardware& hw,
                       std::vector<std::string>& notes) {
  const ModelSource& s = source;
  if (!s.graph_file.empty()) {
    // A graph file fixes all of these; taking them silently would answer
    // for something else than the user asked.
    const bool zoo_options = s.batch || s.seq || s.image || s.flash || s.forward_only ||
                             s.lora_rank || s.lora_targets || s.lora_alpha || s.qlora ||
                             s.eager_kernels || s.model_given || s.dtype_given ||
                             s.optimizer_given || s.tensor_parallel || s.sequence_parallel ||
                             s.expert_parallel || s.context_parallel || s.shape;
    if (zoo_options) {
      fail(
          "--model, --batch, --seq, --image, --dtype, --optimizer, --flash, --forward-only, "
          "--eager-kernels, --tensor-parallel, --sequence-parallel, --expert-parallel, "
          "--context-parallel, --shape and the "
          "LoRA options build a "
          "zoo model; they do not apply to --graph {}",
          s.graph_file);
    }
    Graph graph = read_graph_file(s.graph_file);
    apply_profile_kernels(hw, graph, notes);
    if (const OpId op = first_op_not_computable(hw, graph); op != kNoOp) {
      const Op& o = graph.ops[op];
      fail("{}: op {} ({}) computes in {}, which {} cannot (it computes in {})", s.graph_file, op,
           o.name, to_string(op_compute_dtype(graph, o)), hw.name, float_dtypes_of(hw));
    }
    return graph;
  }
  const ModelOptions options = zoo_model_options(s, hw, notes);
  try {
    Graph g = build_model(s.model, options);
    validate(g);  // the zoo's graphs are checked like any input
    return g;
  } catch (const Error& e) {
    // Sizes beyond 2^62 come from deep inside a builder: say which model.
    if (std::string_view(e.what()).starts_with("model ")) throw;
    fail("model {} at batch {}: {}", s.model,
         options.batch > 0 ? options.batch : find_model(s.model).default_batch, e.what());
  }
}

ModelShape parse_model_shape(const std::string& text) {
  ModelShape shape;
  const std::pair<const char*, int64_t ModelShape::*> keys[] = {
      {"layers", &ModelShape::layers},   {"hidden", &ModelShape::hidden},
      {"heads", &ModelShape::heads},     {"kv_heads", &ModelShape::kv_heads},
      {"ffn", &ModelShape::ffn},         {"vocab", &ModelShape::vocab},
      {"positions", &ModelShape::positions}};
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string part = text.substr(start, end - start);
    const size_t eq = part.find('=');
    const std::string key = part.substr(0, eq);
    const auto it = std::find_if(std::begin(keys), std::end(keys),
                                 [&](const auto& k) { return key == k.first; });
    if (eq == std::string::npos || it == std::end(keys)) {
      fail("--shape: '{}' is not KEY=COUNT with KEY one of layers, hidden, heads, kv_heads, ffn, "
           "vocab, positions",
           part);
    }
    int64_t& value = shape.*(it->second);
    if (value != 0) fail("--shape: {} is given twice", key);
    value = parse_count(part.substr(eq + 1), "--shape");
    start = end + 1;
  }
  return shape;
}

ModelOptions zoo_model_options(const ModelSource& source, const Hardware& hw,
                               std::vector<std::string>& notes) {
  const ModelSource& s = source;
  if (!s.graph_file.empty()) fail("this needs a zoo model (--model), not --graph");
  ModelOptions opts;
  opts.batch = positive(s.batch, "--batch");
  opts.seq = positive(s.seq, "--seq");
  opts.image = positive(s.image, "--image");
  // nf4: the blocks' frozen weights in NF4, the math in the default
  // mixed precision (bf16, or fp16 below).
  const bool nf4 = s.qlora || s.dtype == "nf4";
  opts.precision = s.dtype == "nf4" ? Precision::kBf16 : parse_precision(s.dtype);
  if (nf4) opts.base_weights = WeightFormat::kNf4;
  if (s.lora_rank) {
    opts.lora.rank = parse_count(*s.lora_rank, "--lora");
  } else if (s.qlora) {
    opts.lora.rank = 64;
  } else if (s.lora_targets || s.lora_alpha) {
    fail("--lora-targets and --lora-alpha need --lora R (or --qlora)");
  }
  if (s.qlora) {
    opts.lora.targets = lora_target_names();
    opts.lora.alpha = 16;
  }
  if (s.lora_targets) opts.lora.targets = parse_lora_targets(*s.lora_targets);
  if (s.lora_alpha) opts.lora.alpha = parse_lora_alpha(*s.lora_alpha);
  opts.optimizer = parse_optimizer(s.optimizer);
  opts.flash = s.flash;
  opts.eager_kernels = s.eager_kernels;
  if (s.tensor_parallel)
    opts.tensor_parallel = parse_count(*s.tensor_parallel, "--tensor-parallel");
  if (s.expert_parallel) {
    opts.expert_parallel = parse_count(*s.expert_parallel, "--expert-parallel");
  }
  if (s.context_parallel) {
    opts.context_parallel = parse_count(*s.context_parallel, "--context-parallel");
  }
  if (s.shape) opts.shape = parse_model_shape(*s.shape);
  opts.sequence_parallel = s.sequence_parallel;
  opts.forward_only = s.forward_only;
  if (s.forward_only && s.optimizer_given) {
    fail("--optimizer {} does not apply to --forward-only, which has no optimizer step",
         s.optimizer);
  }
  const DType math = compute_dtype(opts.precision);
  if (!computes_in(hw, math)) {
    const bool chosen = s.dtype_given && s.dtype != "nf4";
    if (chosen || !computes_in(hw, DType::kF16)) {
      fail("--dtype {}: {} cannot compute in {} (it computes in {})", s.dtype, hw.name,
           to_string(math), float_dtypes_of(hw));
    }
    // The default is bf16; on a GPU without it, mixed precision is fp16.
    opts.precision = Precision::kFp16;
    notes.push_back(fmt::format(
        "{} has no bf16 arithmetic: using fp16 mixed precision (--dtype to choose)", hw.name));
  }
  return opts;
}

}  // namespace memwall
