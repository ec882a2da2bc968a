// Answers for the hardware and graph the user means (issue 17): a dtype the
// GPU cannot compute in, plans judged on the hardware they were made for,
// plans matched to graphs by content, options that would be ignored,
// --version, and names that must not drive the terminal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/plan.h"
#include "run_memwall.h"
#include "test_util.h"

namespace memwall::testing {
namespace {

namespace fs = std::filesystem;

void expect_bad(const std::string& args, const std::string& message) {
  const RunResult r = run_memwall(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
  EXPECT_EQ(r.err, "memwall: error: " + message + "\n") << args;
  EXPECT_TRUE(r.out.empty()) << args;
}

// ---- bf16 on GPUs without it (V100, T4) -------------------------------------

TEST(RightHardware, DefaultDtypeIsFp16WhereBf16IsMissingAndSaysSo) {
  // GPT-2 small on a V100 used to be charged bf16 at the fp32 rate (809 ms
  // instead of ~170 ms in fp16).
  const RunResult v100 = run_memwall("inspect --model gpt2-small --gpu v100-16g --json");
  ASSERT_EQ(v100.exit_code, 0) << v100.err;
  EXPECT_EQ(v100.err,
            "memwall: note: v100-16g has no bf16 arithmetic: using fp16 mixed precision (--dtype "
            "to choose)\n");
  const auto j = nlohmann::json::parse(v100.out);
  EXPECT_EQ(j.at("graph"), "gpt2-small b8 s1024 fp16");
  const RunResult fp16 =
      run_memwall("inspect --model gpt2-small --gpu v100-16g --dtype fp16 --json");
  ASSERT_EQ(fp16.exit_code, 0) << fp16.err;
  EXPECT_TRUE(fp16.err.empty()) << fp16.err;
  EXPECT_EQ(nlohmann::json::parse(fp16.out).at("iteration_time_s"), j.at("iteration_time_s"));
  // GPUs with bf16 keep the documented default.
  const RunResult a100 = run_memwall("inspect --model gpt2-small --gpu a100-80g --json");
  EXPECT_TRUE(a100.err.empty()) << a100.err;
  EXPECT_EQ(nlohmann::json::parse(a100.out).at("graph"), "gpt2-small b8 s1024 bf16");
}

TEST(RightHardware, Bf16AskedForOnAGpuWithoutItIsAnError) {
  expect_bad("inspect --model gpt2-small --gpu t4 --dtype bf16",
             "--dtype bf16: t4 cannot compute in bf16 (it computes in fp32, fp16)");
  expect_bad("plan --model gpt2-small --gpu v100-32g --dtype bf16",
             "--dtype bf16: v100-32g cannot compute in bf16 (it computes in fp32, fp16)");
}

TEST(RightHardware, Bf16GraphFileOnAGpuWithoutItNamesTheOp) {
  const fs::path dir = fresh_dir();
  const std::string graph = (dir / "g.json").string();
  ASSERT_EQ(
      run_memwall("inspect --model gpt2-small --batch 1 --seq 64 --export " + graph).exit_code, 0);
  const Graph g = read_graph_file(graph);
  const OpId first = first_op_not_computable(find_gpu("v100-16g"), g);
  ASSERT_NE(first, kNoOp);
  expect_bad("inspect --graph " + graph + " --gpu v100-16g",
             fmt::format("{}: op {} ({}) computes in bf16, which v100-16g cannot (it computes in "
                         "fp32, fp16)",
                         graph, first, g.ops[first].name));
}

TEST(RightHardware, GpusListsZeroWhereTheRateIsZero) {
  const RunResult r = run_memwall("gpus");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"v100-16g ", "v100-32g ", "t4 "}) {
    const size_t row = r.out.find(std::string("\n") + name);
    ASSERT_NE(row, std::string::npos) << name;
    const std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
    // Columns: gpu, memory (two words), bf16 TF/s, fp32 TF/s, ...
    std::istringstream words(line);
    std::string gpu, amount, unit, bf16;
    words >> gpu >> amount >> unit >> bf16;
    EXPECT_EQ(bf16, "0.0") << line;
  }
}

// ---- plans judged on their own hardware ---------------------------------------

TEST(RightHardware, SimulateUsesThePlansHardwareUnlessToldOtherwise) {
  const fs::path dir = fresh_dir();
  const std::string plan = (dir / "p.json").string();
  const std::string model = "--model gpt2-small --batch 4 --seq 512";
  const RunResult made = run_memwall("plan " + model + " --gpu rtx4090 --json --out " + plan);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const double planned = nlohmann::json::parse(made.out).at("iteration_time_s");

  const RunResult same = run_memwall("simulate " + model + " --plan " + plan + " --json");
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_TRUE(same.err.empty()) << same.err;
  const auto j = nlohmann::json::parse(same.out);
  EXPECT_EQ(j.at("gpu"), "rtx4090");
  EXPECT_EQ(j.at("plan_gpu"), "rtx4090");
  EXPECT_EQ(j.at("iteration_time_s").get<double>(), planned);

  const RunResult other =
      run_memwall("simulate " + model + " --plan " + plan + " --gpu a100-80g --json");
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(other.err,
            "memwall: note: the plan was made for rtx4090; judging it on a100-80g as asked\n");
  EXPECT_EQ(nlohmann::json::parse(other.out).at("gpu"), "a100-80g");
  EXPECT_NE(nlohmann::json::parse(other.out).at("iteration_time_s").get<double>(), planned);
}

TEST(RightHardware, APlanForACustomProfileNeedsIt) {
  const fs::path dir = fresh_dir();
  nlohmann::json profile = hardware_to_json(find_gpu("l4"));
  profile["name"] = "my-l4";
  std::ofstream(dir / "my.json") << profile.dump();
  const std::string plan = (dir / "p.json").string();
  const std::string model = "--model gpt2-small --batch 1 --seq 128";
  ASSERT_EQ(
      run_memwall("plan " + model + " --gpu-file " + (dir / "my.json").string() + " --out " + plan)
          .exit_code,
      0);
  expect_bad("simulate " + model + " --plan " + plan,
             "the plan was made for hardware \"my-l4\", which is not built in: give its profile "
             "with --gpu-file (or --gpu NAME to judge it elsewhere)");
  const RunResult r = run_memwall("simulate " + model + " --plan " + plan + " --gpu-file " +
                                  (dir / "my.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// ---- plans matched to graphs by content ----------------------------------------

TEST(RightGraph, APlanRecordsItsGraphsFingerprint) {
  const fs::path dir = fresh_dir();
  const std::string plan = (dir / "p.json").string();
  ASSERT_EQ(run_memwall("plan --model gpt2-small --batch 2 --seq 128 --out " + plan).exit_code, 0);
  const Plan p = read_plan_file(plan);
  EXPECT_EQ(p.graph_fingerprint,
            graph_fingerprint(build_model("gpt2-small", {.batch = 2, .seq = 128})));
}

TEST(RightGraph, APlanForAnotherGraphOfTheSameNameIsRefused) {
  const fs::path dir = fresh_dir();
  const std::string graph = (dir / "g.json").string();
  const std::string plan = (dir / "p.json").string();
  ASSERT_EQ(
      run_memwall("inspect --model gpt2-small --batch 2 --seq 128 --export " + graph).exit_code, 0);
  ASSERT_EQ(run_memwall("plan --graph " + graph + " --out " + plan).exit_code, 0);
  // The same name over other content: what two traces of one script at
  // different batches used to look like.
  Graph g = read_graph_file(graph);
  const std::string planned_for = graph_fingerprint(g);
  g.ops.back().name += " (edited)";
  write_graph_file(g, graph);
  const std::string now = graph_fingerprint(g);
  for (const char* verb : {"simulate", "layout", "alloc-replay"}) {
    expect_bad(std::string(verb) + " --graph " + graph + " --plan " + plan,
               fmt::format("{}: the plan is for another graph named \"{}\": its graph's "
                           "fingerprint is {}, this one's {} (another batch, dtype, model or "
                           "version of the trace?)",
                           plan, g.name, planned_for, now));
  }
}

TEST(RightGraph, AnFp32PlanIsNotTakenForABf16Graph) {
  const fs::path dir = fresh_dir();
  const std::string plan = (dir / "p.json").string();
  ASSERT_EQ(run_memwall("plan --model gpt2-small --batch 2 --seq 128 --dtype fp32 --out " + plan)
                .exit_code,
            0);
  const RunResult r = run_memwall("simulate --model gpt2-small --batch 2 --seq 128 --plan " + plan);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("the plan is for graph \"gpt2-small b2 s128 fp32\" (fingerprint "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("not \"gpt2-small b2 s128 bf16\" (fingerprint "), std::string::npos)
      << r.err;
}

TEST(RightGraph, APlanWithoutAFingerprintIsMatchedByName) {
  // Plan files written before fingerprints still run.
  const fs::path dir = fresh_dir();
  const std::string plan = (dir / "p.json").string();
  ASSERT_EQ(run_memwall("plan --model gpt2-small --batch 2 --seq 128 --out " + plan).exit_code, 0);
  Plan p = read_plan_file(plan);
  p.graph_fingerprint.clear();
  write_plan_file(p, plan);
  EXPECT_EQ(run_memwall("simulate --model gpt2-small --batch 2 --seq 128 --plan " + plan).exit_code,
            0);
  expect_bad("simulate --model gpt2-small --batch 4 --seq 128 --plan " + plan,
             plan +
                 ": the plan is for graph \"gpt2-small b2 s128 bf16\", not \"gpt2-small b4 "
                 "s128 bf16\"");
}

// ---- options that would be ignored ----------------------------------------------

TEST(RightOptions, IgnoredOptionsAreRefused) {
  const fs::path dir = fresh_dir();
  const std::string graph = (dir / "g.json").string();
  ASSERT_EQ(
      run_memwall("inspect --model gpt2-small --batch 1 --seq 64 --export " + graph).exit_code, 0);
  const std::string zoo_only =
      "--model, --batch, --seq, --image, --dtype, --optimizer, --flash, --forward-only, "
      "--eager-kernels, --tensor-parallel, --sequence-parallel, --expert-parallel, "
      "--context-parallel, --shape and the LoRA options build a "
      "zoo model; they do not apply to --graph " +
      graph;
  expect_bad("inspect --model gpt2-medium --graph " + graph, zoo_only);
  expect_bad("inspect --tensor-parallel 2 --graph " + graph, zoo_only);
  expect_bad("inspect --dtype fp32 --graph " + graph, zoo_only);
  expect_bad("simulate --optimizer sgd --graph " + graph, zoo_only);
  // --gpu with --gpu-file picks a profile of the file; one it lacks is an error.
  const std::string profile = (dir / "gpu.json").string();
  std::ofstream(profile) << hardware_to_json(find_gpu("l4")).dump();
  expect_bad("inspect --gpu t4 --gpu-file " + profile,
             "hardware file '" + profile + "': holds one profile, named 'l4', not 't4' (--gpu)");
  expect_bad("plan --model gpt2-small --ranks 2000000", "--ranks 2000000 is more than 2^20 ranks");
  expect_bad("inspect --model resnet50 --flash",
             "model resnet50: --flash (attention) applies to transformers only");
  expect_bad("alloc-replay --csv " + graph + " --model gpt2-small",
             "--csv takes no --model, --graph or --plan: replay one input at a time");
}

TEST(RightOptions, VersionIsPrinted) {
  const RunResult r = run_memwall("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "memwall " MEMWALL_VERSION "\n");
}

// ---- names that would drive the terminal ----------------------------------------

TEST(RightText, ControlCharactersInNamesAreEscaped) {
  const fs::path dir = fresh_dir();
  const std::string path = (dir / "g.json").string();
  Graph g = build_model("gpt2-small", {.batch = 1, .seq = 64});
  g.name = "evil\x1b]0;owned\x07\x1b[2J name\xc2\x9b";  // OSC title, clear screen, C1 CSI
  write_graph_file(g, path);
  const RunResult human = run_memwall("inspect --graph " + path);
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_EQ(human.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(human.out.find('\x07'), std::string::npos);
  EXPECT_EQ(human.out.find("\xc2\x9b"), std::string::npos);
  EXPECT_EQ(human.out.rfind("evil\\u001b]0;owned\\u0007\\u001b[2J name\\u009b on a100-80g", 0), 0u)
      << human.out;
  // JSON stays JSON, and means the same name.
  const RunResult json = run_memwall("inspect --graph " + path + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out).at("graph"), g.name);
  // Error lines too.
  const RunResult bad = run_memwall("inspect --model 'x\x1b[31my'");
  EXPECT_EQ(bad.err.find('\x1b'), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("x\\u001b[31my"), std::string::npos) << bad.err;
}

TEST(RightText, SizeMessagesNameTheFileAndOpOrModel) {
  const fs::path dir = fresh_dir();
  const std::string graph = (dir / "g.json").string();
  std::ofstream(graph) << R"({"format":"memwall.graph/1","name":"x","meta":{},"buffers":[)"
                       << R"({"id":0,"name":"a","bytes":4000000000000000000,"kind":"activation"}],)"
                       << R"("ops":[{"id":0,"name":"op0","type":"t","phase":"forward","in":[],)"
                       << R"("out":[0],"workspace":4000000000000000000}]})";
  expect_bad("inspect --graph " + graph,
             graph +
                 ": graph: op 0 (\"op0\"): its workspace of 4000000000000000000 bytes and the "
                 "graph's 4000000000000000000 bytes of buffers exceed 2^62 bytes together");
  const std::string csv = (dir / "l.csv").string();
  std::ofstream(csv)
      << "id,lower,upper,size\n0,0,10,3000000000000000000\n1,0,10,3000000000000000000\n";
  expect_bad("layout --csv " + csv,
             csv +
                 ": layout: bytes live at one time exceeds the limit of 2^62 bytes "
                 "(3000000000000000000 + 3000000000000000000)");
  const RunResult zoo = run_memwall("inspect --model llama2-70b --batch 16777216 --seq 4096");
  EXPECT_EQ(zoo.exit_code, 2);
  EXPECT_EQ(zoo.err.rfind("memwall: error: model llama2-70b at batch 16777216: graph: buffer ", 0),
            0u)
      << zoo.err;
}

}  // namespace
}  // namespace memwall::testing
