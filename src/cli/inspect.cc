// `memwall inspect`: the memory breakdown and estimated time of one training
// iteration under the default schedule (no recomputation, no offload).
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "format.h"
#include "memwall/base/output_files.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"
#include "memwall/hw/hardware.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct InspectArgs {
  GraphSource source;
  GpuSource gpu;
  bool json = false;
  bool by_layer = false;
  std::string export_path;
};

constexpr BufferKind kKinds[] = {
    BufferKind::kParam, BufferKind::kGrad,      BufferKind::kOptimState, BufferKind::kActivation,
    BufferKind::kInput, BufferKind::kWorkspace, BufferKind::kTemp};

uint64_t of_kind(const std::array<uint64_t, kNumBufferKinds>& bytes, BufferKind kind) {
  return bytes[static_cast<size_t>(kind)];
}

int run_inspect(const InspectArgs& args) {
  OutputFiles outputs;
  outputs.declare(args.export_path);
  const Hardware hw = args.gpu.load();
  const Graph graph = args.source.load(hw);
  const MemoryProfile profile = memory_profile(graph);
  const MemorySummary summary = memory_summary(graph);
  const uint64_t params = model_param_count(graph);
  const uint64_t trainable = trainable_param_count(graph);
  const double time = iteration_time(hw, graph);
  // A traced graph knows when eager PyTorch frees each storage (Note [Eager
  // lifetimes]): its peak is what the user's unmodified script reaches, so
  // it decides whether the step fits.
  const bool eager = has_eager_lifetimes(graph);
  const MemoryProfile eager_profile =
      eager ? memory_profile(graph, eager_liveness(graph)) : profile;
  const uint64_t headline = eager_profile.peak_bytes;
  const bool fits = headline <= hw.device_memory_bytes;
  const uint64_t shortfall = fits ? 0 : headline - hw.device_memory_bytes;
  const auto op_name = [&](OpId op) { return op == kNoOp ? std::string() : graph.ops[op].name; };
  const std::string peak_op_name = op_name(profile.peak_op);

  if (!args.export_path.empty()) {
    outputs.set(args.export_path, graph_text_for(hw, graph));
    outputs.commit();
  }

  if (args.json) {
    nlohmann::json out = {{"graph", graph.name},
                          {"gpu", hw.name},
                          {"ops", graph.ops.size()},
                          {"buffers", graph.buffers.size()},
                          {"fingerprint", graph_fingerprint(graph)},
                          {"param_count", params},
                          {"trainable_param_count", trainable}};
    if (graph.meta.contains("model")) out["model"] = graph.meta["model"];
    for (BufferKind kind : kKinds) {
      out[fmt::format("{}_bytes", to_string(kind))] = of_kind(summary.bytes_by_kind, kind);
    }
    out["saved_activation_bytes"] = summary.saved_activation_bytes;
    out["peak_workspace_bytes"] = summary.peak_workspace_bytes;
    out["peak_bytes"] = profile.peak_bytes;
    out["peak_op"] = profile.peak_op == kNoOp
                         ? nlohmann::json(nullptr)
                         : nlohmann::json{{"id", profile.peak_op}, {"name", peak_op_name}};
    nlohmann::json by_kind = nlohmann::json::object();
    for (BufferKind kind : kKinds) by_kind[to_string(kind)] = of_kind(profile.peak_by_kind, kind);
    out["peak_by_kind"] = by_kind;
    if (eager) {
      out["eager_peak_bytes"] = eager_profile.peak_bytes;
      out["eager_peak_op"] = eager_profile.peak_op == kNoOp
                                 ? nlohmann::json(nullptr)
                                 : nlohmann::json{{"id", eager_profile.peak_op},
                                                  {"name", op_name(eager_profile.peak_op)}};
    }
    out["device_memory_bytes"] = hw.device_memory_bytes;
    out["fits"] = fits;
    out["shortfall_bytes"] = shortfall;
    out["iteration_time_s"] = time;
    if (args.by_layer) {
      nlohmann::json rows = nlohmann::json::array();
      for (const LayerBytes& r : saved_by_layer(graph)) {
        rows.push_back({{"layer", r.layer}, {"saved_activation_bytes", r.saved}});
      }
      out["saved_by_layer"] = rows;
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  auto line = [](std::string_view label, const std::string& value) {
    std::cout << fmt::format("  {:<24}{}\n", label, value);
  };
  auto bytes_line = [&](std::string_view label, uint64_t bytes) {
    line(label, fmt::format("{:>12}  ({} B)", human_bytes(bytes), grouped(bytes)));
  };
  std::cout << fmt::format("{} on {} ({})\n", graph.name, hw.name, hw.description);
  line("ops / buffers",
       fmt::format("{} / {}", grouped(graph.ops.size()), grouped(graph.buffers.size())));
  line("fingerprint", graph_fingerprint(graph));
  // Frozen weights (LoRA's base) train nothing: say how many do.
  const bool frozen = trainable < params && trainable > 0;
  line("parameters",
       frozen ? fmt::format("{}  ({} trainable, {:.4f}%)", grouped(params), grouped(trainable),
                            100.0 * static_cast<double>(trainable) / static_cast<double>(params))
              : grouped(params));
  bytes_line("params", of_kind(summary.bytes_by_kind, BufferKind::kParam));
  bytes_line("grads", of_kind(summary.bytes_by_kind, BufferKind::kGrad));
  bytes_line("optimizer states", of_kind(summary.bytes_by_kind, BufferKind::kOptimState));
  bytes_line("activations (all)", of_kind(summary.bytes_by_kind, BufferKind::kActivation));
  bytes_line("saved for backward", summary.saved_activation_bytes);
  bytes_line("inputs", of_kind(summary.bytes_by_kind, BufferKind::kInput));
  bytes_line("peak workspace (one op)", summary.peak_workspace_bytes);
  if (eager) {
    std::cout << "eager PyTorch (frees a storage when its last reference goes):\n";
    bytes_line("peak memory", eager_profile.peak_bytes);
    line("at op", eager_profile.peak_op == kNoOp ? std::string("-")
                                                 : fmt::format("{} ({})", eager_profile.peak_op,
                                                               op_name(eager_profile.peak_op)));
  }
  std::cout << "default schedule (free each buffer after its last use):\n";
  bytes_line("peak memory", profile.peak_bytes);
  line("at op", profile.peak_op == kNoOp ? std::string("-")
                                         : fmt::format("{} ({})", profile.peak_op, peak_op_name));
  if (eager && eager_profile.peak_bytes >= profile.peak_bytes) {
    line("vs eager PyTorch",
         fmt::format("memwall frees {} earlier",
                     human_bytes(eager_profile.peak_bytes - profile.peak_bytes)));
  }
  std::string parts;
  for (BufferKind kind : kKinds) {
    uint64_t b = of_kind(profile.peak_by_kind, kind);
    if (b == 0) continue;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", to_string(kind), human_bytes(b));
  }
  line("peak by kind", parts);
  line("device memory", human_bytes(hw.device_memory_bytes));
  line("fits", fits
                   ? fmt::format("yes, {} to spare", human_bytes(hw.device_memory_bytes - headline))
                   : fmt::format("no, short by {} ({:.1f}x the device)", human_bytes(shortfall),
                                 static_cast<double>(headline) /
                                     static_cast<double>(hw.device_memory_bytes)));
  line("iteration time (est.)", human_seconds(time));
  if (args.by_layer) {
    std::cout << "activations saved for backward, by layer:\n";
    for (const LayerBytes& r : saved_by_layer(graph)) {
      bytes_line(r.layer, r.saved);
    }
  }
  if (!args.export_path.empty()) line("graph written to", args.export_path);
  return 0;
}

}  // namespace

void add_inspect(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("inspect", "memory breakdown and time of one training iteration");
  auto args = std::make_shared<InspectArgs>();
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_flag("--by-layer", args->by_layer, "also list activations saved for backward per layer");
  cmd->add_option("--export", args->export_path, "write the graph as memwall.graph/1 JSON");
  cmd->callback([&action, args] { action = [args] { return run_inspect(*args); }; });
}

}  // namespace memwall::cli
