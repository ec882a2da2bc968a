// `memwall plan --pipeline-parallel N` end to end: what it prints is the
// pipeline simulation's (plan_pipeline's figures, exactly), and bad input
// gets one line and exit code 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_plan.h"
#include "run_memwall.h"

namespace memwall {
namespace {

using testing::run_memwall;

const std::string kPipelineModel = "--model gpt2-small --batch 1 --seq 128";

TEST(PlanPipeline, PrintsTheSimulationsFigures) {
  const testing::RunResult r = run_memwall(
      "plan " + kPipelineModel + " --pipeline-parallel 4 --micro-batches 8 --partition even --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const Graph graph = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const PipelinePlan plan = plan_pipeline(
      graph, find_gpu("a100-80g"),
      {.devices = 4, .micro_batches = 8, .partition = PipelinePartition::kEvenLayers});
  EXPECT_EQ(j["step_time_s"].get<double>(), plan.sim.step_time);
  EXPECT_EQ(j["schedule"], "1f1b");
  EXPECT_EQ(j["gpus"], 4);
  ASSERT_EQ(j["devices"].size(), 4u);
  ASSERT_EQ(j["chunks"].size(), 4u);
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(j["devices"][d]["peak_bytes"].get<uint64_t>(), plan.sim.devices[d].peak_bytes);
    EXPECT_EQ(j["devices"][d]["max_in_flight"], 4 - d);  // 1F1B: p - d
    EXPECT_EQ(j["chunks"][d]["first_op"], plan.chunk_names[d]);
  }
  EXPECT_EQ(j["chunks"][1]["first_op"], "h3.ln_1");
  EXPECT_TRUE(j["fits"].get<bool>());
}

TEST(PlanPipeline, TextNamesTheLayoutAndEveryDevice) {
  const testing::RunResult r = run_memwall(
      "plan " + kPipelineModel + " --pipeline-parallel 2 --chunks-per-device 2 --micro-batches 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 pipeline devices x 1 tensor-parallel x 1 data-parallel, 2 chunks a device"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("interleaved, 4 micro-batches"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bubble"), std::string::npos) << r.out;
}

// Note [ZeRO in a pipeline stage] and Note [Offload in a pipeline stage]
// from the command line.
TEST(PlanPipeline, ZeroStagesAndOffloadPerStage) {
  const testing::RunResult three = run_memwall(
      "plan " + kPipelineModel + " --pipeline-parallel 2 --ranks 2 --zero-stage 3 --json");
  ASSERT_EQ(three.exit_code, 0) << three.err;
  const nlohmann::json j = nlohmann::json::parse(three.out);
  EXPECT_EQ(j.at("zero_stage"), 3);
  EXPECT_EQ(j.at("offload_optimizer"), false);
  const testing::RunResult offload = run_memwall(
      "plan " + kPipelineModel + " --pipeline-parallel 2 --strategy zero-offload");
  ASSERT_EQ(offload.exit_code, 0) << offload.err;
  EXPECT_NE(offload.out.find("optimizer states on the host, stepped by the CPU"),
            std::string::npos)
      << offload.out;
  const testing::RunResult swap = run_memwall("plan " + kPipelineModel +
                                              " --pipeline-parallel 2 --strategy vdnn --json");
  ASSERT_EQ(swap.exit_code, 0) << swap.err;
  EXPECT_EQ(nlohmann::json::parse(swap.out).at("swap_activations"), true);
  const testing::RunResult capuchin =
      run_memwall("plan " + kPipelineModel + " --pipeline-parallel 2 --strategy capuchin");
  EXPECT_EQ(capuchin.exit_code, 2);
  EXPECT_NE(capuchin.err.find("--strategy does not apply to --pipeline-parallel"),
            std::string::npos)
      << capuchin.err;
}

TEST(PlanPipeline, BadInputIsOneLineAndExitCodeTwo) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--micro-batches 4", "apply to --pipeline-parallel N"},
      {"--pipeline-parallel 0", "--pipeline-parallel"},
      {"--pipeline-parallel 2 --schedule zero-bubble", "--schedule zero-bubble: unknown"},
      {"--pipeline-parallel 2 --partition random", "--partition random: unknown"},
      {"--pipeline-parallel 2 --strategy remat", "--strategy does not apply"},
      {"--pipeline-parallel 2 --zero-stage 1", "give --ranks 2 or more"},
      {"--pipeline-parallel 2 --ranks 2 --zero-stage 4", "--zero-stage 4 does not exist"},
      {"--pipeline-parallel 2 --micro-batches 3 --chunks-per-device 2",
       "not a multiple (Megatron-LM's requirement)"},
      {"--pipeline-parallel 2 --partition even --chunks-per-device 5", "do not split evenly"},
      {"--pipeline-parallel 2 --budget 100MiB", "no cut of"},
      {"--pipeline-parallel 2 --forward-only", "has no backward"},
      {"--pipeline-parallel 2 --checkpointing chen-sqrt", "per-layer (each layer keeps its input"},
  };
  for (const auto& [options, message] : cases) {
    const testing::RunResult r = run_memwall("plan " + kPipelineModel + " " + options);
    EXPECT_EQ(r.exit_code, 2) << options;
    EXPECT_NE(r.err.find(message), std::string::npos) << options << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << options << ": " << r.err;
  }
}

// An even split that does not fit still prints its table, then names the device.
TEST(PlanPipeline, ADeviceOverItsBudgetIsNamed) {
  const testing::RunResult r = run_memwall("plan " + kPipelineModel +
                                           " --pipeline-parallel 2 --partition even --budget 300MiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("over budget"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("pipeline device 0 peaks at"), std::string::npos) << r.err;
}

TEST(PlanLayoutSearch, ChoosesALayoutAndListsTheOthers) {
  const testing::RunResult r =
      run_memwall("plan --model gpt2-small --seq 128 --gpus 4 --global-batch 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["best"].is_null());
  ASSERT_FALSE(j["layouts"].empty());
  const nlohmann::json& first = j["layouts"][0];
  EXPECT_TRUE(first["fits"].get<bool>());
  EXPECT_EQ(first["step_time_s"], j["best"]["step_time_s"]);
  EXPECT_EQ(first["tensor_parallel"].get<int>() * first["pipeline_parallel"].get<int>() *
                first["data_parallel"].get<int>(),
            4);
  const testing::RunResult text =
      run_memwall("plan --model gpt2-small --seq 128 --gpus 4 --global-batch 8");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("chosen"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("runners-up"), std::string::npos) << text.out;
}

// --checkpointing per-layer: each chunk keeps its layers' inputs
// (Note [Pipeline recomputation]), the figures plan_pipeline's.
TEST(PlanPipeline, PerLayerCheckpointingIsThePlansRecomputation) {
  const testing::RunResult r =
      run_memwall("plan " + kPipelineModel +
                  " --pipeline-parallel 2 --micro-batches 4 --checkpointing per-layer --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["checkpointing"], "per-layer");
  const Graph graph = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const PipelinePlan plan =
      plan_pipeline(graph, find_gpu("a100-80g"),
                    {.devices = 2, .micro_batches = 4, .recompute = ChunkRecompute::kFullLayers});
  EXPECT_EQ(j["step_time_s"].get<double>(), plan.sim.step_time);
  const PipelinePlan kept =
      plan_pipeline(graph, find_gpu("a100-80g"), {.devices = 2, .micro_batches = 4});
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(j["chunks"][k]["saved_bytes"].get<uint64_t>(), plan.costs[k].saved);
    EXPECT_LT(plan.costs[k].saved, kept.costs[k].saved);
  }
  EXPECT_GT(plan.sim.step_time, kept.sim.step_time);  // a second forward in every backward
}

// --tensor-parallel and --pipeline-parallel fix those parts of the search;
// without --sequence-parallel the graphs split no sequence.
TEST(PlanLayoutSearch, FixedPartsAreKept) {
  const testing::RunResult r =
      run_memwall("plan --model gpt2-small --seq 128 --gpus 8 --global-batch 8 "
                  "--tensor-parallel 2 --pipeline-parallel 2 --zero-stage 0 --partition even "
                  "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["layouts"].empty());
  for (const nlohmann::json& row : j["layouts"]) {
    EXPECT_EQ(row["tensor_parallel"], 2);
    EXPECT_EQ(row["pipeline_parallel"], 2);
    EXPECT_EQ(row["data_parallel"], 2);
    // Keeping fits each layout planned (12 layers split evenly: not into 8
    // chunks, so 4 a device is not planned, nor its recomputing twin).
    if (row["step_time_s"].get<double>() > 0) {
      EXPECT_EQ(row["checkpointing"], "keep-all");
    }
  }
  EXPECT_EQ(j["best"]["partition"], "even");
  EXPECT_FALSE(j["best"]["distributed_optimizer"].get<bool>());
  const testing::RunResult text = run_memwall(
      "plan --model gpt2-small --seq 128 --gpus 8 --global-batch 8 --tensor-parallel 2 "
      "--pipeline-parallel 2");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("tp2 on 8 x"), std::string::npos) << text.out;  // no " sp"
}

// --nodes M is M nodes of the profile's (or --gpus-per-node's) GPUs.
TEST(PlanLayoutSearch, NodesCountTheirGpus) {
  const testing::RunResult r = run_memwall(
      "plan --model gpt2-small --seq 128 --nodes 2 --gpus-per-node 2 --global-batch 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("layouts of 4 GPUs searched"), std::string::npos) << r.out;
}

TEST(PlanLayoutSearch, OptionsItChoosesAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--gpus 4", "--gpus N (or --nodes M) and --global-batch B go together"},
      {"--global-batch 8", "--gpus N (or --nodes M) and --global-batch B go together"},
      {"--nodes 2 --gpus 8 --global-batch 8 --gpu a100-80g", "--gpus 8 is not --nodes 2 of 8"},
      {"--nodes 0 --global-batch 8", "--nodes"},
      {"--gpus 4 --global-batch 8 --batch 2", "--batch does not apply to --gpus"},
      {"--gpus 4 --global-batch 8 --micro-batches 2", "--micro-batches does not apply"},
      {"--gpus 4 --global-batch 8 --pipeline-parallel 3", "do not divide 4 GPUs"},
      {"--gpus 4 --global-batch 8 --sequence-parallel", "goes with --tensor-parallel"},
      {"--gpus 4 --global-batch 8 --zero-stage 5", "--zero-stage 5 does not exist"},
      {"--gpus 4 --global-batch 8 --checkpointing chen-sqrt", "--checkpointing chen-sqrt with"},
      {"--gpus 0 --global-batch 8", "--gpus"},
      {"--gpus 4 --global-batch 8 --budget 100MiB", "no layout of 4 GPUs fits"},
  };
  for (const auto& [options, message] : cases) {
    const testing::RunResult r = run_memwall("plan --model gpt2-small --seq 128 " + options);
    EXPECT_EQ(r.exit_code, 2) << options;
    EXPECT_NE(r.err.find(message), std::string::npos) << options << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << options << ": " << r.err;
  }
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// --shape builds a GPT-2 or Llama model at another shape: Narayanan et al.
// 2021's 1.7B GPT has 1,652,230,656 parameters (tests/models/zoo_test.cc
// derives them); bad parts are one line each.
TEST(ModelShapeOption, BuildsTheShapeAndRefusesBadParts) {
  const testing::RunResult r = testing::run_memwall(
      "inspect --model gpt2-small --shape layers=24,hidden=2304,heads=24,vocab=51200,"
      "positions=2048 --seq 2048 --batch 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["param_count"], 1'652'230'656);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--shape layers=2,depth=3", "--shape: 'depth=3' is not KEY=COUNT"},
      {"--shape layers=x", "--shape must be a positive integer (got 'x')"},
      {"--shape layers=2,layers=3", "--shape: layers is given twice"},
      {"--shape kv_heads=4", "GPT-2's blocks have no key-value heads"},
  };
  for (const auto& [options, message] : cases) {
    const testing::RunResult bad = testing::run_memwall("inspect --model gpt2-small " + options);
    EXPECT_EQ(bad.exit_code, 2) << options;
    EXPECT_NE(bad.err.find(message), std::string::npos) << options << ": " << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << options << ": " << bad.err;
  }
}

}  // namespace
}  // namespace memwall
