// `memwall inspect`'s figures, table and JSON (inspection.h).
#include "memwall/report/inspection.h"

#include <fmt/format.h>

#include "memwall/base/human.h"
#include "memwall/graph/counts.h"

namespace memwall {
namespace {

constexpr BufferKind kKinds[] = {
    BufferKind::kParam, BufferKind::kGrad,      BufferKind::kOptimState, BufferKind::kActivation,
    BufferKind::kInput, BufferKind::kWorkspace, BufferKind::kTemp};

uint64_t of_kind(const std::array<uint64_t, kNumBufferKinds>& bytes, BufferKind kind) {
  return bytes[static_cast<size_t>(kind)];
}

nlohmann::json op_json(OpId op, const std::string& name) {
  return op == kNoOp ? nlohmann::json(nullptr) : nlohmann::json{{"id", op}, {"name", name}};
}

std::string op_cell(OpId op, const std::string& name) {
  return op == kNoOp ? std::string("-") : fmt::format("{} ({})", op, name);
}

}  // namespace

Inspection inspect_graph(const Graph& graph, const Hardware& hw, bool by_layer) {
  Inspection in;
  in.graph_name = graph.name;
  in.fingerprint = graph_fingerprint(graph);
  in.model = graph.meta.contains("model") ? graph.meta["model"] : nlohmann::json(nullptr);
  in.ops = graph.ops.size();
  in.buffers = graph.buffers.size();
  in.params = model_param_count(graph);
  in.trainable = trainable_param_count(graph);
  in.summary = memory_summary(graph);
  in.profile = memory_profile(graph);
  const auto op_name = [&](OpId op) { return op == kNoOp ? std::string() : graph.ops[op].name; };
  in.peak_op_name = op_name(in.profile.peak_op);
  if (has_eager_lifetimes(graph)) {
    in.eager = memory_profile(graph, eager_liveness(graph));
    in.eager_peak_op_name = op_name(in.eager->peak_op);
  }
  in.gpu = hw.name;
  in.gpu_description = hw.description;
  in.device_memory_bytes = hw.device_memory_bytes;
  in.fits = in.headline_peak() <= hw.device_memory_bytes;
  in.shortfall = in.fits ? 0 : in.headline_peak() - hw.device_memory_bytes;
  in.iteration_time = iteration_time(hw, graph);
  in.by_layer = by_layer;
  if (by_layer) in.saved_by_layer = saved_by_layer(graph);
  return in;
}

nlohmann::json inspection_json(const Inspection& in) {
  nlohmann::json out = {{"graph", in.graph_name},
                        {"gpu", in.gpu},
                        {"ops", in.ops},
                        {"buffers", in.buffers},
                        {"fingerprint", in.fingerprint},
                        {"param_count", in.params},
                        {"trainable_param_count", in.trainable}};
  if (!in.model.is_null()) out["model"] = in.model;
  for (BufferKind kind : kKinds) {
    out[fmt::format("{}_bytes", to_string(kind))] = of_kind(in.summary.bytes_by_kind, kind);
  }
  out["saved_activation_bytes"] = in.summary.saved_activation_bytes;
  out["peak_workspace_bytes"] = in.summary.peak_workspace_bytes;
  out["peak_bytes"] = in.profile.peak_bytes;
  out["peak_op"] = op_json(in.profile.peak_op, in.peak_op_name);
  nlohmann::json by_kind = nlohmann::json::object();
  for (BufferKind kind : kKinds) by_kind[to_string(kind)] = of_kind(in.profile.peak_by_kind, kind);
  out["peak_by_kind"] = by_kind;
  if (in.eager) {
    out["eager_peak_bytes"] = in.eager->peak_bytes;
    out["eager_peak_op"] = op_json(in.eager->peak_op, in.eager_peak_op_name);
  }
  out["device_memory_bytes"] = in.device_memory_bytes;
  out["fits"] = in.fits;
  out["shortfall_bytes"] = in.shortfall;
  out["iteration_time_s"] = in.iteration_time;
  if (in.by_layer) {
    nlohmann::json rows = nlohmann::json::array();
    for (const LayerBytes& r : in.saved_by_layer) {
      rows.push_back({{"layer", r.layer}, {"saved_activation_bytes", r.saved}});
    }
    out["saved_by_layer"] = rows;
  }
  return out;
}

std::string inspection_text(const Inspection& in) {
  std::string out = fmt::format("{} on {} ({})\n", in.graph_name, in.gpu, in.gpu_description);
  const auto line = [&](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<24}{}\n", label, value);
  };
  const auto bytes_line = [&](std::string_view label, uint64_t bytes) {
    line(label, fmt::format("{:>12}  ({} B)", human_bytes(bytes), grouped(bytes)));
  };
  const auto kind_bytes = [&](BufferKind kind) { return of_kind(in.summary.bytes_by_kind, kind); };
  line("ops / buffers", fmt::format("{} / {}", grouped(in.ops), grouped(in.buffers)));
  line("fingerprint", in.fingerprint);
  // Frozen weights (LoRA's base) train nothing: say how many do.
  const bool frozen = in.trainable < in.params && in.trainable > 0;
  line("parameters",
       frozen
           ? fmt::format("{}  ({} trainable, {:.4f}%)", grouped(in.params), grouped(in.trainable),
                         100.0 * static_cast<double>(in.trainable) / static_cast<double>(in.params))
           : grouped(in.params));
  bytes_line("params", kind_bytes(BufferKind::kParam));
  bytes_line("grads", kind_bytes(BufferKind::kGrad));
  bytes_line("optimizer states", kind_bytes(BufferKind::kOptimState));
  bytes_line("activations (all)", kind_bytes(BufferKind::kActivation));
  bytes_line("saved for backward", in.summary.saved_activation_bytes);
  bytes_line("inputs", kind_bytes(BufferKind::kInput));
  bytes_line("peak workspace (one op)", in.summary.peak_workspace_bytes);
  if (in.eager) {
    out += "eager PyTorch (frees a storage when its last reference goes):\n";
    bytes_line("peak memory", in.eager->peak_bytes);
    line("at op", op_cell(in.eager->peak_op, in.eager_peak_op_name));
  }
  out += "default schedule (free each buffer after its last use):\n";
  bytes_line("peak memory", in.profile.peak_bytes);
  line("at op", op_cell(in.profile.peak_op, in.peak_op_name));
  if (in.eager && in.eager->peak_bytes >= in.profile.peak_bytes) {
    line("vs eager PyTorch",
         fmt::format("memwall frees {} earlier",
                     human_bytes(in.eager->peak_bytes - in.profile.peak_bytes)));
  }
  std::string parts;
  for (BufferKind kind : kKinds) {
    const uint64_t b = of_kind(in.profile.peak_by_kind, kind);
    if (b == 0) continue;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", to_string(kind), human_bytes(b));
  }
  line("peak by kind", parts);
  line("device memory", human_bytes(in.device_memory_bytes));
  const uint64_t headline = in.headline_peak();
  line("fits", in.fits
                   ? fmt::format("yes, {} to spare", human_bytes(in.device_memory_bytes - headline))
                   : fmt::format("no, short by {} ({:.1f}x the device)", human_bytes(in.shortfall),
                                 static_cast<double>(headline) /
                                     static_cast<double>(in.device_memory_bytes)));
  line("iteration time (est.)", human_seconds(in.iteration_time));
  if (in.by_layer) {
    out += "activations saved for backward, by layer:\n";
    for (const LayerBytes& r : in.saved_by_layer) bytes_line(r.layer, r.saved);
  }
  return out;
}

}  // namespace memwall
