// The model options `memwall trace` and `memwall run` share: which model to
// trace (torchvision, a script, a Hugging Face model) and its shape,
// precision, optimizer and LoRA adapters, as the user typed them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "memwall/importers/torch_trace.h"

namespace memwall::cli {

struct TracedModel {
  std::string torchvision, script, hf, hf_config;
  // Text, parsed by parse_count (CLI11 would saturate an overflowing integer).
  std::optional<std::string> batch, image, seq, dtype, optimizer;
  std::optional<std::string> lora_rank, lora_targets, lora_alpha;

  // --torchvision, --script, --hf, --hf-config (returned, in that order) and
  // the options above.
  std::vector<CLI::Option*> add_options(CLI::App& app);
  bool hf_given() const { return !hf.empty() || !hf_config.empty(); }
  // The shape, precision, optimizer and LoRA options given, "--batch,
  // --optimizer", or "" (for a source they do not apply to).
  std::string options_given() const;
  // Fills the request's source and options (Hugging Face models default to
  // batch 1 and AdamW, as fine-tuning does); throws Error, its message after
  // `prefix`, on bad values, on options that do not apply to the source, and
  // on a --script or --hf-config file that cannot be read (before Python
  // starts).
  void apply(importers::TorchTraceRequest& request, std::string_view prefix) const;
};

}  // namespace memwall::cli
