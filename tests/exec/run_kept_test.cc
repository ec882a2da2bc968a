// `memwall run` on one kept trace of the CNN with batch norm (issue 22):
// bad input is one line (a graph without calls, a plan for another graph, a
// zoo graph, a budget the run overruns, an NVMe fault, an unwritable trace),
// the options (sources, threads, --trace, offsets, another profile), kernel
// timing for `memwall calibrate --graph`, and the host peak. The trace is
// made once for every test process (Note [Shared test traces]).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_memwall.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/plan/plan.h"
#include "run_checks.h"

namespace memwall::testing {
namespace {

// ---- Bad input ------------------------------------------------------------------------

class RunKept : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = kept_cnn_bn("bad");
    if (!dir.empty()) dir_ = new std::string(dir);
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static std::string* dir_;
};
std::string* RunKept::dir_ = nullptr;

// The keep-all plan of `graph` on the L4 profile, written to `plan`.
void plan_keep_all(const std::string& graph, const std::string& plan) {
  const RunResult r =
      run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:keep-all --out " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(RunKept, AGraphWithoutCallsIsNotRunnable) {
  REQUIRE_EXECUTOR();
  Graph g = read_graph_file(*dir_ + "/graph.json");
  g.meta.erase("calls");
  for (Op& op : g.ops) op.call.clear();
  const std::string file = *dir_ + "/no_calls.json";
  write_graph_file(g, file);
  const std::string plan = *dir_ + "/no_calls_plan.json";
  ASSERT_NO_FATAL_FAILURE(plan_keep_all(file, plan));
  expect_one_line(run_memwall("run --graph " + file + " --plan " + plan), 2,
                  "carries no call records");
}

TEST_F(RunKept, APlanForAnotherGraph) {
  REQUIRE_EXECUTOR();
  const std::string plan = *dir_ + "/zoo_plan.json";
  ASSERT_EQ(run_memwall("plan --model gpt2-small --gpu l4 --strategy remat:keep-all --out " + plan)
                .exit_code,
            0);
  expect_one_line(run_memwall("run --graph " + *dir_ + "/graph.json --plan " + plan +
                              " --keep-values " + *dir_),
                  2, "the plan is for graph \"gpt2-small");
}

// A graph traced at one thread runs at one thread, whatever torch's
// default: its CPU kernels' scratch (per-thread rows, oneDNN's GEMM
// fallback) was planned for that count (meta.threads, request_for). At 2
// threads ResNet-18 b4 64x64's GEMM scratch is 75.6 MB, planned 37.8 MB.
TEST_F(RunKept, RunsAtTheThreadCountItWasTracedWith) {
  REQUIRE_EXECUTOR();
  const std::string dir = dir_for("threads");
  std::filesystem::create_directories(dir);
  const std::string graph = dir + "/graph.json";
  const std::string plan = dir + "/plan.json";
  const RunResult traced = run_memwall("trace --script " + models("cnn_bn") +
                                       " --kernels cpu --threads 1 --out " + graph);
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(read_graph_file(graph).meta.value("threads", 0), 1);
  const RunResult planned =
      run_memwall("plan --graph " + graph +
                  " --gpu l4 --strategy remat:keep-all --budget 105%peak --out " + plan);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const RunResult r = run_memwall("run --graph " + graph + " --plan " + plan + " --steps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("threads"), 1);
  std::filesystem::remove_all(dir);
}

TEST_F(RunKept, AZooGraph) {
  REQUIRE_EXECUTOR();
  const std::string plan = *dir_ + "/zoo.json";
  const std::string graph = *dir_ + "/zoo_graph.json";
  ASSERT_EQ(run_memwall("inspect --model gpt2-small --export " + graph).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(plan_keep_all(graph, plan));
  expect_one_line(run_memwall("run --graph " + graph + " --plan " + plan), 2,
                  "zoo graphs are not runnable");
}

// Note [Plans that run] (src/planner/runnable_plan.cc), issue 45: the simulator
// counts bytes and the stitching allocator maps 2 MiB chunks, so a plan
// without offsets at the budget of its byte count ran out of device memory
// mid-run (exit 1) after `memwall plan` wrote it. Now keep-all, which cannot
// be planned for less, is refused by `memwall plan --no-layout` at that
// budget, and a plan without offsets that the allocator cannot hold is
// refused by `memwall run` before it traces; laid out, 0.1% above its peak
// runs in its arena.
TEST_F(RunKept, ABudgetTheRunOverruns) {
  REQUIRE_EXECUTOR();
  const std::string graph = *dir_ + "/graph.json";
  const std::string plan = *dir_ + "/tight.json";
  // The simulated keep-all peak: it holds each op's workspace span (Note
  // [Workspace span]), which the eager memory profile does not.
  const RunResult kept =
      run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:keep-all --json");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const auto peak = nlohmann::json::parse(kept.out).at("peak_bytes").get<uint64_t>();
  expect_one_line(run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:keep-all " +
                              "--out " + plan + " --no-layout --budget " + std::to_string(peak)),
                  2, "on the stitching allocator it needs");
  EXPECT_FALSE(std::filesystem::exists(plan));
  // Laid out (the default), 0.1% above its peak is enough: no rounding, and
  // the run's scratch is the op's workspace, in its place (0.03% more than
  // the model of this machine's kernels: docs/exec.md).
  const uint64_t budget = peak + peak / 1000;
  ASSERT_EQ(run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:keep-all --out " +
                        plan + " --budget " + std::to_string(budget))
                .exit_code,
            0);
  ASSERT_FALSE(read_plan_file(plan).offsets.empty());
  const RunResult r = run_memwall("run --graph " + graph + " --plan " + plan +
                                  " --steps 2 --json --keep-values " + *dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const nlohmann::json& step : nlohmann::json::parse(r.out).at("steps")) {
    EXPECT_LE(step.at("arena_bytes").get<uint64_t>(), budget);
  }
  // The same plan without its offsets is refused before the run.
  nlohmann::json bare = nlohmann::json::parse(std::ifstream(plan));
  for (const char* key : {"offsets", "stay_offsets", "workspace_offsets"}) bare.erase(key);
  std::ofstream(plan) << bare.dump();
  expect_one_line(run_memwall("run --graph " + graph + " --plan " + plan + " --steps 1 " +
                              "--keep-values " + *dir_),
                  2, "its allocations do not fit the budget");
}

TEST_F(RunKept, SourcesAndOptions) {
  REQUIRE_EXECUTOR();
  expect_one_line(run_memwall("run"), 2, "give --graph G --plan P");
  expect_one_line(run_memwall("run --graph " + *dir_ + "/graph.json"), 2, "--graph needs --plan");
  expect_one_line(run_memwall("run --builtin gpt-mini"), 2, "name the profile");
  expect_one_line(run_memwall("run --builtin gpt-mini --gpu l4 --steps 0"), 2, "--steps");
  expect_one_line(run_memwall("run --builtin no-such-model --gpu l4"), 2, "no-such-model");
  // Data-parallel ranks in one go (docs/exec.md, "Ranks").
  expect_one_line(run_memwall("run --builtin gpt-mini --gpu l4 --ranks 0"), 2,
                  "--ranks must be a positive integer");
  expect_one_line(run_memwall("run --builtin gpt-mini --gpu l4 --ranks 65"), 2,
                  "memwall run starts at most 64");
  expect_one_line(run_memwall("run --builtin gpt-mini --gpu l4 --zero-stage 2"), 2,
                  "give --ranks 2 or more");
  expect_one_line(run_memwall("run --builtin gpt-mini --gpu l4 --ranks 2 --zero-stage 4"), 2,
                  "ZeRO stage 4 does not exist");
  expect_one_line(
      run_memwall("run --graph " + *dir_ + "/graph.json --plan " + *dir_ + "/graph.json --ranks 2"),
      2, "a --graph says its own");
}

TEST_F(RunKept, TraceOfTheRunInTheSimulatorsLayout) {
  REQUIRE_EXECUTOR();
  const std::string graph = *dir_ + "/graph.json";
  const std::string plan = *dir_ + "/vdnn.json";
  const uint64_t peak = memory_profile(read_graph_file(graph)).peak_bytes;
  ASSERT_EQ(run_memwall("plan --graph " + graph + " --gpu l4 --strategy vdnn --out " + plan +
                        " --budget " + std::to_string(peak * 8 / 10))
                .exit_code,
            0);
  const std::string trace = *dir_ + "/run.trace.json";
  const RunResult r =
      run_memwall("run --graph " + graph + " --plan " + plan + " --steps 1 --keep-values " + *dir_ +
                  " --budget " + std::to_string(peak * 2) + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json t = nlohmann::json::parse(slurp(trace));
  // One span per plan step on its resource's track (compute 1, h2d 2, d2h
  // 3: report/chrome_trace.cc), and the device memory counter.
  std::map<int, int> spans;
  int counters = 0;
  for (const nlohmann::json& e : t.at("traceEvents")) {
    if (e.at("ph") == "X") ++spans[e.at("tid").get<int>()];
    if (e.at("ph") == "C" && e.at("name") == "device memory") ++counters;
  }
  const Plan p = read_plan_file(plan);
  int computes = 0, outs = 0, ins = 0;
  for (const Step& s : p.steps) {
    computes += s.kind == StepKind::kCompute || s.kind == StepKind::kRecompute;
    outs += s.kind == StepKind::kSwapOut;
    ins += s.kind == StepKind::kSwapIn;
  }
  EXPECT_GT(outs, 0);
  EXPECT_EQ(spans[1], computes);
  EXPECT_EQ(spans[2], ins);
  EXPECT_EQ(spans[3], outs);
  EXPECT_EQ(counters, static_cast<int>(p.steps.size()));
  EXPECT_EQ(t.at("traceEvents").at(0).at("args").at("name"), "memwall run");
}

// ZeRO-Infinity's plan keeps optimizer states and parameters on NVMe.
TEST_F(RunKept, AnNvmeFaultFailsTheRunAndLeavesNoSwapFiles) {
  REQUIRE_EXECUTOR();
  const std::string swap = *dir_ + "/swap";
  std::filesystem::create_directories(swap);
  // ENOSPC is not retried (runtime/nvme_faults.h): the run fails, one line.
  expect_one_line(run_memwall("run " + infinity_plan(*dir_) + " --nvme-dir " + swap +
                              " --nvme-faults enospc@3"),
                  1, "NVMe");
  EXPECT_TRUE(std::filesystem::is_empty(swap));
  // EIO is retried: the run goes on, and still gives eager's bits.
  const RunResult r = run_memwall("run " + infinity_plan(*dir_) + " --nvme-dir " + swap +
                                  " --nvme-faults eio@2,short@4 --check-eager --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("eager_equal"), true);
  EXPECT_GT(nlohmann::json::parse(r.out)
                .at("steps")
                .at(0)
                .at("bytes_moved")
                .at("nvme_write")
                .at("measured"),
            0);
  EXPECT_TRUE(std::filesystem::is_empty(swap));
  expect_one_line(run_memwall("run " + infinity_plan(*dir_) + " --nvme-faults bogus@1"), 2,
                  "--nvme-faults");
}

TEST_F(RunKept, APlanWithOffsetsRunsInItsArena) {
  REQUIRE_EXECUTOR();
  // Note [Plans laid out by default]: `memwall plan --out` pins every
  // buffer's stays and every op's workspace; the run puts each there, and
  // kernels' scratch in their op's workspace, eager's bits all the same.
  const std::string graph = *dir_ + "/graph.json";
  const std::string plan = *dir_ + "/chen.json";
  const std::string laid = *dir_ + "/laid.json";
  const uint64_t peak = memory_profile(read_graph_file(graph)).peak_bytes;
  const RunResult planned =
      run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:chen-greedy --budget " +
                  std::to_string(peak * 8 / 10) + " --json --out " + plan);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json layout = nlohmann::json::parse(planned.out).at("layout");
  ASSERT_EQ(layout.at("pinned"), true) << layout.dump();
  EXPECT_EQ(layout.at("alignment"), 64);
  EXPECT_LE(layout.at("arena_over_live_peak").get<double>(), 1.01);
  const Plan p = read_plan_file(plan);
  EXPECT_FALSE(p.stay_offsets.empty());  // dropped activations come back elsewhere
  EXPECT_FALSE(p.workspace_offsets.empty());
  // `memwall layout --plan` lays a plan out the same way.
  const RunResult relaid =
      run_memwall("layout --graph " + graph + " --plan " + plan + " --gpu l4 --out " + laid);
  ASSERT_EQ(relaid.exit_code, 0) << relaid.err;
  const RunResult again = run_memwall("run --graph " + graph + " --plan " + laid +
                                      " --steps 1 --check-eager --json --keep-values " + *dir_);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).at("eager_equal"), true);
  const RunResult r = run_memwall("run --graph " + graph + " --plan " + plan +
                                  " --steps 1 --check-eager --json --keep-values " + *dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("eager_equal"), true);
  EXPECT_EQ(j.at("policy"), "plan offsets");
  const nlohmann::json& step = j.at("steps").at(0);
  const auto arena = step.at("arena_bytes").get<uint64_t>();
  EXPECT_GE(arena, layout.at("arena_bytes").get<uint64_t>());
  EXPECT_LE(arena, p.budget);
  EXPECT_NEAR(
      static_cast<double>(arena) / step.at("device_peak_bytes").at("predicted").get<double>(), 1.0,
      0.01);
}

// Note [Waiting for an address]: the layout of a swap plan follows its
// profile's copy times; under another profile's a stay can land where an
// outgoing copy still reads. The simulator waits there as the executor
// does, so the plan still runs, in its arena, bit for bit.
TEST_F(RunKept, APlanLaidOutForOneProfileRunsUnderAnother) {
  REQUIRE_EXECUTOR();
  const std::string graph = *dir_ + "/graph.json";
  const std::string plan = *dir_ + "/vdnn.json";
  const uint64_t peak = memory_profile(read_graph_file(graph)).peak_bytes;
  const RunResult planned =
      run_memwall("plan --graph " + graph + " --gpu l4 --strategy vdnn " + "--budget " +
                  std::to_string(peak * 8 / 10) + " --out " + plan);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  ASSERT_FALSE(read_plan_file(plan).offsets.empty());
  const RunResult r =
      run_memwall("run --graph " + graph + " --plan " + plan +
                  " --gpu rtx4090 --steps 1 --check-eager --json --keep-values " + *dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("eager_equal"), true);
  EXPECT_EQ(j.at("policy"), "plan offsets");
  EXPECT_LE(j.at("steps").at(0).at("arena_bytes").get<uint64_t>(),
            j.at("planned_arena_bytes").get<uint64_t>() * 1001 / 1000);
}

// Note [Measured kernels]: calibrate --graph times every device op of the
// graph in place and keys them by signature; the profile then predicts the
// keep-all step as the sum of those times, and graphs written with it keep
// none of them. On the emulated device it also measures the copies'
// contention with the step (Note [Measuring copy contention]), which leaves
// a keep-all step (no copies) as it was.
TEST_F(RunKept, CalibrateTimesTheGraphsKernels) {
  REQUIRE_EXECUTOR();
  const std::string graph = *dir_ + "/graph.json";
  const std::string base = *dir_ + "/l4.json";
  {
    Hardware emulated = find_gpu("l4");
    emulated.device_is_host_cpu = true;
    std::ofstream out(base);
    out << hardware_to_json(emulated).dump();
  }
  const std::string profile = *dir_ + "/kernels.json";
  const RunResult c =
      run_memwall("calibrate --from " + base + " --graph " + graph + " --keep-values " + *dir_ +
                  " --kernel-iterations 2 --kernel-rounds 2 --json --out " + profile);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const nlohmann::json timed = nlohmann::json::parse(c.out).at("timed").at(0);
  const Graph g = read_graph_file(graph);
  EXPECT_EQ(timed.at("ops").get<size_t>(), g.ops.size());  // all on the device
  const Hardware hw = read_hardware_file(profile);
  EXPECT_EQ(hw.kernel_seconds.size(), timed.at("kernels").get<size_t>());
  EXPECT_LT(hw.kernel_seconds.size(), g.ops.size());              // Adam's ops share kernels
  EXPECT_EQ(hw.peak_flops_fp32, find_gpu("l4").peak_flops_fp32);  // the rest is --from's
  // Slowdowns, measured: at least 1 each, and what the profile holds.
  const nlohmann::json contention = timed.at("copy_contention");
  EXPECT_GE(contention.at("compute").get<double>(), 1.0);
  EXPECT_GE(contention.at("copy").get<double>(), 1.0);
  EXPECT_EQ(hw.copy_contention.compute, contention.at("compute").get<double>());
  EXPECT_EQ(hw.copy_contention.copy, contention.at("copy").get<double>());
  // Note [Op overhead]: the step's time outside its kernels, per op: some,
  // and well under a kernel's (these run 10-1000 us here).
  const double overhead = timed.at("op_overhead").get<double>();
  EXPECT_GT(overhead, 0.0);
  EXPECT_LT(overhead, 1e-4);
  EXPECT_EQ(hw.op_overhead, overhead);

  const std::string plan = *dir_ + "/measured_plan.json";
  const std::string written = *dir_ + "/measured_graph.json";
  ASSERT_EQ(run_memwall("plan --graph " + graph + " --gpu-file " + profile +
                        " --strategy remat:keep-all --out " + plan + " --out-graph " + written)
                .exit_code,
            0);
  for (const Op& op : read_graph_file(written).ops) EXPECT_FALSE(op.time) << op.name;
  const RunResult r = run_memwall("run --graph " + graph + " --plan " + plan + " --keep-values " +
                                  *dir_ + " --gpu-file " + profile + " --steps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double predicted = nlohmann::json::parse(r.out)
                               .at("steps")
                               .at(0)
                               .at("step_time_s")
                               .at("predicted")
                               .get<double>();
  // Keep-all computes every op once: the sum of the medians, up to the
  // mean within a kernel, and each op's overhead.
  EXPECT_NEAR(predicted,
              timed.at("seconds").get<double>() + static_cast<double>(g.ops.size()) * overhead,
              1e-9);

  expect_one_line(run_memwall("calibrate --from " + base), 2, "name a --graph");
  const std::string zoo = *dir_ + "/zoo_for_calibrate.json";
  ASSERT_EQ(run_memwall("inspect --model gpt2-small --export " + zoo).exit_code, 0);
  expect_one_line(run_memwall("calibrate --from " + base + " --graph " + zoo + " --out " + *dir_ +
                              "/never.json"),
                  2, "carries no call records");
  EXPECT_FALSE(std::filesystem::exists(*dir_ + "/never.json"));
}

// Note [Host pool blocks]: the runtime's pinned pool gives each buffer
// whole 4 KiB pages, and `memwall run` predicts its host peak so. On the
// emulated device (the issuing thread blocks where the executor waits,
// Note [The emulated device's thread]) the prediction is the pool's peak
// to the byte: swaps to the host (vDNN), the optimizer on the host
// (ZeRO-Offload) and NVMe through bounce buffers (ZeRO-Infinity). Counted
// in bytes, cnn_bn's ZeRO-Offload plan was predicted 280,728 against
// 520,192 in the pool.
TEST_F(RunKept, TheHostPeakIsThePoolsPages) {
  REQUIRE_EXECUTOR();
  const std::string graph = *dir_ + "/graph.json";
  const std::string profile = *dir_ + "/emulated_l4.json";
  {
    Hardware emulated = find_gpu("l4");
    emulated.device_is_host_cpu = true;
    std::ofstream(profile) << hardware_to_json(emulated).dump();
  }
  const uint64_t peak = memory_profile(read_graph_file(graph)).peak_bytes;
  for (const auto& [strategy, share] : {std::pair<std::string, double>{"vdnn", 0.8},
                                        {"zero-offload", 1.02},
                                        {"zero-infinity", 1.02}}) {
    SCOPED_TRACE(strategy);
    const auto budget = static_cast<uint64_t>(share * static_cast<double>(peak));
    const std::string plan = *dir_ + "/host_" + strategy + ".json";
    const std::string rewritten = *dir_ + "/host_" + strategy + "_graph.json";
    const RunResult planned = run_memwall(
        "plan --graph " + graph + " --gpu-file " + profile + " --strategy " + strategy +
        " --budget " + std::to_string(budget) + " --out " + plan + " --out-graph " + rewritten);
    ASSERT_EQ(planned.exit_code, 0) << planned.err;
    const std::string run_graph = std::filesystem::exists(rewritten) ? rewritten : graph;
    const RunResult r =
        run_memwall("run --graph " + run_graph + " --plan " + plan + " --keep-values " + *dir_ +
                    " --gpu-file " + profile + " --steps 2 --json --budget " +
                    std::to_string(budget + (uint64_t{32} << 20)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const nlohmann::json& step : nlohmann::json::parse(r.out).at("steps")) {
      const auto measured = step.at("host_peak_bytes").at("measured").get<uint64_t>();
      const auto predicted = step.at("host_peak_bytes").at("predicted").get<uint64_t>();
      EXPECT_GT(predicted, 0u);
      EXPECT_EQ(predicted % 4096, 0u);
      EXPECT_EQ(measured, predicted) << "step " << step.at("step");
    }
  }
}

TEST_F(RunKept, AnUnwritableTraceFailsBeforeTheRun) {
  REQUIRE_EXECUTOR();
  expect_one_line(run_memwall("run --graph " + *dir_ + "/graph.json --plan " + *dir_ +
                              "/none.json --trace /nonexistent/dir/t.json"),
                  2, "/nonexistent/dir/t.json");
}

}  // namespace
}  // namespace memwall::testing
