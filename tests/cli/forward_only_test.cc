// Forward-only programs from the command line (issue 19): `--forward-only`
// builds a zoo model's forward pass, `memwall plan` plans a forward-only
// graph file below its keep-all peak, and what cannot plan it says so in
// one line with exit code 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "memwall/graph/graph.h"
#include "remat/forward_only_graphs.h"
#include "run_memwall.h"
#include "test_util.h"

namespace memwall {
namespace {

using testing::run_memwall;

TEST(CliForwardOnly, ZooForwardPassHasNoBackward) {
  const auto r = run_memwall("inspect --model resnet50 --batch 2 --image 64 --forward-only --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resnet50 b2 i64 bf16 forward-only"), std::string::npos) << r.out;
  const auto bad =
      run_memwall("inspect --model resnet50 --batch 2 --image 64 --forward-only --optimizer sgd");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "memwall: error: --optimizer sgd does not apply to --forward-only, which has no "
            "optimizer step\n");
}

// remat/forward_only_graphs.h: the U-Net-like graph keeps 200 bytes at
// most, and recomputing enc1 before dec1 gets it to 152.
TEST(CliForwardOnly, PlansAGraphFileBelowItsKeepAllPeak) {
  const std::string graph = temp_path("unet_like.json");
  write_graph_file(testing::unet_like(), graph);
  for (const std::string strategy : {"remat", "remat:checkmate", "auto"}) {
    const auto r =
        run_memwall("plan --graph " + graph + " --strategy " + strategy + " --budget 160 --json");
    ASSERT_EQ(r.exit_code, 0) << strategy << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["peak_bytes"], 152u) << strategy;
  }
  const auto rotor = run_memwall("plan --graph " + graph + " --strategy remat:rotor --budget 160");
  EXPECT_EQ(rotor.exit_code, 2);
  EXPECT_TRUE(rotor.err.starts_with("memwall: error: rotor: unet-like has no backward ops"))
      << rotor.err;
  EXPECT_EQ(rotor.err.find('\n'), rotor.err.size() - 1) << rotor.err;
  EXPECT_TRUE(rotor.out.empty());
}

}  // namespace
}  // namespace memwall
