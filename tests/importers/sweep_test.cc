// Every classification model of the pinned torchvision (0.29.2, python/
// requirements.txt; torchvision.models.
// list_models(module=torchvision.models): 80 builders) traces at batch 8 on
// the meta device and its graph validates. One Python process traces them
// all (one torch import instead of 80); each graph is then read back with
// memwall's reader, which validates it.
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "torch_env.h"

namespace memwall {
namespace {

// Under AddressSanitizer the C++ reader is what the sanitizer checks; a few
// architectures of different families cover it (the Release build runs all).
constexpr const char* kAsanModels =
    "resnet18,mobilenet_v3_small,squeezenet1_0,vit_b_32,swin_t,inception_v3,efficientnet_b0";

TEST(Sweep, EveryTorchvisionClassifierTracesAndValidates) {
  MEMWALL_REQUIRE_TORCH();
  const std::string dir = ::testing::TempDir() + "memwall_sweep_" + std::to_string(::getpid());
  std::vector<std::string> args = {"--sweep", dir, "--batch", "8"};
  if (kAsan) {
    args.push_back("--only");
    args.push_back(kAsanModels);
  }
  const std::string out = importers::run_torch_tracer(args);
  int traced = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name, status;
    words >> name >> status;
    EXPECT_EQ(status, "ok") << line;
    if (status != "ok") continue;
    const Graph g = read_graph_file(dir + "/" + name + ".json");  // validates
    EXPECT_EQ(g.meta.at("model"), name);
    EXPECT_EQ(g.meta.at("batch"), 8);
    EXPECT_EQ(param_count(g), g.meta.at("param_count").get<uint64_t>()) << name;
    EXPECT_GT(memory_summary(g).saved_activation_bytes, 0u) << name;
    ++traced;
  }
  std::filesystem::remove_all(dir);
  if (kAsan) {
    EXPECT_EQ(traced, 7);
    GTEST_SKIP() << "AddressSanitizer build: traced a reduced sweep of 7 of torchvision's 80 "
                    "classifiers (the Release build traces all 80)";
  }
  EXPECT_EQ(traced, 80);
}

}  // namespace
}  // namespace memwall
