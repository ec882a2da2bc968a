// `memwall plan --torchrun DIR` (Note [Torch layouts] in
// src/planner/torch_layout.cc): the plan as PyTorch's DTensor and
// pipelining run it, written beside the command that starts it, or nothing.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_memwall.h"

namespace memwall {
namespace {

using testing::run_memwall;
using testing::slurp;

// A GPT-2 of 4 blocks whose vocabulary (1000) Megatron-LM pads to a
// multiple of make_vocab_size_divisible_by (128) times the tensor-parallel
// size (2): 1024 (Megatron-LM, megatron/training/tokenizer/tokenizer.py,
// _vocab_size_with_padding).
const std::string kSmallGpt =
    "--model gpt2-small --shape layers=4,hidden=256,heads=4,vocab=1000,positions=64 --seq 64 "
    "--batch 2 --dtype fp32";

std::string scratch_dir(const std::string& name) {
  return ::testing::TempDir() + "torchrun_" + std::to_string(getpid()) + "_" + name;
}

TEST(PlanTorchrun, WritesTheStagesBlocksAndTheCommand) {
  const std::string dir = scratch_dir("gpt");
  const std::string options = kSmallGpt +
                              " --pipeline-parallel 2 --tensor-parallel 2 --micro-batches 4 "
                              "--partition even";
  const testing::RunResult plan =
      run_memwall("plan " + options + " --torchrun " + dir + "-json --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  std::filesystem::remove_all(dir + "-json");
  const testing::RunResult r = run_memwall("plan " + options + " --torchrun " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("torchrun --nnodes 1 --nproc-per-node 4 -m memwall.parallel layout.json"),
            std::string::npos)
      << r.out;
  const nlohmann::json layout = nlohmann::json::parse(slurp(dir + "/layout.json"));
  const nlohmann::json planned = nlohmann::json::parse(plan.out);
  EXPECT_EQ(layout["format"], "memwall-torch-layout/1");
  EXPECT_EQ(layout["model"], "gpt2-small");
  EXPECT_EQ(layout["shape"], nlohmann::json({{"layers", 4},
                                             {"hidden", 256},
                                             {"heads", 4},
                                             {"kv_heads", 4},
                                             {"ffn", 1024},
                                             {"vocab", 1000},
                                             {"positions", 64}}));
  EXPECT_EQ(layout["padded_vocab"], 1024);
  EXPECT_EQ(layout["seq"], 64);
  EXPECT_EQ(layout["micro_batch"], 2);
  EXPECT_EQ(layout["micro_batches"], 4);
  EXPECT_EQ(layout["dtype"], "fp32");
  EXPECT_EQ(layout["optimizer"], "adam");
  EXPECT_EQ(layout["sequence_parallel"], false);
  EXPECT_EQ(layout["tensor_parallel"], 2);
  ASSERT_EQ(layout["chunks"].size(), 2u);
  EXPECT_EQ(layout["chunks"][0]["layers"], nlohmann::json({0, 2}));
  EXPECT_EQ(layout["chunks"][1]["layers"], nlohmann::json({2, 4}));
  EXPECT_EQ(layout["chunks"][0]["embedding"], true);
  EXPECT_EQ(layout["chunks"][0]["head"], false);
  EXPECT_EQ(layout["chunks"][1]["embedding"], false);
  EXPECT_EQ(layout["chunks"][1]["head"], true);
  // The figures are the plan's own, predicted as PyTorch's pipelining
  // keeps memory (Note [Pipeline engines]).
  EXPECT_EQ(layout["engine"], "torch");
  EXPECT_EQ(planned["engine"], "torch");
  EXPECT_EQ(layout["devices"], planned["devices"]);
  EXPECT_EQ(layout["step_time_s"], planned["step_time_s"]);
  const std::string script = slurp(dir + "/torchrun.sh");
  EXPECT_EQ(script.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(script.find("exec torchrun --nnodes 1 --nproc-per-node 4 -m memwall.parallel "
                        "\"$here/layout.json\" \"$@\""),
            std::string::npos)
      << script;
  std::filesystem::remove_all(dir);
}

TEST(PlanTorchrun, SeveralNodesTakeTheirRankFromTheEnvironment) {
  const std::string dir = scratch_dir("nodes");
  const testing::RunResult r =
      run_memwall("plan " + kSmallGpt +
                  " --pipeline-parallel 4 --tensor-parallel 2 --partition even --gpus-per-node 4 "
                  "--torchrun " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string script = slurp(dir + "/torchrun.sh");
  EXPECT_NE(script.find("torchrun --nnodes 2 --nproc-per-node 4 --node-rank \"${NODE_RANK:-0}\""),
            std::string::npos)
      << script;
  const nlohmann::json layout = nlohmann::json::parse(slurp(dir + "/layout.json"));
  ASSERT_EQ(layout["chunks"].size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(layout["chunks"][k]["layers"], nlohmann::json({k, k + 1}));
  std::filesystem::remove_all(dir);
}

TEST(PlanTorchrun, LlamaAndTheLayoutSearchsChoice) {
  const std::string dir = scratch_dir("llama");
  const testing::RunResult r = run_memwall(
      "plan --model llama3-8b --shape layers=4,hidden=256,heads=4,kv_heads=2,ffn=512,vocab=1000,"
      "positions=128 --seq 64 --gpus 4 --global-batch 8 --tensor-parallel 2 --pipeline-parallel 2 "
      "--sequence-parallel --partition even --torchrun " + dir + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json search = nlohmann::json::parse(r.out);
  const nlohmann::json layout = nlohmann::json::parse(slurp(dir + "/layout.json"));
  EXPECT_EQ(layout["shape"]["kv_heads"], 2);
  EXPECT_EQ(layout["shape"]["ffn"], 512);
  EXPECT_EQ(layout["shape"]["positions"], 128);
  EXPECT_EQ(layout["sequence_parallel"], true);
  EXPECT_EQ(layout["micro_batch"], search["layouts"][0]["micro_batch"]);
  EXPECT_EQ(layout["micro_batches"], search["best"]["micro_batches"]);
  EXPECT_EQ(layout["devices"], search["best"]["devices"]);
  std::filesystem::remove_all(dir);
}

TEST(PlanTorchrun, RefusalsLeaveNoDirectory) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Tarnawski's programme cuts this one after a block's first norm.
      {kSmallGpt + " --pipeline-parallel 2 --tensor-parallel 2", "inside a block"},
      {"--model bert-base --batch 1 --seq 128 --pipeline-parallel 2 --partition even",
       "GPT-2 and Llama models"},
      {kSmallGpt, "apply to --pipeline-parallel N"},
  };
  for (const auto& [options, expected] : cases) {
    const std::string dir = scratch_dir("refused");
    const testing::RunResult r = run_memwall("plan " + options + " --torchrun " + dir);
    EXPECT_EQ(r.exit_code, 2) << options;
    EXPECT_NE(r.err.find(expected), std::string::npos) << options << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir)) << options;
  }
}

}  // namespace
}  // namespace memwall
