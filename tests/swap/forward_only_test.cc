// Swapping in forward-only programs (issue 19): vDNN and Capuchin offload
// or recompute the activations read again after a gap
// (remat/forward_only_graphs.h has the graphs and their keep-all figures).
#include <gtest/gtest.h>

#include <string>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/activations.h"
#include "remat/forward_only_graphs.h"

namespace memwall {
namespace {

using testing::unet_like;
using testing::unrolled_generator;

const Hardware& gpu() { return find_gpu("a100-80g"); }

// The plan's peak, which the simulator must accept within `budget`.
uint64_t peak_of(const SwapResult& r, const Graph& graph, uint64_t budget) {
  return device_peak(require_fit(graph, gpu(), r.plan, budget, r.planner));
}

// U-Net-like (keep-all 200 at mid2: w e1 e2 m1 m2). vDNN offloads the
// layers' inputs read again later: e1 (enc2's, back for dec1) and e2
// (mid1's, back for dec2). Their copies (bytes) land within microseconds,
// so mid2 holds w m1 m2 and e2, whose prefetch just in time for dec2 is
// issued as mid2 starts: 136. e1 comes back one offloaded layer ahead,
// while dec2 runs: w e1 e2 m2 d2 = 184, the peak.
TEST(ForwardOnlySwap, VdnnOffloadsTheSkipConnections) {
  const Graph graph = unet_like();
  EXPECT_EQ(vdnn_offloaded(graph, false), (std::vector<BufferId>{2, 3}));
  const SwapResult r = plan_vdnn(graph, gpu(), 190, {});
  EXPECT_EQ(peak_of(r, graph, 190), 184u);
  EXPECT_EQ(r.swapped, 2u);
}

// Capuchin reaches the same 184 there; on the generator a swap of h0
// would be prefetched while the last step runs (w z h5 h6 h0: 324), so it
// recomputes h0 instead and reaches the bound, 244.
TEST(ForwardOnlySwap, CapuchinSwapsOrRecomputes) {
  const Graph unet = unet_like();
  EXPECT_EQ(peak_of(plan_capuchin(unet, gpu(), 190, {}), unet, 190), 184u);
  const Graph generator = unrolled_generator(6);
  const SwapResult r = plan_capuchin(generator, gpu(), 300, {});
  EXPECT_EQ(peak_of(r, generator, 300), 244u);
  EXPECT_EQ(r.recomputed, 1u);
  EXPECT_EQ(r.swapped, 0u);
  try {
    plan_vdnn(generator, gpu(), 300, {});
    FAIL() << "vDNN cannot lower the generator's peak";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("vdnn: needs 324 device bytes")) << e.what();
  }
}

}  // namespace
}  // namespace memwall
