// Where a step's graph comes from, as a person names it: a built-in model
// with its shape, precision, optimizer and LoRA options as typed ("4",
// "bf16", "q,v"), or a memwall.graph/1 file; and the graph it gives on a
// hardware profile. `memwall plan`, `simulate`, `inspect` (--model/--graph)
// and the Python package share it, so a model's defaults and the refusals
// of options that do not apply are one rule.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"

namespace memwall {

struct ModelSource {
  std::string model;       // a zoo name (memwall/models/zoo.h)
  std::string graph_file;  // or a graph file: then none of the rest may be given
  // Text, parsed strictly by parse_count: the user's typo is refused, not
  // saturated or read as 0 (ModelOptions' "the model's default").
  std::optional<std::string> batch, seq, image;
  std::string dtype = "bf16";  // fp32, bf16, fp16, or nf4 (QLoRA base weights)
  std::string optimizer = "adam";
  bool flash = false;
  bool forward_only = false;
  // LoRA: rank, comma-separated targets, alpha; qlora is NF4 base weights
  // with r 64 and alpha 16 on every projection unless given, as the QLoRA
  // paper trains.
  std::optional<std::string> lora_rank, lora_targets, lora_alpha;
  bool qlora = false;
  bool eager_kernels = false;
  // Megatron tensor parallelism (ModelOptions::tensor_parallel), as text
  // for parse_count, and sequence parallelism on top of it.
  std::optional<std::string> tensor_parallel;
  bool sequence_parallel = false;
  // Expert parallelism (ModelOptions::expert_parallel), as text.
  std::optional<std::string> expert_parallel;
  // Context parallelism (ModelOptions::context_parallel), as text.
  std::optional<std::string> context_parallel;
  // Another shape of a GPT-2 or Llama model (ModelOptions::shape), as
  // "layers=126,hidden=16384,heads=128,kv_heads=8,ffn=53248,vocab=128256,
  // positions=8192" (any of them; parse_model_shape).
  std::optional<std::string> shape;
  // Which of model, dtype and optimizer the user gave (not defaults): a
  // graph file refuses them, and only a dtype the user chose is an error
  // on a GPU without its arithmetic (the default falls back to fp16).
  bool model_given = false;
  bool dtype_given = false;
  bool optimizer_given = false;
};

// The zoo options of `source` for `hw`: without a dtype given, bf16, or
// fp16 on a GPU without bf16 arithmetic (with a line in `notes`). Throws
// Error naming the option (--batch, --lora, ...) on bad values, on a dtype
// `hw` cannot compute in, and when the graph comes from a file.
ModelOptions zoo_model_options(const ModelSource& source, const Hardware& hw,
                               std::vector<std::string>& notes);

// The graph of `source` for `hw`: the zoo model built and validated, or
// the file read with the profile's measured kernels applied (a note when
// none match). Throws Error on bad input: zoo options with a file, a graph
// computing in a dtype `hw` cannot.
Graph load_model_graph(const ModelSource& source, const Hardware& hw,
                       std::vector<std::string>& notes);

// The profile's measured kernels for `graph`'s ops (Note [Measured kernels]
// in hw/hardware.h), with a line in `notes` when it has some and none match.
void apply_profile_kernels(const Hardware& hw, Graph& graph, std::vector<std::string>& notes);
// The graph as a file holds it: without the profile's measured kernels.
std::string graph_text_for(const Hardware& hw, const Graph& graph);

// "layers=L,hidden=H,..." as a ModelShape: the keys layers, hidden, heads,
// kv_heads, ffn, vocab, positions, each a count at most once; throws Error
// naming --shape and the part.
ModelShape parse_model_shape(const std::string& text);

// A LoRA alpha: a positive finite number; throws Error naming --lora-alpha.
double parse_lora_alpha(const std::string& text);

}  // namespace memwall
