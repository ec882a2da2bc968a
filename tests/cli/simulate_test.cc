// `memwall simulate` end to end: figures agree with the library, exports are
// written, bad plans get one line and exit code 2, invalid plans exit 1.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"
#include "run_memwall.h"
#include "test_util.h"

namespace memwall {
namespace {

namespace fs = std::filesystem;
using testing::count_lines;
using testing::run_memwall;

const char* kSimModel = "--model gpt2-small --batch 2 --seq 128";

Graph sim_model_graph() { return build_model("gpt2-small", {.batch = 2, .seq = 128}); }

TEST(CliSimulate, DefaultPlanFiguresAgreeWithTheLibrary) {
  const auto r = run_memwall(std::string("simulate ") + kSimModel + " --gpu a100-40g --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const Graph graph = sim_model_graph();
  const Hardware& hw = find_gpu("a100-40g");
  const SimResult lib = simulate(graph, default_plan(graph, hw.name, hw.device_memory_bytes), hw);
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_EQ(j["peak_bytes"]["device"], memory_profile(graph).peak_bytes);
  EXPECT_EQ(j["iteration_time_s"].get<double>(), lib.iteration_time);
  EXPECT_EQ(j["budget"], hw.device_memory_bytes);
  EXPECT_EQ(j["steps"], default_plan(graph, hw.name, 0).steps.size());
  for (const char* link : {"h2d", "d2h", "nvme_read", "nvme_write"}) {
    EXPECT_EQ(j["bytes_moved"][link], 0) << link;
  }
}

TEST(CliSimulate, PlanFileTraceAndSvg) {
  const Graph graph = sim_model_graph();
  const BufferUses uses(graph);
  std::vector<Eviction> evictions;
  for (const Buffer& b : graph.buffers) {
    if (b.kind != BufferKind::kActivation) continue;
    if (auto gap = largest_gap(uses, b.id, 50)) evictions.push_back(*gap);
  }
  ASSERT_FALSE(evictions.empty());
  const Plan plan = plan_with_evictions(graph, evictions, "a100-40g", uint64_t{40} << 30);
  const std::string plan_path = temp_path("plan.json");
  const std::string trace_path = temp_path("trace.json");
  const std::string svg_path = temp_path("memory.svg");
  write_plan_file(plan, plan_path);
  const auto r = run_memwall(std::string("simulate ") + kSimModel + " --gpu a100-40g --plan " +
                             plan_path + " --trace " + trace_path + " --svg " + svg_path);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("valid                   yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("moved h2d / d2h"), std::string::npos) << r.out;
  std::ifstream trace(trace_path);
  const auto t = nlohmann::json::parse(trace);
  EXPECT_GT(t["traceEvents"].size(), plan.steps.size() / 2);
  std::ifstream svg(svg_path);
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<?xml", 0), 0u);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  fs::remove(plan_path);
  fs::remove(trace_path);
  fs::remove(svg_path);
}

TEST(CliSimulate, InvalidPlanExitsOneWithTheReason) {
  const auto r = run_memwall(std::string("simulate ") + kSimModel + " --budget 1MiB");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("valid                   no: initial placement: device memory exceeds "
                       "the budget by "),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(
      run_memwall(std::string("simulate ") + kSimModel + " --budget 50%peak --json").out);
  EXPECT_FALSE(j["valid"].get<bool>());
  // Note [Budget shares]: of the keep-all plan's simulated peak.
  const Graph g = sim_model_graph();
  const Hardware& hw = find_gpu("a100-80g");
  EXPECT_EQ(j["budget"], device_peak(simulate(g, default_plan(g, hw.name, kMaxBytes), hw)) / 2);
  EXPECT_TRUE(j.contains("failed_step"));
  EXPECT_NE(j["reason"].get<std::string>().find("exceeds the budget"), std::string::npos);
}

TEST(CliSimulate, BadInputIsOneLineAndExitTwo) {
  const std::string bad_plan = temp_path("bad.json");
  std::ofstream(bad_plan) << R"({"format": "memwall.plan/1", "graph": 3})";
  const std::string other_graph = temp_path("other.json");
  write_plan_file(Plan{.graph = "another graph", .hardware = "a100-80g", .budget = 1}, other_graph);
  const std::string out_of_range = temp_path("range.json");
  write_plan_file(Plan{.graph = sim_model_graph().name,
                       .hardware = "a100-80g",
                       .budget = 1,
                       .steps = {Step::compute(1 << 30)}},
                  out_of_range);
  for (const std::string& args : {
           std::string("--plan /nonexistent/plan.json"),
           "--plan " + bad_plan,
           "--plan " + other_graph,
           "--plan " + out_of_range,
           std::string("--budget 0"),
           std::string("--budget -5GiB"),
           std::string("--budget 99999999999TiB"),
           std::string("--budget lots"),
           std::string("--gpu no-such-gpu"),
           std::string("--gpus-per-node 0"),
           std::string("--gpus-per-node -2"),
           std::string("--gpus-per-node 2048"),
       }) {
    const auto r = run_memwall(std::string("simulate ") + kSimModel + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("memwall: error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  fs::remove(bad_plan);
  fs::remove(other_graph);
  fs::remove(out_of_range);
}

}  // namespace
}  // namespace memwall
