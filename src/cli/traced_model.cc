#include "traced_model.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/models/zoo.h"
#include "options.h"

namespace memwall::cli {

std::vector<CLI::Option*> TracedModel::add_options(CLI::App& app) {
  std::vector<CLI::Option*> sources = {
      app.add_option("--torchvision", torchvision,
                     "a torchvision classification model (resnet50, vgg16, ...)"),
      app.add_option("--script", script,
                     "FILE.py:FUNCTION returning (model, batch, loss_fn, optimizer)"),
      app.add_option("--hf", hf,
                     "a Hugging Face transformers model built from its configuration "
                     "(llama2-7b, llama3-8b, llama3.1-70b, mistral-7b, qwen2.5-7b, "
                     "mixtral-8x7b, gemma2-9b, gpt2, bert-base, t5-base)"),
      app.add_option("--hf-config", hf_config,
                     "your own transformers config.json (with model_type)")};
  app.add_option("--batch", batch,
                 "batch size for --torchvision (default 32) and --hf (default 1)");
  app.add_option("--seq", seq, "sequence length for --hf (default 512)");
  app.add_option("--dtype", dtype,
                 "--hf: fp32, or bf16/fp16 mixed precision (16-bit model, fp32 master weights "
                 "and optimizer states; default bf16)");
  app.add_option("--lora", lora_rank,
                 "--hf: LoRA adapters of rank R (peft's semantics); the base weights are frozen");
  app.add_option("--lora-targets", lora_targets,
                 "--lora: q,k,v,o,gate,up,down or all (default q,v)");
  app.add_option("--lora-alpha", lora_alpha, "--lora: scaling numerator (default 8)");
  app.add_option("--image", image, "image side for --torchvision (default 224; inception_v3 299)");
  app.add_option("--optimizer", optimizer,
                 "optimizer for --torchvision (default adam) and --hf (default adamw): sgd, "
                 "momentum, adam, adamw");
  return sources;
}

std::string TracedModel::options_given() const {
  std::string given;
  const std::pair<const char*, bool> options[] = {{"--batch", batch.has_value()},
                                                  {"--image", image.has_value()},
                                                  {"--seq", seq.has_value()},
                                                  {"--dtype", dtype.has_value()},
                                                  {"--optimizer", optimizer.has_value()},
                                                  {"--lora", lora_rank.has_value()},
                                                  {"--lora-targets", lora_targets.has_value()},
                                                  {"--lora-alpha", lora_alpha.has_value()}};
  for (const auto& [flag, set] : options) {
    if (set) given += (given.empty() ? "" : ", ") + std::string(flag);
  }
  return given;
}

namespace {

// The files the tracer will read, checked before Python starts (its
// start and torch's import take seconds), with the tracer's own words
// (python/memwall/sources/script.py, memwall/sources/hf_configs.py resolve).
void check_readable(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  const char* why = !fs::exists(status)                 ? "no such file"
                    : fs::is_directory(status)          ? "a directory"
                    : !fs::is_regular_file(status)      ? "not a regular file"
                    : ::access(path.c_str(), R_OK) != 0 ? std::strerror(errno)
                                                        : nullptr;
  if (why != nullptr) fail("{} {}: cannot read it ({})", what, path, why);
}

void check_script(const std::string& spec) {
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    fail("--script takes FILE.py:FUNCTION, got '{}'", spec);
  }
  const std::string path = spec.substr(0, colon);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("script '{}' does not exist", path);
  check_readable(path, "--script");
}

}  // namespace

void TracedModel::apply(importers::TorchTraceRequest& request, std::string_view prefix) const {
  request.torchvision = torchvision;
  request.script = script;
  request.hf = hf;
  request.hf_config = hf_config;
  const bool from_hf = hf_given();
  if (!script.empty() && (batch || image || optimizer)) {
    fail(
        "{}--batch, --image and --optimizer do not apply to a script, which builds its own batch "
        "and optimizer",
        prefix);
  }
  if (from_hf && image) fail("{}--image applies to --torchvision models", prefix);
  if (!from_hf && (seq || dtype || lora_rank || lora_targets || lora_alpha)) {
    fail("{}--seq, --dtype and the LoRA options apply to --hf and --hf-config models", prefix);
  }
  // Hugging Face models default to one sequence and AdamW, as fine-tuning does.
  if (from_hf) request.batch = 1;
  if (batch) request.batch = parse_count(*batch, "--batch");
  if (image) request.image = parse_count(*image, "--image");
  request.optimizer = optimizer.value_or(from_hf ? "adamw" : "adam");
  (void)parse_optimizer(request.optimizer);  // reject unknown names before starting Python
  if (seq) request.seq = parse_count(*seq, "--seq");
  if (dtype) {
    (void)parse_precision(*dtype);
    request.dtype = *dtype;
  }
  if (lora_rank) {
    request.lora_rank = parse_count(*lora_rank, "--lora");
    if (lora_targets) {
      (void)parse_lora_targets(*lora_targets);
      request.lora_targets = *lora_targets == "all" ? "all-linear" : *lora_targets;
    }
    if (lora_alpha) request.lora_alpha = parse_lora_alpha(*lora_alpha);
  } else if (lora_targets || lora_alpha) {
    fail("{}--lora-targets and --lora-alpha need --lora R", prefix);
  }
  try {
    if (!script.empty()) check_script(script);
    if (!hf_config.empty()) check_readable(hf_config, "--hf-config");
  } catch (const Error& e) {
    fail("{}{}", prefix, e.what());
  }
}

}  // namespace memwall::cli
