// DeepSpeed's per-rank model-state accounting (model_states.h).
//
// Note [DeepSpeed's estimator terms]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// P parameters, N GPUs in all, n per node, L parameters in the largest layer.
// Stages 1 and 2 share one estimator in DeepSpeed (stage_1_and_2.py): the
// device keeps the 16-bit parameters and the 16-bit gradients whole (2P +
// 2P; stage 2 reduces gradients bucket by bucket but the estimator keeps
// the bound conservative) and the 1/N partition of the 16 fp32 bytes per
// parameter (master weights, momentum, variance, fp32 gradients). With the
// optimizer offloaded only the 16-bit parameters stay (2P). Stage 3 keeps
// 1/N of 18 bytes per parameter (16-bit parameters too) plus the largest
// layer gathered whole (4L: 16-bit parameters and gradients); offloading
// the optimizer leaves 2P/N, offloading parameters too leaves only 4L.
// Host memory per node is the larger of the fp32 model each of the n
// processes builds at initialization (4nP, unless zero.Init builds it
// partitioned) and the offloaded states (16 or 18 bytes per parameter, over
// the nodes for stage 3), times the buffer factor. Stage 0, which DeepSpeed
// does not estimate, follows the ZeRO paper's (2 + 2 + 12) bytes per
// parameter (Rajbhandari et al. 2020, sec. 3.1). DeepSpeed truncates each
// product to an integer (Python int()); so does this code.
#include "memwall/swap/model_states.h"

#include <algorithm>
#include <cmath>

#include "memwall/base/error.h"
#include "memwall/graph/types.h"

namespace memwall {
namespace {

constexpr const char* kWhat = "model-state bytes";

// floor(a * num / den); check() keeps a * 32 below 2^62.
uint64_t scaled(uint64_t a, uint64_t num, uint64_t den) { return checked_mul(a, num, kWhat) / den; }

// int(bytes_per_param * params * factor) as DeepSpeed computes it in Python
// floats; exact here for the sizes that pass the 2^62 check.
uint64_t host_term(uint64_t params, double bytes_per_param, double factor) {
  const long double value = static_cast<long double>(params) * bytes_per_param * factor;
  if (!(value < static_cast<long double>(kMaxBytes))) {
    fail("{} above 2^62 (host memory of {} parameters)", kWhat, params);
  }
  return static_cast<uint64_t>(value);
}

void check(uint64_t params, uint64_t largest_layer_params, const ZeroSetup& s) {
  if (s.stage < 0 || s.stage > 3) fail("ZeRO stage {} does not exist (0, 1, 2 or 3)", s.stage);
  if (s.gpus_per_node < 1 || s.nodes < 1) {
    fail("ZeRO needs at least one GPU on at least one node (got {} x {})", s.nodes,
         s.gpus_per_node);
  }
  if (s.offload_params && s.stage != 3) {
    fail("parameter offload needs ZeRO stage 3 (got stage {})", s.stage);
  }
  if (!(s.buffer_factor > 0) || !std::isfinite(s.buffer_factor)) {
    fail("the host buffer factor must be positive (got {})", s.buffer_factor);
  }
  if (largest_layer_params > params) {
    fail("the largest layer has {} parameters, more than the model's {}", largest_layer_params,
         params);
  }
  if (params > kMaxBytes / 32) fail("{} parameters are too many to account for", params);
}

void add(std::vector<StateItem>& items, uint64_t& total, std::string what, uint64_t bytes) {
  total = checked_add(total, bytes, kWhat);
  items.push_back({std::move(what), bytes});
}

}  // namespace

ModelStateMemory zero_model_state_memory(uint64_t params, uint64_t largest_layer_params,
                                         const ZeroSetup& s) {
  check(params, largest_layer_params, s);
  const auto gpus = static_cast<uint64_t>(s.total_gpus());
  const auto per_node = static_cast<uint64_t>(s.gpus_per_node);
  ModelStateMemory m;
  uint64_t unused_host = 0;
  // Host: the larger of the fp32 model built by every process at
  // initialization and the offloaded states (see the Note).
  const auto host = [&](double init_bytes_per_param, std::string init_what,
                        double state_bytes_per_param, std::string state_what) {
    const bool init_wins = init_bytes_per_param >= state_bytes_per_param;
    add(m.host_items, unused_host, init_wins ? std::move(init_what) : std::move(state_what),
        host_term(params, std::max(init_bytes_per_param, state_bytes_per_param), 1.0));
    m.host_bytes =
        host_term(params, std::max(init_bytes_per_param, state_bytes_per_param), s.buffer_factor);
  };
  const std::string init = "fp32 model built by each process at initialization";

  if (s.stage == 0) {
    add(m.gpu_items, m.gpu_bytes, "16-bit parameters", scaled(params, 2, 1));
    add(m.gpu_items, m.gpu_bytes, "16-bit gradients", scaled(params, 2, 1));
    add(m.gpu_items, m.gpu_bytes, "fp32 master weights, momentum and variance",
        scaled(params, 12, 1));
    host(4.0 * static_cast<double>(per_node), init, 0, "");
    return m;
  }
  if (s.stage <= 2) {
    add(m.gpu_items, m.gpu_bytes, "16-bit parameters", scaled(params, 2, 1));
    if (s.offload_optimizer) {
      host(4.0 * static_cast<double>(per_node), init, 16,
           "fp32 master weights, momentum, variance and gradients (offloaded)");
    } else {
      add(m.gpu_items, m.gpu_bytes, "16-bit gradients", scaled(params, 2, 1));
      add(m.gpu_items, m.gpu_bytes,
          "fp32 master weights, momentum, variance and gradients (1/N partition)",
          scaled(params, 16, gpus));
      host(4.0 * static_cast<double>(per_node), init, 0, "");
    }
    return m;
  }
  // Stage 3.
  m.largest_layer_bytes = scaled(largest_layer_params, 4, 1);
  add(m.gpu_items, m.gpu_bytes, "largest layer gathered (16-bit parameters and gradients)",
      m.largest_layer_bytes);
  const double node_share = 1.0 / static_cast<double>(s.nodes);
  const double init_bytes = s.zero_init ? 0 : 4.0 * static_cast<double>(per_node);
  if (s.offload_params) {
    host(init_bytes, init, 18 * node_share,
         "16-bit parameters and fp32 states of the node's partitions (offloaded)");
  } else if (s.offload_optimizer) {
    add(m.gpu_items, m.gpu_bytes, "16-bit parameters (1/N partition)", scaled(params, 2, gpus));
    host(init_bytes, init, 16 * node_share,
         "fp32 master weights, momentum, variance and gradients of the node's partitions "
         "(offloaded)");
  } else {
    add(m.gpu_items, m.gpu_bytes,
        "16-bit parameters, fp32 master weights, momentum, variance and gradients (1/N "
        "partition)",
        scaled(params, 18, gpus));
    if (s.zero_init) {
      // zero.Init only ever holds one layer in fp32 per process.
      m.host_items.push_back(
          {"fp32 largest layer built by each process at initialization",
           host_term(largest_layer_params, 4.0 * static_cast<double>(per_node), 1.0)});
      m.host_bytes =
          host_term(largest_layer_params, 4.0 * static_cast<double>(per_node), s.buffer_factor);
    } else {
      host(4.0 * static_cast<double>(per_node), init, 0, "");
    }
  }
  return m;
}

}  // namespace memwall
