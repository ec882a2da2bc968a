#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"
#include "memwall/models/zoo.h"
#include "run_memwall.h"

namespace memwall {
namespace {

using testing::count_lines;
using testing::run_memwall;

TEST(CliInspect, JsonFieldsAgreeWithTheLibrary) {
  auto r = run_memwall("inspect --model gpt2-small --batch 2 --seq 256 --gpu a100-40g --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // GPT-2 small: 124,439,808 parameters (HF gpt2 model card / Radford et al. 2019).
  EXPECT_EQ(j["param_count"], 124439808);
  // bf16 mixed-precision Adam: 2 + 2 + 12 bytes per parameter (ZeRO, Rajbhandari et al. 2020).
  EXPECT_EQ(j["param_bytes"], 2ull * 124439808);
  EXPECT_EQ(j["grad_bytes"], 2ull * 124439808);
  EXPECT_EQ(j["optim_state_bytes"], 12ull * 124439808);
  for (const char* field :
       {"activation_bytes", "input_bytes", "workspace_bytes", "temp_bytes",
        "saved_activation_bytes", "peak_workspace_bytes", "peak_bytes", "iteration_time_s", "fits",
        "shortfall_bytes", "peak_by_kind", "peak_op", "device_memory_bytes"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_EQ(j["gpu"], "a100-40g");
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["shortfall_bytes"], 0);
  EXPECT_GT(j["peak_bytes"].get<uint64_t>(), 16ull * 124439808);
  EXPECT_GT(j["iteration_time_s"].get<double>(), 0.0);
  uint64_t by_kind_sum = 0;
  for (auto& [k, v] : j["peak_by_kind"].items()) by_kind_sum += v.get<uint64_t>();
  EXPECT_EQ(by_kind_sum, j["peak_bytes"].get<uint64_t>());
}

// Issue 24: LoRA and QLoRA on zoo transformers from the command line
// (tests/models/lora_test.cc has the goldens' sources).
TEST(CliInspect, LoraAndQloraCountTheirTrainableParameters) {
  auto r = run_memwall("inspect --model llama2-7b --batch 1 --seq 128 --lora 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trainable_param_count"], 4194304);
  EXPECT_EQ(j["param_count"], 6742609920);
  EXPECT_EQ(j["graph"], "llama2-7b b1 s128 bf16 lora8");
  r = run_memwall("inspect --model llama2-7b --batch 1 --seq 128 --qlora --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trainable_param_count"], 159907840);  // r 64 on all seven projections
  EXPECT_EQ(j["graph"], "llama2-7b b1 s128 bf16 qlora64");
  // The NF4 blocks (3,340,771,328 B), two bf16 vocab tables, the bf16 norms
  // and the bf16 adapters.
  EXPECT_EQ(j["param_bytes"],
            3340771328u + 2u * 2 * 32000 * 4096 + 2u * 65 * 4096 + 2u * 159907840);
  // On a GPU without bf16, QLoRA computes in fp16 (as bitsandbytes' compute dtype).
  r = run_memwall("inspect --model llama2-7b --batch 1 --seq 128 --qlora --gpu t4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["graph"], "llama2-7b b1 s128 fp16 qlora64");
}

TEST(CliInspect, ReportsShortfallWhenItDoesNotFit) {
  auto r = run_memwall("inspect --model llama2-7b --batch 4 --seq 4096 --gpu a100-80g --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["param_count"], 6738415616);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["shortfall_bytes"].get<uint64_t>(),
            j["peak_bytes"].get<uint64_t>() - j["device_memory_bytes"].get<uint64_t>());
  auto human = run_memwall("inspect --model llama2-7b --batch 4 --seq 4096 --gpu a100-80g");
  ASSERT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("no, short by"), std::string::npos) << human.out;
}

TEST(CliInspect, ExportedGraphReadsBackWithTheSameFigures) {
  std::string path = ::testing::TempDir() + "memwall_export_test.json";
  auto a = run_memwall("inspect --model resnet50 --batch 2 --json --export " + path);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = run_memwall("inspect --graph " + path + " --json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto ja = nlohmann::json::parse(a.out);
  auto jb = nlohmann::json::parse(b.out);
  for (const char* f :
       {"param_count", "peak_bytes", "saved_activation_bytes", "iteration_time_s"}) {
    EXPECT_EQ(ja[f], jb[f]) << f;
  }
  Graph g = read_graph_file(path);
  EXPECT_EQ(g.meta["model"], "resnet50");
  std::remove(path.c_str());
}

TEST(CliInspect, DefaultsRun) {
  auto r = run_memwall("inspect");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpt2-small"), std::string::npos);
  EXPECT_NE(r.out.find("peak memory"), std::string::npos);
}

// Bad input: one line on stderr naming the problem, exit code 2, nothing on stdout.
struct BadCase {
  const char* args;
  const char* message;
};

// Shown in test names instead of the struct's bytes.
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.args; }

class CliBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(CliBadInput, OneLineAndExitCode2) {
  auto r = run_memwall(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CliBadInput,
    ::testing::Values(
        BadCase{"inspect --model gpt5", "unknown model 'gpt5'"},
        BadCase{"inspect --gpu a200", "unknown GPU 'a200'"},
        BadCase{"inspect --batch 0", "--batch must be a positive integer"},
        BadCase{"inspect --batch -3", "--batch must be a positive integer"},
        BadCase{"inspect --batch 99999999999999999999999",
                "--batch 99999999999999999999999 is too large"},
        BadCase{"inspect --batch abc", "--batch must be a positive integer (got 'abc')"},
        BadCase{"inspect --batch 4x", "--batch must be a positive integer (got '4x')"},
        BadCase{"inspect --seq 0", "--seq must be a positive integer"},
        BadCase{"inspect --seq 5000", "out of range"},
        BadCase{"inspect --model resnet50 --image 8", "image size 8 out of range"},
        BadCase{"inspect --model resnet50 --seq 128", "--seq applies to transformers only"},
        BadCase{"inspect --model unet --image 100", "multiple of 16"},
        BadCase{"inspect --batch 16777217", "batch 16777217 out of range"},
        BadCase{"inspect --dtype fp8", "unknown dtype 'fp8'"},
        BadCase{"inspect --optimizer lion", "unknown optimizer 'lion'"},
        BadCase{"inspect --graph /nonexistent/g.json", "/nonexistent/g.json"},
        BadCase{"inspect --gpu-file /nonexistent/h.json", "/nonexistent/h.json"},
        BadCase{"inspect --no-such-flag", "no-such-flag"},
        BadCase{"inspect --lora 0", "--lora must be a positive integer"},
        BadCase{"inspect --lora-alpha 4", "need --lora R"},
        BadCase{"inspect --lora 8 --lora-targets q,w", "unknown LoRA target 'w'"},
        BadCase{"inspect --lora 8 --lora-alpha nan", "--lora-alpha must be a positive number"},
        BadCase{"inspect --model resnet50 --qlora", "apply to the zoo's transformers"},
        BadCase{"inspect --model gpt2-small --lora 8 --lora-targets gate", "match no layer"},
        BadCase{"inspect --dtype nf4", "NF4 base weights are frozen"},
        BadCase{"inspect --graph g.json --lora 8", "the LoRA options build a zoo model"},
        BadCase{"inspect --graph g.json --eager-kernels", "build a zoo model"},
        BadCase{"inspect --model resnet50 --eager-kernels", "applies to transformers"},
        BadCase{"frobnicate", "unknown verb 'frobnicate'"}));

TEST(CliBadFiles, MalformedAndInconsistentGraphFiles) {
  const std::string dir = ::testing::TempDir();
  const std::pair<const char*, const char*> cases[] = {
      {"{not json", "graph"},
      {R"({"format":"memwall.graph/1","name":"x","meta":{},"buffers":[{"id":0,"name":"a","bytes":-5,"kind":"activation"}],"ops":[]})",
       "bytes"},
      {R"({"format":"memwall.graph/1","name":"x","meta":{},"buffers":[],"ops":[{"id":0,"name":"op","type":"t","phase":"forward","in":[3],"out":[]}]})",
       "op 0"},
  };
  int i = 0;
  for (const auto& [text, message] : cases) {
    std::string path = dir + "memwall_bad_graph_" + std::to_string(i++) + ".json";
    std::ofstream(path) << text;
    auto r = run_memwall("inspect --graph " + path);
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    std::remove(path.c_str());
  }
}

TEST(CliExport, NeverHalfWritten) {
  // An export into a missing directory fails cleanly and leaves nothing behind.
  auto r = run_memwall("inspect --export /nonexistent-dir/g.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

TEST(CliInspect, CustomGpuFromJson) {
  // A profile file: the built-in a100-80g with half its memory.
  auto gpus = testing::run_memwall("gpus --json");
  ASSERT_EQ(gpus.exit_code, 0);
  auto profile = nlohmann::json::parse(gpus.out)[3];
  ASSERT_EQ(profile["name"], "a100-80g");
  profile["name"] = "a100-half";
  profile["device_memory_bytes"] = 42949672960ull;
  std::string path = ::testing::TempDir() + "memwall_gpu_test.json";
  std::ofstream(path) << profile.dump();
  auto r = testing::run_memwall("inspect --gpu-file " + path + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpu"], "a100-half");
  EXPECT_EQ(j["device_memory_bytes"], 42949672960ull);
  auto base = nlohmann::json::parse(testing::run_memwall("inspect --json").out);
  EXPECT_DOUBLE_EQ(j["iteration_time_s"].get<double>(), base["iteration_time_s"].get<double>());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

TEST(CliInspect, ByLayerShowsKorthikantiEq1) {
  // Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  // Transformer Models", eq. 1: sbh(34 + 5as/h) bytes per layer, plus the
  // 16sb of fp32 LayerNorm statistics eq. 1 leaves out (sec. 4.1 counts only
  // the sbh- and as^2b-sized tensors). GPT-2 small: h = 768, a = 12.
  auto r =
      testing::run_memwall("inspect --model gpt2-small --batch 4 --seq 1024 --by-layer --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  const uint64_t s = 1024, b = 4, h = 768, a = 12;
  const uint64_t expected = s * b * h * 34 + 5 * a * s * s * b + 16 * s * b;
  ASSERT_EQ(expected, 358678528u);
  int layers = 0;
  for (const auto& row : j["saved_by_layer"]) {
    if (row["layer"] == "(outside layers)") continue;
    EXPECT_EQ(row["saved_activation_bytes"], expected) << row["layer"];
    ++layers;
  }
  EXPECT_EQ(layers, 12);
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// --by-layer lists the layers the per-layer planner checkpoints (Note [What
// a layer is] in src/graph/layers.cc; their bytes on a U-Net are checked in
// tests/remat/per_layer_test.cc): U-Net's blocks, VGG's weight layers with
// their activation and pooling, ResNet's bottlenecks.
TEST(CliInspect, ByLayerListsThePerLayerPlannersLayers) {
  struct Case {
    const char* model;
    ModelOptions options;
    const char* args;
    std::vector<std::string> first;
  };
  for (const Case& c :
       {Case{"unet", {.batch = 1, .image = 64}, "--batch 1 --image 64", {"inc", "down1", "down2"}},
        Case{"vgg16",
             {.batch = 1, .image = 64},
             "--batch 1 --image 64",
             {"features.0", "features.2", "features.5"}},
        Case{"resnet50",
             {.batch = 1, .image = 64},
             "--batch 1 --image 64",
             {"(outside layers)", "layer1.0", "layer1.1"}}}) {
    SCOPED_TRACE(c.model);
    auto r = testing::run_memwall(std::string("inspect --model ") + c.model + " " + c.args +
                                  " --by-layer --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const std::vector<LayerBytes> rows = saved_by_layer(build_model(c.model, c.options));
    ASSERT_EQ(j["saved_by_layer"].size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(j["saved_by_layer"][i]["layer"], rows[i].layer);
      EXPECT_EQ(j["saved_by_layer"][i]["saved_activation_bytes"], rows[i].saved);
    }
    for (size_t i = 0; i < c.first.size(); ++i) {
      EXPECT_EQ(j["saved_by_layer"][i]["layer"], c.first[i]);
    }
  }
}

}  // namespace
}  // namespace memwall
