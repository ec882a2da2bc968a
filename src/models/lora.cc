#include "lora.h"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layers.h"
#include "memwall/base/error.h"

namespace memwall {

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"q", "k", "v", "o", "gate", "up", "down"};
  return names;
}

std::vector<std::string> parse_lora_targets(std::string_view list) {
  if (list == "all" || list == "all-linear") return lora_target_names();
  std::vector<std::string> targets;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name(list.substr(start, comma - start));
    const auto& known = lora_target_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      fail("unknown LoRA target '{}' (known: {}, or all)", name, fmt::join(known, ","));
    }
    if (std::find(targets.begin(), targets.end(), name) != targets.end()) {
      fail("LoRA target '{}' is named twice", name);
    }
    targets.push_back(name);
    start = comma + 1;
  }
  return targets;
}

}  // namespace memwall

namespace memwall::models {

std::string_view lora_target_of(std::string_view layer) {
  // The zoo's layer names (llama.cc/attention.cc, gpt2.cc, bert.cc) and the
  // Hugging Face modules they stand for (docs/zoo-transformers.md).
  static constexpr std::pair<std::string_view, std::string_view> kTargets[] = {
      {"attn.wq", "q"},  // q_proj
      {"attn.wk", "k"},
      {"attn.wv", "v"},
      {"attn.wo", "o"},
      {"w1", "gate"},  // gate_proj (Mixtral's experts: w1)
      {"w3", "up"},
      {"w2", "down"},
      {"attn.qkv", "qkv"},  // GPT-2's c_attn
      {"attn.proj", "o"},
      {"mlp.fc", "up"},
      {"mlp.proj", "down"},
      {"attention.self.query", "q"},  // BERT
      {"attention.self.key", "k"},
      {"attention.self.value", "v"},
      {"attention.output.dense", "o"},
      {"intermediate.dense", "up"},
      {"output.dense", "down"},
  };
  for (const auto& [name, target] : kTargets) {
    if (name == layer) return target;
  }
  return {};
}

bool lora_adapts(const LoraOptions& options, std::string_view layer) {
  if (options.rank <= 0) return false;
  const std::string_view target = lora_target_of(layer);
  if (target.empty()) return false;
  const auto& t = options.targets;
  if (target == "qkv") {
    return std::any_of(t.begin(), t.end(),
                       [](const std::string& n) { return n == "q" || n == "k" || n == "v"; });
  }
  return std::find(t.begin(), t.end(), target) != t.end();
}

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

Tensor lora_adapter(Builder& b, std::string_view name, const Tensor& x, const Tensor& base_out) {
  const LoraOptions& lora = b.options().lora;
  const std::string n(name);
  const int64_t in = x.shape.back(), out = base_out.shape.back();
  Tensor a_weight = b.adapter_param(n + ".lora_A.weight", {lora.rank, in});
  Tensor b_weight = b.adapter_param(n + ".lora_B.weight", {out, lora.rank});
  // lora_dropout is 0 by default (peft then uses an identity).
  Tensor down = linear(b, n + ".lora_A", x, a_weight, Tensor{});
  Tensor up = linear(b, n + ".lora_B", down, b_weight, Tensor{});
  // * (alpha / r): a constant, so backward reads nothing saved.
  Tensor scaled = elementwise(b, n + ".lora_scale", "mul", up, 1, 1, Saves::kNothing);
  return add(b, n + ".lora_add", base_out, scaled);
}

uint64_t Nf4Layout::bytes() const {
  return checked_add(checked_add(codes, absmax, "NF4 bytes"), checked_mul(absmax2, 4, "NF4 bytes"),
                     "NF4 bytes");
}

Nf4Layout nf4_layout(int64_t elements) {
  if (elements < 0) fail("model: negative NF4 element count {}", elements);
  const uint64_t n = static_cast<uint64_t>(elements);
  Nf4Layout layout;
  layout.codes = ceil_div(n, 2);
  layout.absmax = ceil_div(n, 64);
  layout.absmax2 = ceil_div(layout.absmax, 256);
  return layout;
}

// Note [NF4 weights]
// bitsandbytes' Linear4bit with quant_type "nf4" and double quantization
// (the QLoRA configuration, Dettmers et al. 2023, sec. 3) stores a weight of
// n elements as n/2 bytes of packed 4-bit codes, an 8-bit absmax per
// 64-element block, and the fp32 absmax of every 256 of those (the
// per-tensor mean offset, one fp32 scalar, and the shared 256-entry code
// tables are left out, as the paper's 4.127 bits per parameter leaves them
// out). Its matmul (MatMul4Bit) dequantizes the whole weight into a
// compute-dtype temporary, multiplies, and drops it; backward dequantizes
// again for the input gradient (there is no weight gradient). So each
// quantized layer costs one [out, in] temporary in forward and one in
// backward, and saves only its input for backward when an adapter needs it.
Tensor nf4_linear(Builder& b, std::string_view name, const Tensor& x, int64_t out_features,
                  bool with_bias) {
  const std::string n(name);
  const std::string fq = b.qualified(name);
  const int64_t in_features = x.shape.back();
  const int64_t elements = checked_numel(std::vector<int64_t>{out_features, in_features});
  const Nf4Layout layout = nf4_layout(elements);
  auto count = [](uint64_t v) { return static_cast<int64_t>(v); };
  const Tensor codes = b.stored_weight(n + ".weight", {count(layout.codes)}, DType::kU8, elements);
  const Tensor absmax =
      b.stored_weight(n + ".weight.absmax", {count(layout.absmax)}, DType::kU8, 0);
  const Tensor absmax2 =
      b.stored_weight(n + ".weight.absmax2", {count(layout.absmax2)}, DType::kF32, 0);
  Tensor bias = with_bias ? b.param(n + ".bias", {out_features}) : Tensor{};
  const DType dt = b.compute_dtype();
  const std::vector<int64_t> weight_shape = {out_features, in_features};
  // A table lookup and a scale per element, and the absmax's own dequantization.
  const double dequant_flops = 2.0 * static_cast<double>(elements);
  auto dequantize = [&b, codes, absmax, absmax2, weight_shape, dt, dequant_flops](
                        const std::string& op, Phase phase) {
    return b.emit1({.name = op,
                    .type = "dequantize_nf4",
                    .phase = phase,
                    .in = {codes, absmax, absmax2},
                    .flops = dequant_flops},
                   {op + ".weight", weight_shape, dt, kTmp});
  };
  const Tensor weight = dequantize(n + ".dequantize", Phase::kForward);
  const double rows = numel_d(x) / static_cast<double>(in_features);
  const double mm_flops = 2.0 * rows * static_cast<double>(elements);
  std::vector<Tensor> ins = {x, weight};
  if (bias.valid()) ins.push_back(bias);
  std::vector<int64_t> out_shape = x.shape;
  out_shape.back() = out_features;
  Tensor y = b.emit1({.name = n, .type = "matmul", .in = ins, .flops = mm_flops},
                     {n, out_shape, dt, kAct});
  b.propagate_requires_grad({x}, {y});
  b.on_backward([&b, fq, x, y, mm_flops, dequantize] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    // Scopes are gone by backward: the op names are qualified already.
    const Tensor w = dequantize(fq + ".bwd_dequantize", Phase::kBackward);
    Tensor dx = b.emit1({.name = fq + ".bwd_input",
                         .type = "matmul",
                         .phase = Phase::kBackward,
                         .in = {g, w},
                         .flops = mm_flops},
                        {fq + ".grad_in", x.shape, g.dtype, kTmp});
    b.add_grad(x, dx, fq);
  });
  return y;
}

}  // namespace memwall::models
