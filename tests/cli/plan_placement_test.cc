// `memwall plan --pipeline-parallel N --partition ip` end to end: the
// integer programme's placement (Note [Non-contiguous placement]) printed
// with its objective against the best contiguous one, the simulation's
// figures plan_placement's, and bad input one line with exit code 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_placement.h"
#include "run_memwall.h"

namespace memwall {
namespace {

using testing::run_memwall;

// VGG-16's 16 layers on 4 devices: unequal enough that the programme
// places some devices' layers in two runs.
const std::string kPlacementModel =
    "--model vgg16 --batch 2 --pipeline-parallel 4 --micro-batches 8";

TEST(PlanPlacement, JsonIsThePlacementsPlanAndBeatsContiguous) {
  const testing::RunResult r = run_memwall("plan " + kPlacementModel + " --partition ip --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const Graph graph = build_model("vgg16", {.batch = 2});
  const PlacementPlan want = plan_placement(graph, find_gpu("a100-80g"),
                                            {.devices = 4, .micro_batches = 8}, Deadline::in(10));
  EXPECT_EQ(j["partition"], "ip");
  const nlohmann::json& p = j["placement"];
  EXPECT_EQ(p["segment_devices"].get<std::vector<int>>(), want.placement.device);
  EXPECT_EQ(p["max_load_s"].get<double>(), want.placement.max_load);
  EXPECT_TRUE(p["optimal"].get<bool>());
  EXPECT_LT(p["max_load_s"].get<double>(), p["contiguous_max_load_s"].get<double>());
  EXPECT_EQ(j["step_time_s"].get<double>(), want.plan.sim.step_time);
  ASSERT_EQ(j["chunks"].size(), want.chunk_devices.size());
  EXPECT_GT(j["chunks"].size(), 4u);  // some device runs two chunks
  for (size_t k = 0; k < want.chunk_devices.size(); ++k) {
    EXPECT_EQ(j["chunks"][k]["device"], want.chunk_devices[k]);
  }
}

TEST(PlanPlacement, TextShowsEachDevicesSegmentsAndBothObjectives) {
  const testing::RunResult r = run_memwall("plan " + kPlacementModel + " --partition ip");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"ip (Tarnawski et al.'s integer programme, non-contiguous)",
                           "ip objective", "(proven optimal), contiguous best", "segments (of 16)",
                           "list schedule over the placement, 8 micro-batches", "step time"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
}

TEST(PlanPlacement, BadInputIsOneLineAndExitCodeTwo) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kPlacementModel + " --partition ip --chunks-per-device 2",
       "--chunks-per-device does not apply to --partition ip"},
      {kPlacementModel + " --partition ip --ranks 2", "--ranks does not apply to --partition ip"},
      {kPlacementModel + " --partition ip --schedule interleaved", "not interleaved"},
      {kPlacementModel + " --partition ip --time-limit 0", "--time-limit must be"},
      {kPlacementModel + " --partition ip --budget 100MB",
       "pipeline: segment 1 alone needs 209323008 bytes with 4 micro-batches in flight, over the "
       "budget of 100000000 bytes a device"},
      {"--model vgg16 --gpus 4 --global-batch 8 --partition ip", "the layout search (--gpus)"},
  };
  for (const auto& [options, message] : cases) {
    const testing::RunResult r = run_memwall("plan " + options);
    EXPECT_EQ(r.exit_code, 2) << options;
    EXPECT_NE(r.err.find(message), std::string::npos) << options << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << options << ": " << r.err;
  }
}

}  // namespace
}  // namespace memwall
