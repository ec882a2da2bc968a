// The zoo's registry: names, defaults and published parameter counts.
#include "memwall/models/zoo.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "architectures.h"
#include "memwall/base/error.h"

namespace memwall {
namespace {

using BuildFn = Graph (*)(std::string_view, const ModelOptions&);

struct Entry {
  ModelInfo info;
  BuildFn build;
  int64_t min_image;       // CNNs: smallest side the architecture accepts
  int64_t image_multiple;  // CNNs: side must be a multiple of this
};

// Batches past 2^24 samples are a typo, not a training configuration.
constexpr int64_t kMaxBatch = int64_t{1} << 24;
constexpr int64_t kMaxImage = int64_t{1} << 16;

ModelInfo decoder(const char* name, const char* desc, int64_t batch, int64_t seq, int64_t max_seq,
                  int64_t params) {
  return {name, desc, ModelFamily::kDecoder, batch, seq, 0, max_seq, params};
}
ModelInfo encoder(const char* name, const char* desc, int64_t batch, int64_t seq, int64_t max_seq,
                  int64_t params) {
  return {name, desc, ModelFamily::kEncoder, batch, seq, 0, max_seq, params};
}
ModelInfo with_experts(ModelInfo info, int64_t experts) {
  info.experts = experts;
  return info;
}
ModelInfo cnn(const char* name, const char* desc, int64_t batch, int64_t image, int64_t params) {
  return {name, desc, ModelFamily::kCnn, batch, 0, image, 0, params};
}

// Published parameter counts; the sources are cited where each count is
// asserted (tests/models/transformer_test.cc, tests/models/cnn_test.cc).
const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {decoder("gpt2-small", "GPT-2 124M (12 layers, h=768, 12 heads, tied head)", 8, 1024, 1024,
               124439808),
       models::build_gpt2, 0, 1},
      {decoder("gpt2-medium", "GPT-2 355M (24 layers, h=1024, 16 heads)", 8, 1024, 1024, 354823168),
       models::build_gpt2, 0, 1},
      {decoder("gpt2-large", "GPT-2 774M (36 layers, h=1280, 20 heads)", 8, 1024, 1024, 774030080),
       models::build_gpt2, 0, 1},
      {decoder("gpt2-xl", "GPT-2 1.5B (48 layers, h=1600, 25 heads)", 8, 1024, 1024, 1557611200),
       models::build_gpt2, 0, 1},
      {decoder("llama2-7b", "Llama-2 7B (32 layers, h=4096, 32 heads, SwiGLU 11008)", 1, 4096, 4096,
               6738415616),
       models::build_llama, 0, 1},
      {decoder("llama2-13b", "Llama-2 13B (40 layers, h=5120, 40 heads, SwiGLU 13824)", 1, 4096,
               4096, 13015864320),
       models::build_llama, 0, 1},
      {decoder("llama2-70b", "Llama-2 70B (80 layers, h=8192, 64 heads, 8 KV heads)", 1, 4096, 4096,
               68976648192),
       models::build_llama, 0, 1},
      {decoder("llama3-8b", "Llama-3 8B (32 layers, h=4096, 8 KV heads, vocab 128256)", 1, 8192,
               8192, 8030261248),
       models::build_llama, 0, 1},
      {with_experts(decoder("mixtral-8x7b",
                            "Mixtral 8x7B MoE (32 layers, 8 experts, top-2 routing)", 1, 4096,
                            32768, 46702792704),
                    8),
       models::build_mixtral, 0, 1},
      {encoder("bert-base", "BERT-base pre-training (12 layers, h=768, MLM + NSP heads)", 32, 512,
               512, 110106428),
       models::build_bert, 0, 1},
      {encoder("bert-large", "BERT-large pre-training (24 layers, h=1024, MLM + NSP heads)", 32,
               512, 512, 336226108),
       models::build_bert, 0, 1},
      {cnn("resnet50", "ResNet-50 (torchvision)", 32, 224, 25557032), models::build_resnet, 32, 1},
      {cnn("resnet101", "ResNet-101 (torchvision)", 32, 224, 44549160), models::build_resnet, 32,
       1},
      {cnn("resnet152", "ResNet-152 (torchvision)", 32, 224, 60192808), models::build_resnet, 32,
       1},
      {cnn("vgg16", "VGG-16 (torchvision, no batch norm)", 32, 224, 138357544), models::build_vgg,
       32, 1},
      {cnn("vgg19", "VGG-19 (torchvision, no batch norm)", 32, 224, 143667240), models::build_vgg,
       32, 1},
      {cnn("mobilenetv2", "MobileNetV2 1.0 (torchvision)", 32, 224, 3504872),
       models::build_mobilenet_v2, 32, 1},
      {cnn("unet", "U-Net (Ronneberger et al. 2015, padded convs with batch norm)", 8, 256,
           31037698),
       models::build_unet, 16, 16},
  };
  return entries;
}

const Entry& find_entry(std::string_view name) {
  for (const Entry& e : registry()) {
    if (e.info.name == name) return e;
  }
  std::string known;
  for (const Entry& e : registry()) known += (known.empty() ? "" : ", ") + e.info.name;
  fail("unknown model '{}' (known: {})", name, known);
}

// LoRA ranks past 2^16 are a typo: no projection is that wide.
constexpr int64_t kMaxLoraRank = int64_t{1} << 16;

// Checks the LoRA and NF4 options against the model; returns the graph
// name's part for them (" lora8", " qlora64", or nothing).
std::string check_adapters(const ModelInfo& info, const ModelOptions& opts) {
  const bool nf4 = opts.base_weights == WeightFormat::kNf4;
  if (opts.lora.rank == 0 && !nf4) return "";
  if (info.family == ModelFamily::kCnn) {
    fail("model {}: LoRA and NF4 weights apply to the zoo's transformers", info.name);
  }
  if (opts.lora.rank < 0 || opts.lora.rank > kMaxLoraRank) {
    fail("model {}: LoRA rank {} out of range (1..{})", info.name, opts.lora.rank, kMaxLoraRank);
  }
  if (!(opts.lora.alpha > 0) || !std::isfinite(opts.lora.alpha)) {
    fail("model {}: LoRA alpha must be a positive number", info.name);
  }
  if (nf4 && opts.lora.rank == 0 && !opts.forward_only) {
    fail(
        "model {}: NF4 base weights are frozen, so there is nothing to train: add LoRA adapters "
        "(--lora R, or --qlora)",
        info.name);
  }
  if (opts.lora.rank > 0 && opts.lora.targets.empty()) {
    fail("model {}: LoRA needs at least one target", info.name);
  }
  if (opts.lora.rank == 0) return " nf4";
  return fmt::format(" {}{}", nf4 ? "qlora" : "lora", opts.lora.rank);
}

// Bounds of another model shape: past them a size is a typo.
constexpr int64_t kMaxShapeLayers = 4096, kMaxShapeHidden = int64_t{1} << 18;
constexpr int64_t kMaxShapeVocab = int64_t{1} << 24, kMaxShapePositions = int64_t{1} << 22;

// The model's context: its own, or that of the shape the options give
// (each dimension checked).
int64_t check_model_shape(const ModelInfo& info, const ModelShape& shape) {
  if (!shape.given()) return info.max_seq;
  const bool gpt = info.name.starts_with("gpt2"), llama = info.name.starts_with("llama");
  if (!gpt && !llama) {
    fail("model {}: another shape (layers, hidden, heads, ...) is for the GPT-2 and Llama models",
         info.name);
  }
  if (gpt && (shape.kv_heads > 0 || shape.ffn > 0)) {
    fail("model {}: GPT-2's blocks have no key-value heads or MLP width of their own to set",
         info.name);
  }
  const auto check = [&](int64_t value, int64_t most, const char* what) {
    if (value < 0 || value > most) {
      fail("model {}: {} {} out of range (1..{})", info.name, what, value, most);
    }
  };
  check(shape.layers, kMaxShapeLayers, "layers");
  check(shape.hidden, kMaxShapeHidden, "hidden size");
  check(shape.heads, kMaxShapeHidden, "heads");
  check(shape.kv_heads, kMaxShapeHidden, "key-value heads");
  check(shape.ffn, kMaxShapeHidden, "MLP width");
  check(shape.vocab, kMaxShapeVocab, "vocabulary");
  check(shape.positions, kMaxShapePositions, "positions");
  if (shape.hidden > 0 && shape.heads > 0 && shape.hidden % shape.heads != 0) {
    fail("model {}: hidden size {} does not split into {} heads", info.name, shape.hidden,
         shape.heads);
  }
  if ((shape.hidden > 0) != (shape.heads > 0)) {
    fail("model {}: another hidden size needs its heads, and the other way round", info.name);
  }
  if (shape.kv_heads > 0 && shape.heads > 0 && shape.heads % shape.kv_heads != 0) {
    fail("model {}: {} key-value heads do not divide the heads ({})", info.name, shape.kv_heads,
         shape.heads);
  }
  return shape.positions > 0 ? shape.positions : info.max_seq;
}

// "l96 h16384 a128 v51200 p2048": the dimensions another shape sets.
std::string model_shape_text(const ModelShape& shape) {
  if (!shape.given()) return "";
  std::string out;
  const auto part = [&](const char* tag, int64_t value) {
    if (value > 0) out += fmt::format(" {}{}", tag, value);
  };
  part("l", shape.layers);
  part("h", shape.hidden);
  part("a", shape.heads);
  part("kv", shape.kv_heads);
  part("f", shape.ffn);
  part("v", shape.vocab);
  part("p", shape.positions);
  return out;
}

// Tensor parallelism's ranks (a power of two up to 1024, as Megatron's
// layouts use them) and the models built with it so far; the graph name's
// part for it (" tp4", " tp4 sp").
std::string check_tensor_parallel(const ModelInfo& info, const ModelOptions& opts) {
  const int64_t t = opts.tensor_parallel;
  if (t < 1 || t > 1024 || (t & (t - 1)) != 0) {
    fail("model {}: tensor-parallel ranks must be a power of two up to 1024 (got {})", info.name,
         t);
  }
  if (t == 1) {
    if (opts.sequence_parallel) {
      fail(
          "model {}: sequence parallelism splits the sequence over tensor-parallel ranks: "
          "give --tensor-parallel 2 or more",
          info.name);
    }
    return "";
  }
  if (!info.name.starts_with("gpt2") && !info.name.starts_with("llama") &&
      !info.name.starts_with("mixtral")) {
    fail("model {}: tensor parallelism is built for the GPT-2, Llama and Mixtral models so far",
         info.name);
  }
  if (opts.lora.rank > 0 || opts.base_weights != WeightFormat::kDense) {
    fail("model {}: tensor parallelism with LoRA or NF4 weights is not built", info.name);
  }
  if (opts.eager_kernels) {
    fail("model {}: tensor parallelism runs Megatron's fused kernels, not --eager-kernels",
         info.name);
  }
  return fmt::format(" tp{}{}", t, opts.sequence_parallel ? " sp" : "");
}

}  // namespace

const std::vector<ModelInfo>& model_zoo() {
  static const std::vector<ModelInfo> infos = [] {
    std::vector<ModelInfo> v;
    for (const Entry& e : registry()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

const ModelInfo& find_model(std::string_view name) {
  // model_zoo() lists the registry's entries in the same order.
  const Entry& e = find_entry(name);
  return model_zoo()[static_cast<size_t>(&e - registry().data())];
}

ModelShape full_model_shape(std::string_view name, const ModelOptions& options) {
  const ModelInfo& info = find_model(name);
  const int64_t context = check_model_shape(info, options.shape);
  if (info.name.starts_with("gpt2")) return models::gpt2_shape(info.name, options);
  if (!info.name.starts_with("llama")) {
    fail("model {}: its shape is known for the GPT-2 and Llama models", info.name);
  }
  ModelShape shape = models::llama_shape(info.name, options);
  shape.positions = context;
  return shape;
}

Graph build_model(std::string_view name, const ModelOptions& options) {
  const Entry& e = find_entry(name);
  const ModelInfo& info = e.info;
  ModelOptions opts = options;
  if (opts.batch == 0) opts.batch = info.default_batch;
  if (opts.batch < 0 || opts.batch > kMaxBatch) {
    fail("model {}: batch {} out of range (1..{})", info.name, opts.batch, kMaxBatch);
  }
  std::string shape_desc;
  if (info.family == ModelFamily::kCnn) {
    if (opts.seq != 0) fail("model {}: --seq applies to transformers only", info.name);
    if (opts.flash) fail("model {}: --flash (attention) applies to transformers only", info.name);
    if (opts.image == 0) opts.image = info.default_image;
    if (opts.image < e.min_image || opts.image > kMaxImage) {
      fail("model {}: image size {} out of range ({}..{})", info.name, opts.image, e.min_image,
           kMaxImage);
    }
    if (opts.image % e.image_multiple != 0) {
      fail("model {}: image size {} must be a multiple of {}", info.name, opts.image,
           e.image_multiple);
    }
    shape_desc = fmt::format("i{}", opts.image);
  } else {
    if (opts.image != 0) fail("model {}: --image applies to CNNs only", info.name);
    const int64_t context = check_model_shape(info, opts.shape);
    if (opts.seq == 0) opts.seq = std::min(info.default_seq, context);
    if (opts.seq < 0 || opts.seq > context) {
      fail("model {}: sequence length {} out of range (1..{}, the model's context)", info.name,
           opts.seq, context);
    }
    shape_desc = fmt::format("s{}", opts.seq);
  }

  const std::string adapters = check_adapters(info, opts);
  if (opts.eager_kernels && info.family == ModelFamily::kCnn) {
    fail("model {}: --eager-kernels applies to transformers", info.name);
  }

  std::string parallel = check_tensor_parallel(info, opts);
  if (opts.expert_parallel != 1) {
    // The experts' count divides over the ranks (checked by the builder).
    if (!info.name.starts_with("mixtral")) {
      fail("model {}: expert parallelism is for mixture-of-experts models (mixtral-8x7b)",
           info.name);
    }
    if (opts.expert_parallel < 1 || opts.expert_parallel > 1024) {
      fail("model {}: expert-parallel ranks must be in 1..1024 (got {})", info.name,
           opts.expert_parallel);
    }
    parallel += fmt::format(" ep{}", opts.expert_parallel);
  }
  if (opts.context_parallel != 1) {
    // Note [Context parallelism in the zoo]; the sequence's split is
    // checked by the builder.
    if (!info.name.starts_with("gpt2") && !info.name.starts_with("llama")) {
      fail("model {}: context parallelism is built for the GPT-2 and Llama models", info.name);
    }
    if (opts.context_parallel < 1 || opts.context_parallel > 1024) {
      fail("model {}: context-parallel ranks must be in 1..1024 (got {})", info.name,
           opts.context_parallel);
    }
    if (!opts.flash) {
      fail("model {}: context parallelism runs blockwise flash attention: give --flash",
           info.name);
    }
    if (opts.lora.rank > 0 || opts.base_weights != WeightFormat::kDense || opts.eager_kernels) {
      fail("model {}: context parallelism with LoRA, NF4 weights or --eager-kernels is not built",
           info.name);
    }
    parallel += fmt::format(" cp{}", opts.context_parallel);
  }

  Graph g = e.build(info.name, opts);
  g.name = fmt::format("{}{} b{} {} {}{}{}{}{}{}", info.name, model_shape_text(opts.shape),
                       opts.batch, shape_desc,
                       to_string(opts.precision), adapters, opts.flash ? " flash" : "",
                       opts.eager_kernels ? " eager-kernels" : "",
                       opts.forward_only ? " forward-only" : "", parallel);
  const int64_t params = g.meta.at("param_count").get<int64_t>();
  const int64_t trainable = g.meta.at("trainable_param_count").get<int64_t>();
  if (opts.lora.rank > 0 && trainable == 0) {
    fail("model {}: the LoRA targets {} match no layer of it", info.name,
         fmt::join(opts.lora.targets, ","));
  }
  g.meta = {{"model", info.name},
            {"batch", opts.batch},
            {"dtype", std::string(to_string(opts.precision))},
            {"optimizer", std::string(to_string(opts.optimizer))},
            {"param_count", params}};
  if (opts.lora.rank > 0) {
    g.meta["lora_rank"] = opts.lora.rank;
    g.meta["lora_alpha"] = opts.lora.alpha;
    g.meta["lora_targets"] = opts.lora.targets;
    g.meta["trainable_param_count"] = trainable;
  }
  if (opts.base_weights == WeightFormat::kNf4) g.meta["base_weights"] = "nf4";
  if (opts.shape.given()) {
    const ModelShape& shape = opts.shape;
    g.meta["shape"] = {{"layers", shape.layers},     {"hidden", shape.hidden},
                       {"heads", shape.heads},       {"kv_heads", shape.kv_heads},
                       {"ffn", shape.ffn},           {"vocab", shape.vocab},
                       {"positions", shape.positions}};
  }
  if (info.family == ModelFamily::kCnn) {
    g.meta["image"] = opts.image;
  } else {
    g.meta["seq"] = opts.seq;
    g.meta["flash"] = opts.flash;
    if (opts.eager_kernels) g.meta["eager_kernels"] = true;
  }
  if (opts.tensor_parallel > 1) {
    // Note [Tensor parallelism in the zoo]: the graph is one rank's; its
    // tp_ collectives run over this many.
    g.meta["tensor_parallel"] = opts.tensor_parallel;
    g.meta["sequence_parallel"] = opts.sequence_parallel;
  }
  if (opts.expert_parallel > 1) g.meta["expert_parallel"] = opts.expert_parallel;
  // Note [Context parallelism in the zoo]: "seq" stays the whole sequence.
  if (opts.context_parallel > 1) g.meta["context_parallel"] = opts.context_parallel;
  if (opts.forward_only) {
    g.meta["forward_only"] = true;
    g.meta.erase("optimizer");  // there is no step
  }
  return g;
}

std::string_view to_string(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kMomentum:
      return "momentum";
    case Optimizer::kAdam:
      return "adam";
    case Optimizer::kAdamW:
      return "adamw";
  }
  return "adam";
}

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "fp32";
}

Optimizer parse_optimizer(std::string_view name) {
  for (Optimizer o : {Optimizer::kSgd, Optimizer::kMomentum, Optimizer::kAdam, Optimizer::kAdamW}) {
    if (to_string(o) == name) return o;
  }
  fail("unknown optimizer '{}' (known: sgd, momentum, adam, adamw)", name);
}

DType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return DType::kBF16;
    case Precision::kFp16:
      return DType::kF16;
    case Precision::kFp32:
      break;
  }
  return DType::kF32;
}

Precision parse_precision(std::string_view name) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    if (to_string(p) == name) return p;
  }
  fail("unknown dtype '{}' (known: fp32, bf16, fp16)", name);
}

}  // namespace memwall
