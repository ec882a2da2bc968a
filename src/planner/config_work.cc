// Model-state configurations (config_work.h).
#include "config_work.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/plan/builders.h"
#include "memwall/swap/deepspeed_buffers.h"
#include "memwall/swap/zero.h"

namespace memwall::planner_detail {

std::string_view to_string(Activations activations) {
  switch (activations) {
    case Activations::kKeepAll:
      return "keep-all";
    case Activations::kRemat:
      return "remat:memwall";
    case Activations::kCapuchinHost:
      return "capuchin (host)";
    case Activations::kCapuchinSpill:
      return "capuchin (host, then nvme)";
    case Activations::kCapuchinNvme:
      return "capuchin (nvme)";
    case Activations::kVdnn:
      return "vdnn";
    case Activations::kCheckpoint:
      return "checkpointing";
  }
  return "?";
}

ConfigWork make_config(const Graph& graph, const StateConfig& config, int ranks) {
  ConfigWork work;
  work.config = config;
  Graph rank = zero_rank_graph(graph, {.ranks = ranks, .stage = config.stage});
  work.offload_options = {.optimizer = config.optimizer, .params = config.params};
  work.offload_options.paged = config.paged;
  work.offload_options.steps_after_backward = config.steps_after_backward;
  if (!work.offload_options.any()) {
    work.view = rank;
    work.graph = std::move(rank);
    return work;
  }
  work.offload_options.nvme_read_ahead = config.nvme_read_ahead;
  work.offload = offload_graph(rank, work.offload_options);
  if (config.optimizer_host_share > 0 && config.optimizer != Tier::kNvme) {
    fail("a host share of the optimizer states needs the optimizer on NVMe");
  }
  if (config.optimizer_host_share > 0 || config.optimizer_device_share > 0) {
    // With the optimizer on the host, what the device does not hold is there.
    const double host = config.optimizer == Tier::kHost ? 1 - config.optimizer_device_share
                                                        : config.optimizer_host_share;
    work.offload_options.optimizer_of =
        split_optimizer_states(*work.offload, host, optimizer_chunk_bytes(*work.offload),
                               !config.chunks_in_order, config.optimizer_device_share);
    // The share the chunks really give the device (a chunk goes whole),
    // which the same split reproduces; device chunks keep their own steps:
    // rewrite again, knowing them.
    uint64_t on_device = 0;
    for (size_t k = 0; k < work.offload->states.size(); ++k) {
      if (work.offload_options.optimizer_of[k] == Tier::kDevice) {
        on_device += optimizer_state_bytes(*work.offload, k);
      }
    }
    const uint64_t states = optimizer_state_bytes(*work.offload);
    work.config.optimizer_device_share =
        states > 0 ? static_cast<double>(on_device) / static_cast<double>(states) : 0;
    if (on_device > 0) work.offload = offload_graph(rank, work.offload_options);
  }
  if (config.as_deepspeed) {
    work.offload_options.gradients_to_nvme = config.steps_after_backward;
    // DeepSpeed offloads parameters only under stage 3, whose buffers
    // differ from stage 1/2's: one GPU's ZeRO-Infinity runs stage 3 there.
    const int stage = config.params != Tier::kDevice ? 3 : config.stage;
    work.host_reserved = deepspeed_host_buffers(*work.offload, work.offload_options, stage);
  }
  work.view = planning_view(*work.offload, work.offload_options);
  work.graph = work.offload->graph;
  return work;
}

Plan ConfigWork::finish(const Plan& activation_plan) const {
  if (!offload) return activation_plan;
  Plan plan = apply_offload(*offload, activation_plan, offload_options);
  plan.host_reserved = host_reserved;
  return plan;
}

const ConfigWork::KeepAll& ConfigWork::keep_all(const Hardware& hardware) const {
  if (!keep_all_) {
    Plan plan = finish(default_plan(view, hardware.name, kMaxBytes));
    SimResult sim = simulate(graph, plan, hardware, {.record_curves = false});
    keep_all_ = KeepAll{std::move(plan), std::move(sim)};
  }
  return *keep_all_;
}

Hardware with_host(const Hardware& hardware, const PlannerOptions& options) {
  Hardware hw = hardware;
  if (options.host_bytes > 0) hw.host_memory_bytes = options.host_bytes;
  return hw;
}

Unconstrained unconstrained_time(const ConfigWork& work, const Hardware& hardware,
                                 const PlannerOptions& options) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  const SimResult& sim = work.keep_all(hardware).sim;
  Misfit misfit = node_misfit(sim, work.graph, hardware, options);
  if (!misfit.why.empty()) return {kNever, std::move(misfit.why), misfit.short_of};
  return {sim.iteration_time, {}, {}};
}

}  // namespace memwall::planner_detail

namespace memwall {

std::string StateConfig::name() const {
  std::string out = stage > 0 ? fmt::format("ZeRO-{}", stage) : std::string("replicated states");
  if (optimizer_device_share > 0) {
    out +=
        fmt::format(", optimizer in chunks on the device ({:.0f}%)", 100 * optimizer_device_share);
    // The device's share is the chunks'; the host's was asked of the rest.
    const double host = std::min(optimizer_host_share, 1 - optimizer_device_share);
    if (optimizer == Tier::kHost) {
      out += ", host";
    } else if (host + optimizer_device_share >= 0.995) {
      out += fmt::format(", host ({:.0f}%)", 100 * host);  // none on NVMe
    } else {
      out += fmt::format(", host ({:.0f}%) and nvme", 100 * host);
      if (nvme_read_ahead > 1) out += fmt::format(" read {} steps ahead", nvme_read_ahead);
    }
  } else if (optimizer == Tier::kNvme && optimizer_host_share > 0) {
    out += fmt::format(", optimizer in chunks on host ({:.0f}%{}) and nvme",
                       100 * optimizer_host_share, chunks_in_order ? ", the first in order" : "");
    if (nvme_read_ahead > 1) out += fmt::format(" read {} steps ahead", nvme_read_ahead);
  } else if (paged) {
    out += fmt::format(", optimizer paged on {} for the device's step", to_string(optimizer));
  } else if (optimizer != Tier::kDevice) {
    out += fmt::format(", optimizer on {}", to_string(optimizer));
  }
  if (params != Tier::kDevice) out += fmt::format(", parameters on {}", to_string(params));
  if (optimizer == Tier::kDevice && params == Tier::kDevice) out += ", all on the device";
  if (steps_after_backward && optimizer != Tier::kDevice) out += ", CPU steps after backward";
  return out;
}

}  // namespace memwall
