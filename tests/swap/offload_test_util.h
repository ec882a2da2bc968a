// Shared by the offload tests: the resources whose bytes they count, and
// the small GPT-2 they offload.
#pragma once

#include <cstddef>

#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "memwall/sim/simulator.h"

namespace memwall::offload_test {

constexpr size_t kH2D = static_cast<size_t>(Resource::kH2D);
constexpr size_t kD2H = static_cast<size_t>(Resource::kD2H);
constexpr size_t kNvmeRead = static_cast<size_t>(Resource::kNvmeRead);
constexpr size_t kNvmeWrite = static_cast<size_t>(Resource::kNvmeWrite);

inline const Graph& gpt2() {
  static const Graph g = build_model("gpt2-small", {.batch = 1, .seq = 128});
  return g;
}

}  // namespace memwall::offload_test
