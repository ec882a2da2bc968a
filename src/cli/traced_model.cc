#include "traced_model.h"

#include "memwall/graph/error.h"
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

void TracedModel::apply(importers::TorchTraceRequest& request, std::string_view prefix) const {
  request.torchvision = torchvision;
  request.script = script;
  request.hf = hf;
  request.hf_config = hf_config;
  const bool from_hf = hf_given();
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
}

}  // namespace memwall::cli
