// `memwall trace`: a real trace end to end, and bad input as one line with
// exit code 2 and no output file.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "run_memwall.h"

namespace memwall::testing {
namespace {

bool torch_importable() {
  static const bool ok =
      std::system("/usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1") == 0;
  return ok;
}

#define REQUIRE_TORCH()                                                                       \
  do {                                                                                        \
    if (!torch_importable()) {                                                                \
      GTEST_SKIP() << "python3-torch / python3-torchvision are not importable by "            \
                      "/usr/bin/python3: `make test` installs them (scripts/install-deps.sh " \
                      "--torch, best effort) and the install failed or did not run";          \
    }                                                                                         \
  } while (0)

std::string out_path(const char* tag) {
  return ::testing::TempDir() + "memwall_trace_" + tag + "_" + std::to_string(getpid()) + ".json";
}

std::string script(const char* spec) {
  return std::string(MEMWALL_SOURCE_DIR) + "/tests/python/" + spec;
}

TEST(TraceCli, TorchvisionModelToGraphFile) {
  REQUIRE_TORCH();
  const std::string out = out_path("resnet18");
  RunResult r = run_memwall("trace --torchvision resnet18 --batch 4 --image 64 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resnet18 b4 i64 traced (meta device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("11,689,512"), std::string::npos) << r.out;  // torchvision's num_params
  const Graph g = read_graph_file(out);
  EXPECT_EQ(param_count(g), 11689512u);
  // Every other verb accepts it.
  RunResult inspect = run_memwall("inspect --graph " + out + " --json");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(nlohmann::json::parse(inspect.out).at("param_count"), 11689512);
  std::filesystem::remove(out);
}

TEST(TraceCli, ScriptWithJsonOutput) {
  REQUIRE_TORCH();
  const std::string out = out_path("script");
  RunResult r =
      run_memwall("trace --script " + script("tiny_cnn.py:build") + " --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("param_count"), 2690);
  EXPECT_EQ(j.at("device"), "meta");
  EXPECT_EQ(j.at("out"), out);
  const Graph g = read_graph_file(out);
  EXPECT_EQ(j.at("ops"), g.ops.size());
  EXPECT_EQ(j.at("peak_bytes"), memory_profile(g).peak_bytes);
  std::filesystem::remove(out);
}

void expect_one_line_failure(const std::string& args, const std::string& expected) {
  const std::string out = out_path("bad");
  std::filesystem::remove(out);
  RunResult r = run_memwall(args + " --out " + out);
  EXPECT_EQ(r.exit_code, 2) << args;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("memwall: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out)) << args;
}

TEST(TraceCli, BadFlags) {
  expect_one_line_failure("trace", "--torchvision NAME or --script");
  expect_one_line_failure("trace --torchvision resnet18 --script a.py:f", "excludes");
  expect_one_line_failure("trace --torchvision resnet18 --batch 0", "--batch");
  expect_one_line_failure("trace --torchvision resnet18 --batch x", "--batch");
  expect_one_line_failure("trace --torchvision resnet18 --image -3", "--image");
  expect_one_line_failure("trace --torchvision resnet18 --optimizer lion", "lion");
  expect_one_line_failure("trace --script a.py:f --batch 4", "--batch and --image apply");
  RunResult r = run_memwall("trace --torchvision resnet18");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
}

TEST(TraceCli, UnknownModelMissingScriptOrFunction) {
  REQUIRE_TORCH();
  expect_one_line_failure("trace --torchvision resnet51",
                          "unknown torchvision classification model 'resnet51'");
  expect_one_line_failure("trace --script " + script("nowhere.py:build"), "does not exist");
  expect_one_line_failure("trace --script " + script("tiny_cnn.py:nothing"),
                          "has no function 'nothing'");
  expect_one_line_failure("trace --script " + script("untraceable.py:build"),
                          "operator aten::nonzero failed");
}

TEST(TraceCli, NoPython) {
  ::setenv("MEMWALL_PYTHON", "/nonexistent/python3", 1);
  expect_one_line_failure("trace --torchvision resnet18", "no Python interpreter");
  ::unsetenv("MEMWALL_PYTHON");
}

}  // namespace
}  // namespace memwall::testing
