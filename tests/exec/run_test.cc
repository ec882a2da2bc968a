// `memwall run` (issue 22): plans of each planner executed on real tensors
// give the same losses and model states as eager PyTorch, bit for bit, and
// the device memory the simulator predicted (bad input and the options on
// one kept trace: run_kept_test.cc).
//
// Each model is traced once on real CPU tensors by `memwall run --keep-values`
// (its auto plan's run); every other plan is made for that graph and run on
// the kept values. Budgets are shares of the keep-all peak.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_memwall.h"
#include "memwall/graph/graph.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/plan/plan.h"
#include "run_checks.h"

namespace memwall::testing {
namespace {

struct Case {
  std::string strategy;
  double share;  // of the keep-all peak
};

// Note [Plans from the kit]: a memwall built without CBC (Note [Builds
// without CBC] in src/remat/cbc_process.cc), as the GPU kit builds it,
// cannot make Checkmate's plans. scripts/gpu-kit.sh runs these tests where
// CBC is with MEMWALL_KIT_SAVE_PLANS=DIR, which keeps each plan that needs
// it under DIR/<tag>/; the kit's run (scripts/gpu-check.sh) names that
// directory in MEMWALL_KIT_PLANS and runs the kept plan when it was made
// for the graph traced there (the same fingerprint: Note [Graph
// fingerprint]), and otherwise says why the case did not run.
bool needs_cbc(const std::string& strategy) { return strategy == "remat:checkmate"; }

std::filesystem::path kit_plan_path(const char* dir, const std::string& tag,
                                    const std::string& strategy) {
  std::string file = strategy;
  std::replace(file.begin(), file.end(), ':', '-');
  return std::filesystem::path(dir) / tag / (file + ".plan.json");
}

void save_for_kit(const std::string& tag, const std::string& strategy, const std::string& plan) {
  const char* dir = std::getenv("MEMWALL_KIT_SAVE_PLANS");
  if (dir == nullptr || *dir == '\0' || !needs_cbc(strategy)) return;
  const std::filesystem::path to = kit_plan_path(dir, tag, strategy);
  std::filesystem::create_directories(to.parent_path());
  std::filesystem::copy_file(plan, to, std::filesystem::copy_options::overwrite_existing);
}

// Copies the kit's plan for `strategy` to `plan`; "" when it did, else why
// the case cannot run.
std::string plan_from_kit(const std::string& tag, const std::string& strategy,
                          const std::string& graph_file, const std::string& plan) {
  const char* dir = std::getenv("MEMWALL_KIT_PLANS");
  if (dir == nullptr || *dir == '\0') return "built without CBC, and no kit (MEMWALL_KIT_PLANS)";
  const std::filesystem::path kept = kit_plan_path(dir, tag, strategy);
  if (!std::filesystem::exists(kept)) return "built without CBC, and the kit has no " + kept.string();
  const Plan p = read_plan_file(kept.string());
  const std::string here = graph_fingerprint(read_graph_file(graph_file));
  if (p.graph_fingerprint != here) {
    return "built without CBC; the kit's plan is for another trace (fingerprint " +
           p.graph_fingerprint + ", traced here " + here + ")";
  }
  std::filesystem::copy_file(kept, plan, std::filesystem::copy_options::overwrite_existing);
  return "";
}

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
    if (planned.exit_code != 0 && planned.err.find("built without CBC") != std::string::npos) {
      const std::string why_not = plan_from_kit(tag, c.strategy, graph_file, plan);
      if (!why_not.empty()) {
        std::cout << what << ": not run: " << why_not << "\n";
        continue;
      }
      std::cout << what << ": the kit's plan (Note [Plans from the kit])\n";
    } else {
      ASSERT_EQ(planned.exit_code, 0) << what << ": " << planned.err;
      save_for_kit(tag, c.strategy, plan);
    }
    const std::string graph_run = std::filesystem::exists(rewritten) ? rewritten : graph_file;
    // Note [Plans that run]: every plan runs within its own budget, laid out
    // (Note [Plans laid out by default]) or on the stitching allocator.
    const bool laid_out = !read_plan_file(plan).offsets.empty();
    const nlohmann::json j =
        check_run(run_memwall("run --graph " + graph_run + " --plan " + plan +
                              " --gpu l4 --steps 3 --check-eager --json --keep-values " + dir),
                  what, budget);
    // Planners count each op's workspace span, so every layout fits its
    // budget (Note [Workspace span]).
    EXPECT_TRUE(laid_out || !test_run_device().empty())
        << what << ": no layout within the budget";
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
  // gpt-mini (python/memwall/sources/builtin.py): dropout 0.1 after embeddings,
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
// in python/memwall/tracer/cpu_scratch.py: 4 weights' worth of scratch), and its
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

// Issue 45: bf16 ZeRO-Offload plans of any traced bf16 model stopped in
// `memwall run` ("op model.norm.weight.step names buffer 25
// (model.norm.weight), which it neither reads nor writes"): a 16-bit
// parameter's CPU step writes its new values into the update it sends back
// (Note [CPU step calls] in src/swap/offload.cc). A two-layer Qwen2 of the
// reported shape class (bf16 mixed precision, b4 s64), its plans run bit for
// bit as eager.
TEST(RunExec, Bf16ZeroOffloadIsEagerBitForBit) {
  REQUIRE_EXECUTOR();
  const std::string config = dir_for("qwen2_config") + ".json";
  std::ofstream(config) << R"({"model_type": "qwen2", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128})";
  run_planners("qwen2_bf16", "--hf-config " + config + " --seq 64 --batch 4 --dtype bf16",
               {{"zero-offload", 0.9}, {"zero-infinity", 0.9}});
  std::filesystem::remove(config);
}

// `models.py:function` traced by the one-go path, planned keep-all at its
// keep-all peak to the byte, laid out, and run 3 steps in that arena: bit
// for bit eager's, nothing moved after the first step.
void keep_all_at_its_peak_runs(const std::string& function) {
  const std::string dir = dir_for(function);
  ASSERT_EQ(
      run_memwall("run --script " + models(function) + " --gpu l4 --steps 3 --keep-values " + dir)
          .exit_code,
      0);
  const std::string graph = dir + "/graph.json";
  const std::string keep_all = "plan --graph " + graph + " --gpu l4 --strategy remat:keep-all";
  const RunResult peak_of = run_memwall(keep_all + " --json");
  ASSERT_EQ(peak_of.exit_code, 0) << peak_of.err;
  const auto peak = nlohmann::json::parse(peak_of.out).at("keep_all_peak_bytes").get<uint64_t>();
  const RunResult planned =
      run_memwall(keep_all + " --budget " + std::to_string(peak) + " --out " + dir + "/plan.json");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  ASSERT_FALSE(read_plan_file(dir + "/plan.json").offsets.empty()) << planned.out;
  const nlohmann::json j = check_run(
      run_memwall("run --graph " + graph + " --plan " + dir +
                  "/plan.json --gpu l4 --steps 3 --check-eager --json --keep-values " + dir),
      function + " keep-all at its peak", peak);
  if (!j.is_null()) {
    EXPECT_EQ(j.at("policy"), "plan offsets");
    ASSERT_EQ(j.at("steps").size(), 3u);
    EXPECT_EQ(j.at("steps")[2].at("outputs_moved"), 0) << j.dump(2);
  }
  std::filesystem::remove_all(dir);
}

// Issue 45: regnet_y_400mf b16 at 96x96, laid out keep-all at 100% of its
// peak, ran its first iteration and stopped in the second ("no room in the
// plan's arena of 157897908 bytes for 1013760 bytes" at block4-0's grouped
// convolution_backward): what the first iteration learnt of where its
// scratch goes sent the second of two scratch buffers of the gradient's
// size where the first was (Note [Scratch before its output]). Its block
// alone, at its keep-all peak to the byte, runs every iteration.
TEST(RunExec, GroupedConvolutionKeepAllRunsEveryIteration) {
  REQUIRE_EXECUTOR();
  keep_all_at_its_peak_runs("grouped_conv");
}

// Issue 45: ResNet-18 b16 at 128x128, memwall's remat plan at 90% of its
// peak, laid out, stopped in its first iteration ("no room in the plan's
// arena of 266417762 bytes for 4718592 bytes" at layer4.0.conv1's
// convolution_backward): blocked copies of both gradients' sizes took the
// gradients' offsets, and oneDNN's scratchpad the rules leave out found no
// room (Note [Scratch before its output]). That convolution alone, keep-all
// at its peak.
TEST(RunExec, StridedConvolutionBackwardRunsItsFirstStep) {
  REQUIRE_EXECUTOR();
  keep_all_at_its_peak_runs("strided_conv");
}

// Issue 45: a plan that no layout fits within its budget was written
// without offsets and ran out of device memory: the stitching allocator maps
// 2 MiB chunks, and a budget of 3,946,843 B holds one. A two-layer T5 of
// your own (fp32, gated GELU, dropout 0.1, b2 s32), memwall's remat plan at
// 70% of its keep-all peak: before, "out of device memory: 32768 bytes asked
// with 2041484 live (2097152 held by the allocator) of the budget 3946843";
// now `memwall plan` plans again for less until the plan is laid out (Note
// [Plans that run]), and it runs bit for bit in its own budget.
TEST(RunExec, APlanWithoutALayoutIsPlannedAgainAndRuns) {
  REQUIRE_EXECUTOR();
  const std::string dir = dir_for("t5");
  const std::string config = dir + ".json";
  std::ofstream(config) << R"({"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128,
      "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4, "vocab_size": 256,
      "feed_forward_proj": "gated-gelu", "dropout_rate": 0.1, "is_encoder_decoder": true,
      "decoder_start_token_id": 0, "pad_token_id": 0})";
  ASSERT_EQ(run_memwall("run --hf-config " + config + " --batch 2 --seq 32 --dtype fp32 " +
                        "--gpu l4 --steps 3 --keep-values " + dir)
                .exit_code,
            0);
  const std::string graph = dir + "/graph.json";
  const std::string remat = "plan --graph " + graph + " --gpu l4 --strategy remat:memwall";
  const RunResult peak_of = run_memwall(remat + " --json");
  ASSERT_EQ(peak_of.exit_code, 0) << peak_of.err;
  const auto budget = static_cast<uint64_t>(
      0.7 * nlohmann::json::parse(peak_of.out).at("keep_all_peak_bytes").get<double>());
  const RunResult planned =
      run_memwall(remat + " --budget " + std::to_string(budget) + " --out " + dir + "/plan.json");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_NE(planned.out.find("planned for"), std::string::npos) << planned.out;
  ASSERT_FALSE(read_plan_file(dir + "/plan.json").offsets.empty()) << planned.out;
  check_run(run_memwall("run --graph " + graph + " --plan " + dir +
                        "/plan.json --gpu l4 --steps 3 --check-eager --json --keep-values " + dir),
            "T5 remat:memwall at 70%", budget);
  std::filesystem::remove_all(dir);
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
  const nlohmann::json j = check_run(
      run_memwall("run --graph " + dir + "/planned_graph.json --plan " + dir +
                  "/plan.json --gpu l4 --steps 3 --check-eager --json --keep-values " + dir),
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
                        "/plan.json --gpu l4 --steps 3 --check-eager --json --keep-values " + dir),
            "gpt-mini with a paged optimizer", budget);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memwall::testing
