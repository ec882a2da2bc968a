// `memwall run` (issue 22): plans of each planner executed on real tensors
// give the same losses and model states as eager PyTorch, bit for bit, and
// the device memory the simulator predicted; bad input is one line.
//
// Each model is traced once on real CPU tensors by `memwall run --keep-values`
// (its auto plan's run); every other plan is made for that graph and run on
// the kept values. Budgets are shares of the keep-all peak.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
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
#include "shared_traces.h"

namespace memwall::testing {
namespace {

struct Case {
  std::string strategy;
  double share;  // of the keep-all peak
};

// Traces `source` (memwall run's one-go path: auto plan), then runs each
// case's plan on the kept values.
void run_planners(const std::string& tag, const std::string& source,
                  const std::vector<Case>& cases) {
  const std::string dir = dir_for(tag);
  check_run(run_memwall("run " + source +
                        " --gpu l4 --steps 3 --check-eager --json "
                        "--keep-values " +
                        dir),
            tag + " auto");
  const std::string graph_file = dir + "/graph.json";
  ASSERT_TRUE(std::filesystem::exists(graph_file));
  const uint64_t peak = memory_profile(read_graph_file(graph_file)).peak_bytes;
  for (const Case& c : cases) {
    const auto budget = static_cast<uint64_t>(c.share * static_cast<double>(peak));
    const std::string plan = dir + "/plan.json";
    const std::string what = tag + " " + c.strategy + " at " + std::to_string(budget);
    // Offload rewrites the graph (its CPU steps): the plan runs that one.
    const std::string rewritten = dir + "/planned_graph.json";
    std::filesystem::remove(rewritten);
    const RunResult planned = run_memwall("plan --graph " + graph_file + " --gpu l4 --strategy " +
                                          c.strategy + " --budget " + std::to_string(budget) +
                                          " --out " + plan + " --out-graph " + rewritten);
    ASSERT_EQ(planned.exit_code, 0) << what << ": " << planned.err;
    const std::string graph_run = std::filesystem::exists(rewritten) ? rewritten : graph_file;
    // Note [Plans laid out by default]: a laid-out plan runs in an arena, the
    // device, with room above the layout for scratch that does not pack into
    // its op's workspace (Note [Scratch in the workspace]); one without
    // offsets on the stitching allocator, with room for its 2 MiB chunks
    // (docs/exec.md, "Allocator rounding").
    const bool laid_out = !read_plan_file(plan).offsets.empty();
    const uint64_t device = budget + std::max<uint64_t>(uint64_t{32} << 20, budget / 8);
    const nlohmann::json j =
        check_run(run_memwall("run --graph " + graph_run + " --plan " + plan +
                              " --gpu l4 --steps 3 --check-eager --json --keep-values " + dir +
                              " --budget " + std::to_string(device)),
                  what, budget);
    // Planners count each op's workspace span, so every layout fits its
    // budget (Note [Workspace span]).
    EXPECT_TRUE(laid_out) << what << ": no layout within the budget";
    if (!laid_out || j.is_null()) continue;
    EXPECT_EQ(j.at("policy"), "plan offsets") << what;
    // The arena every step really used is the plan's, to the small scratch
    // that the rules leave out (Note [Scratch in the workspace]).
    const auto pinned = j.at("planned_arena_bytes").get<double>();
    for (const nlohmann::json& step : j.at("steps")) {
      EXPECT_NEAR(step.at("arena_bytes").get<double>() / pinned, 1.0, 0.01)
          << what << " step " << step.at("step");
      // Note [Scratch before its output]: after the first step, outputs
      // are made at their offsets, not copied there.
      if (step.at("step").get<int>() > 1) {
        EXPECT_EQ(step.at("outputs_moved").get<uint64_t>(), 0u)
            << what << " step " << step.at("step");
      }
    }
    const nlohmann::json& last = j.at("steps").back();
    std::cout << what << ": laid out, arena / plan's arena "
              << last.at("arena_bytes").get<double>() / pinned << ", plan's arena / predicted peak "
              << pinned / last.at("device_peak_bytes").at("predicted").get<double>() << "\n";
  }
  std::filesystem::remove_all(dir);
}

const std::vector<Case> kEveryPlanner = {
    {"remat:keep-all", 1.02},  {"remat:chen-sqrt", 0.8},  {"remat:chen-greedy", 0.8},
    {"remat:rotor", 0.8},      {"remat:checkmate", 0.8},  {"remat:memwall", 0.8},
    {"remat:per-layer", 1.02}, {"remat:selective", 1.02}, {"vdnn", 0.8},
    {"capuchin", 0.8},         {"zero-offload", 1.02},    {"zero-infinity", 1.02},
    {"remat:dtr", 0.8}};

TEST(RunExec, CnnWithBatchNormEveryPlannerIsEagerBitForBit) {
  REQUIRE_EXECUTOR();
  run_planners("cnn_bn", "--script " + models("cnn_bn"), kEveryPlanner);
}

TEST(RunExec, UNetSwapRematAndOffloadPlansAreEagerBitForBit) {
  REQUIRE_EXECUTOR();
  run_planners("unet", "--script " + models("unet"),
               {{"remat:keep-all", 1.02},
                {"remat:chen-greedy", 0.85},
                {"remat:memwall", 0.7},
                {"vdnn", 0.85},
                {"capuchin", 0.9},
                {"zero-offload", 1.02}});
}

TEST(RunExec, TransformerWithDropoutRecomputesItsMasks) {
  REQUIRE_EXECUTOR();
  // gpt-mini (python/memwall_fidelity.py): dropout 0.1 after embeddings,
  // attention and MLP; Chen's plan recomputes 7 of its random ops, each of
  // which must draw its first mask again.
  run_planners("gpt_mini", "--builtin gpt-mini",
               {{"remat:keep-all", 1.02},
                {"remat:chen-sqrt", 0.9},
                {"remat:memwall", 0.9},
                {"capuchin", 0.9},
                {"zero-offload", 0.9},
                {"zero-infinity", 0.9}});
}

TEST(RunExec, MobileNetV2) {
  REQUIRE_EXECUTOR();
  run_planners(
      "mobilenet_v2", "--torchvision mobilenet_v2 --batch 8 --image 64",
      {{"remat:keep-all", 1.02}, {"remat:memwall", 0.95}, {"vdnn", 0.95}, {"zero-infinity", 0.95}});
}

// ResNet-18 b4 at 64x64: its last stage is 2x2 under 3x3 kernels, whose
// weight gradients oneDNN computes by GEMM on AVX2 CPUs (_gemm_weight_pass
// in python/memwall_scratch.py: 4 weights' worth of scratch), and its
// layer3 downsampling returns two gradients of one size after five scratch
// buffers of that size (Note [Outputs on each other's offsets]). Before
// both, its laid-out keep-all plan failed on an AVX2 host: no room in the
// arena for the GEMM's 37.8 MB. Keep-all needs 1.037x the eager peak here:
// the GEMM's span is a weight gradient more than its workspace.
TEST(RunExec, ResNet18AtASmallImage) {
  REQUIRE_EXECUTOR();
  run_planners("resnet18_small", "--torchvision resnet18 --batch 4 --image 64",
               {{"remat:keep-all", 1.05}, {"zero-offload", 0.9}});
}

TEST(RunExec, Gpt2SmallAtAShortSequence) {
  REQUIRE_EXECUTOR();
  // 124M parameters: its model states are the peak at b1 s32, so auto's
  // plan, a swap planner and ZeRO-Offload (nothing to recompute below the
  // states' floor).
  run_planners("gpt2_small", "--script " + models("gpt2_small"),
               {{"capuchin", 1.02}, {"zero-offload", 0.8}});
}

// Issue 24: a Hugging Face model from a config.json (a two-layer GPT-2 with
// transformers' own modules) with LoRA on every projection, through the
// one-go path and four plans: frozen weights streamed from NVMe under
// ZeRO-Infinity (Note [Frozen parameters]) and the paged optimizer among
// them, every one bit for bit eager's.
TEST(RunExec, HuggingFaceLoraIsEagerBitForBit) {
  REQUIRE_EXECUTOR();
  const std::string config = dir_for("hf_config") + ".json";
  std::ofstream(config) << R"({"model_type": "gpt2", "vocab_size": 1000, "n_positions": 128,
      "n_embd": 64, "n_layer": 2, "n_head": 4})";
  run_planners(
      "hf_lora",
      "--hf-config " + config + " --seq 32 --batch 2 --dtype fp32 --lora 4 " + "--lora-targets all",
      {{"remat:memwall", 0.8}, {"capuchin", 0.9}, {"zero-infinity", 0.95}, {"paged", 0.9}});
  std::filesystem::remove(config);
}

// Note [Device chunks]: auto's plan of gpt-mini at 65% of its keep-all peak
// keeps the first parameters whole on the device and steps them there (a
// fused traced Adam step, memwall::sequence), the rest on the CPU with the
// parameters on the host; bitwise equal to eager over 3 steps, in the arena
// its layout gives.
TEST(RunExec, DeviceChunksStepOnTheDeviceBitForBit) {
  REQUIRE_EXECUTOR();
  const std::string dir = dir_for("device_chunks");
  ASSERT_EQ(run_memwall("run --builtin gpt-mini --gpu l4 --steps 3 --keep-values " + dir).exit_code,
            0);
  const std::string graph = dir + "/graph.json";
  const auto budget = static_cast<uint64_t>(
      0.65 * static_cast<double>(memory_profile(read_graph_file(graph)).peak_bytes));
  const std::string plan_args =
      "plan --graph " + graph + " --gpu l4 --budget " + std::to_string(budget);
  const RunResult json = run_memwall(plan_args + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json best = nlohmann::json::parse(json.out);
  EXPECT_GT(best.at("optimizer_device_share").get<double>(), 0) << best.dump(2);
  EXPECT_LT(best.at("optimizer_device_share").get<double>(), 1) << best.dump(2);
  const RunResult planned = run_memwall(plan_args + " --out " + dir + "/plan.json --out-graph " +
                                        dir + "/planned_graph.json");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json j =
      check_run(run_memwall("run --graph " + dir + "/planned_graph.json --plan " + dir +
                            "/plan.json --gpu l4 --steps 3 --check-eager --json --keep-values " +
                            dir + " --budget " + std::to_string(2 * budget)),
                "gpt-mini with device chunks", budget);
  if (!j.is_null()) {
    EXPECT_EQ(j.at("policy"), "plan offsets");
  }
  std::filesystem::remove_all(dir);
}

// Note [Paged optimizer]: bitsandbytes' paging in memwall's terms, executed:
// every state comes in from the host for its device step and goes back, and
// the parameters end bit for bit where eager's do.
TEST(RunExec, PagedOptimizerBitForBit) {
  REQUIRE_EXECUTOR();
  const std::string dir = dir_for("paged");
  ASSERT_EQ(run_memwall("run --builtin gpt-mini --gpu l4 --steps 3 --keep-values " + dir).exit_code,
            0);
  const std::string graph = dir + "/graph.json";
  const auto budget = static_cast<uint64_t>(
      0.65 * static_cast<double>(memory_profile(read_graph_file(graph)).peak_bytes));
  const RunResult planned = run_memwall(
      "plan --graph " + graph + " --gpu l4 --strategy paged --budget " + std::to_string(budget) +
      " --out " + dir + "/plan.json --out-graph " + dir + "/planned_graph.json");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_NE(planned.out.find("optimizer paged on host"), std::string::npos) << planned.out;
  check_run(run_memwall("run --graph " + dir + "/planned_graph.json --plan " + dir +
                        "/plan.json --gpu l4 --steps 3 --check-eager --json --keep-values " + dir +
                        " --budget " + std::to_string(2 * budget)),
            "gpt-mini with a paged optimizer", budget);
  std::filesystem::remove_all(dir);
}

// ---- Bad input ------------------------------------------------------------------------

class RunKept : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!executor_built() || !torch_importable()) return;
    // Note [Shared test traces]: traced once for every RunKept process,
    // copied here because the tests write their own files beside it.
    const std::string shared =
        shared_trace("run-kept-cnn_bn", "run --script " + models("cnn_bn") + " --gpu l4 --steps 1");
    ASSERT_FALSE(shared.empty());
    dir_ = new std::string(dir_for("bad"));
    ASSERT_TRUE(copy_shared_trace(shared, *dir_));
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static std::string* dir_;
};
std::string* RunKept::dir_ = nullptr;

TEST_F(RunKept, AGraphWithoutCallsIsNotRunnable) {
  REQUIRE_EXECUTOR();
  Graph g = read_graph_file(*dir_ + "/graph.json");
  g.meta.erase("calls");
  for (Op& op : g.ops) op.call.clear();
  const std::string file = *dir_ + "/no_calls.json";
  write_graph_file(g, file);
  const std::string plan = *dir_ + "/no_calls_plan.json";
  ASSERT_EQ(
      run_memwall("plan --graph " + file + " --gpu l4 --strategy remat:keep-all --out " + plan)
          .exit_code,
      0);
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
  const RunResult planned = run_memwall(
      "plan --graph " + graph + " --gpu l4 --strategy remat:keep-all --budget 105% --out " + plan);
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
  ASSERT_EQ(
      run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:keep-all --out " + plan)
          .exit_code,
      0);
  expect_one_line(run_memwall("run --graph " + graph + " --plan " + plan), 2,
                  "zoo graphs are not runnable");
}

TEST_F(RunKept, ABudgetTheRunOverruns) {
  REQUIRE_EXECUTOR();
  // The simulator counts bytes; the stitching allocator maps 2 MiB chunks.
  // A plan at the budget of its byte count leaves no room for that
  // rounding when it has no offsets.
  const std::string graph = *dir_ + "/graph.json";
  const std::string plan = *dir_ + "/tight.json";
  // The simulated keep-all peak: it holds each op's workspace span (Note
  // [Workspace span]), which the eager memory profile does not.
  const RunResult kept =
      run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:keep-all --json");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const auto peak = nlohmann::json::parse(kept.out).at("peak_bytes").get<uint64_t>();
  ASSERT_EQ(run_memwall("plan --graph " + graph + " --gpu l4 --strategy remat:keep-all --out " +
                        plan + " --no-layout --budget " + std::to_string(peak))
                .exit_code,
            0);
  expect_one_line(run_memwall("run --graph " + graph + " --plan " + plan + " --steps 1 " +
                              "--keep-values " + *dir_),
                  1, "out of device memory");
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
std::string infinity_plan(const std::string& dir) {
  const std::string graph = dir + "/graph.json";
  const uint64_t peak = memory_profile(read_graph_file(graph)).peak_bytes;
  const RunResult r = run_memwall(
      "plan --graph " + graph + " --gpu l4 --strategy zero-infinity --out " + dir +
      "/inf.json --out-graph " + dir + "/inf_graph.json --budget " + std::to_string(peak));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return "--graph " + dir + "/inf_graph.json --plan " + dir + "/inf.json --keep-values " + dir +
         " --steps 1 --budget " + std::to_string(peak * 2);
}

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
