// `memwall trace`: a real trace end to end, and bad input as one line with
// exit code 2 and no output file.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "importers/torch_env.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/importers/torch_trace.h"
#include "run_memwall.h"
#include "test_util.h"

namespace memwall::testing {
namespace {

// Note [Finding, not importing] (importers/torch_env.h).
bool torch_importable() {
  static const bool ok = tracer_has("torch, torchvision");
  return ok;
}

#define REQUIRE_TORCH()                                                                          \
  do {                                                                                           \
    if (!torch_importable()) {                                                                   \
      GTEST_SKIP() << "torch / torchvision are not importable by " << importers::tracer_python() \
                   << ": `make test` installs them in memwall's environment "                    \
                      "(scripts/install-deps.sh --torch, best effort) and the install failed "   \
                      "or did not run";                                                          \
    }                                                                                            \
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
  EXPECT_NE(r.out.find("resnet18 b4 i64 fp32 traced (meta device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("11,689,512"), std::string::npos) << r.out;  // torchvision's num_params
  const Graph g = read_graph_file(out);
  EXPECT_EQ(param_count(g), 11689512u);
  // Where it came from: the versions it was traced with (issue 18 pins
  // torch 2.x), in the meta and the summary; torchvision was used,
  // transformers was not.
  const std::string torch = g.meta.at("torch").get<std::string>();
  EXPECT_EQ(torch.rfind("2.", 0), 0u) << torch;
  const std::string torchvision = g.meta.at("torchvision").get<std::string>();
  EXPECT_FALSE(g.meta.contains("transformers"));
  EXPECT_NE(r.out.find("  traced with "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" torch " + torch + ", torchvision " + torchvision + " (" +
                       importers::tracer_python() + ")\n"),
            std::string::npos)
      << r.out;
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
  // Issue 17: a traced name carries the script's function, batch and dtype
  // (python/memwall/tracer/graph_writer.py, graph_name).
  EXPECT_EQ(g.name, "tiny_cnn:build b2 fp32 traced");
  EXPECT_EQ(j.at("graph"), g.name);
  EXPECT_EQ(j.at("ops"), g.ops.size());
  EXPECT_EQ(j.at("torch"), g.meta.at("torch"));
  EXPECT_EQ(j.at("python"), importers::tracer_python());
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

// Note [Optimizer as the device runs it]: torch's default for the kernels
// (foreach on CUDA) unless --optimizer-impl says otherwise; every
// implementation but the for-loop makes each parameter's step one op.
TEST(TraceCli, OptimizerAsTheDeviceRunsIt) {
  REQUIRE_TORCH();
  const std::string out = out_path("impl");
  size_t ops[3] = {};
  int i = 0;
  for (const char* impl : {"", "for-loop", "fused"}) {
    const std::string option = *impl ? std::string(" --optimizer-impl ") + impl : "";
    RunResult r = run_memwall("trace --script " + script("tiny_cnn.py:build") + option +
                              " --json --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("optimizer_impl"), *impl ? impl : "foreach");
    const Graph g = read_graph_file(out);
    EXPECT_EQ(g.meta.at("optimizer_impl"), j.at("optimizer_impl"));
    size_t steps = 0;
    for (const Op& op : g.ops) steps += op.phase == Phase::kOptimizer;
    ops[i++] = steps;
  }
  EXPECT_EQ(ops[0], ops[2]);  // one op per parameter
  EXPECT_GT(ops[1], ops[0]);  // the loop's kernels
  std::filesystem::remove(out);
  expect_one_line_failure(
      "trace --script " + script("tiny_cnn.py:build") + " --optimizer-impl apex",
      "unknown optimizer implementation 'apex' (known: for-loop, foreach, "
      "fused)");
}

TEST(TraceCli, BadFlags) {
  expect_one_line_failure("trace", "--torchvision NAME, --script FILE.py:FUNCTION, --hf NAME");
  expect_one_line_failure("trace --torchvision resnet18 --script a.py:f", "excludes");
  expect_one_line_failure("trace --torchvision resnet18 --batch 0", "--batch");
  expect_one_line_failure("trace --torchvision resnet18 --batch x", "--batch");
  expect_one_line_failure("trace --torchvision resnet18 --image -3", "--image");
  expect_one_line_failure("trace --torchvision resnet18 --optimizer lion", "lion");
  expect_one_line_failure("trace --script a.py:f --batch 4", "do not apply to a script");
  // Issue 24's options: --hf and its own flags, checked before Python starts.
  expect_one_line_failure("trace --hf gpt2 --script a.py:f", "excludes");
  expect_one_line_failure("trace --torchvision resnet18 --seq 128", "apply to --hf");
  expect_one_line_failure("trace --hf gpt2 --image 224", "--image applies");
  expect_one_line_failure("trace --hf gpt2 --dtype fp8", "fp8");
  expect_one_line_failure("trace --hf gpt2 --lora 8 --lora-targets q,x", "unknown LoRA target");
  expect_one_line_failure("trace --hf gpt2 --lora-alpha 16", "need --lora");
  expect_one_line_failure("trace --hf gpt2 --lora 0", "--lora");
  RunResult r = run_memwall("trace --torchvision resnet18");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
}

TEST(TraceCli, BadThreads) {
  expect_one_line_failure("trace --torchvision resnet18 --threads 0", "--threads");
  expect_one_line_failure("trace --torchvision resnet18 --threads 5000", "--threads");
}

// `memwall bench fidelity` on one small case: JSON with issue 20's fields,
// exit 0 when on target; bad cases and flags are one line, exit 2.
TEST(BenchFidelityCli, JsonCasesAndBadInput) {
  REQUIRE_TORCH();
  RunResult r = run_memwall("bench fidelity --cases linear-toy --json --ops");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out.at("cases").size(), 1u);
  const nlohmann::json& c = out.at("cases")[0];
  EXPECT_EQ(c.at("model"), "linear-toy");
  EXPECT_TRUE(c.at("on_target").get<bool>());
  // Issue 20's toy: two 16,000,000 B weights with their Adam moments and
  // the batch before the step; the eager estimate within the target.
  const double measured = c.at("measured_peak_bytes").get<double>();
  const double predicted = c.at("predicted_peak_bytes").get<double>();
  EXPECT_GE(predicted, measured * 0.995);
  EXPECT_LE(predicted, measured * 1.01);
  EXPECT_EQ(c.at("predicted_peak_op"), "1.weight.div");
  EXPECT_EQ(c.at("measured_peak_op"), "aten::div");
  // --ops: per op type with scratch on either side. The toy's: mse_loss's
  // unreduced loss (16 x 2000 fp32, 128,000 B, docs/cost-model.md) and the
  // 4 to 12 B scalars PyTorch wraps Python numbers in, which no rule covers.
  ASSERT_TRUE(c.contains("op_scratch"));
  bool saw_loss = false;
  for (const nlohmann::json& t : c.at("op_scratch")) {
    const uint64_t m = t.at("measured_max_bytes").get<uint64_t>();
    const uint64_t p = t.at("predicted_max_bytes").get<uint64_t>();
    EXPECT_LE(p, m) << t.dump();
    EXPECT_LE(m, p + 16) << t.dump();
    if (t.at("type") == "mse_loss") {
      saw_loss = true;
      EXPECT_EQ(p, 128'000u);
    }
  }
  EXPECT_TRUE(saw_loss);
  for (const char* args : {"bench fidelity --threads 0", "bench fidelity --cases resnet51",
                           "bench fidelity --cases resnet18:0", "bench fidelity --device tpu",
                           "bench fidelity --device cuda --ops"}) {
    RunResult bad = run_memwall(args);
    EXPECT_EQ(bad.exit_code, 2) << args;
    EXPECT_EQ(count_lines(bad.err), 1) << args << ": " << bad.err;
  }
}

// --device cuda on a machine whose torch sees no GPU: the trace for CUDA
// kernels is made, the real step cannot be, and says so in one line.
TEST(BenchFidelityCli, CudaWithoutAGpuIsOneLine) {
  REQUIRE_TORCH();
  if (tracer_sees_gpu()) GTEST_SKIP() << "this machine's torch sees a GPU";
  RunResult r = run_memwall("bench fidelity --device cuda --cases linear-toy");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("the real step runs on a GPU (a trace for CUDA kernels), and torch"),
            std::string::npos)
      << r.err;
}

TEST(TraceCli, UnknownModelMissingScriptOrFunction) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  REQUIRE_TORCH();
  expect_one_line_failure("trace --torchvision resnet51",
                          "unknown torchvision classification model 'resnet51'");
  expect_one_line_failure("trace --script " + script("nowhere.py:build"), "does not exist");
  expect_one_line_failure("trace --script " + script("tiny_cnn.py:nothing"),
                          "has no function 'nothing'");
  expect_one_line_failure("trace --script " + script("untraceable.py:build"),
                          "operator aten::nonzero failed");
}

// Note [A script that exits]: issue 45's os._exit(0) read as "the tracer's
// graph is invalid (a tracer bug)", a sys.exit() as its message alone.
TEST(TraceCli, AScriptThatExitsIsBlamed) {
  REQUIRE_TORCH();
  const std::string says =
      ": the script ended the tracer's process (exit code 0, with no verdict from the tracer: "
      "os._exit does so) before the trace was written: its function must return (model, batch, "
      "loss_fn, optimizer) and the training step must return to the tracer";
  expect_one_line_failure("trace --script " + script("exits.py:os_exit"),
                          "memwall: error: trace: " + script("exits.py") + says + "\n");
  expect_one_line_failure("trace --script " + script("exits.py:sys_exit_in_step"),
                          "the script called sys.exit('done') before the trace was written: its "
                          "function must return");
  // memwall run's trace (on real tensors) the same, whatever the code.
  const RunResult r = run_memwall("run --gpu l4 --script " + script("exits.py:os_exit_3"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memwall: error: trace: " + script("exits.py") +
                       ": the script ended the tracer's process (exit code 3, with no verdict "
                       "from the tracer: os._exit does so) before the trace was written: its "
                       "function must return (model, batch, loss_fn, optimizer) and the training "
                       "step must return to the tracer\n");
}

// Note [Unknown config fields]: a typo in a config.json is named with the
// field it meant, and the trace goes on (transformers keeps the field).
TEST(TraceCli, UnknownHfConfigFieldsAreNamed) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  REQUIRE_TORCH();
  if (!tracer_has("transformers")) GTEST_SKIP() << "no transformers for the tracer";
  const std::string config = out_path("tiny_llama_config");
  std::ofstream(config) << R"({"model_type": "llama", "hidden_size": 64, "hidden_sizee": 128,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 128,
      "vocab_size": 128, "max_position_embeddings": 64, "rope_theta": 10000.0,
      "not_a_field_at_all": 1})";
  const std::string out = out_path("tiny_llama");
  const RunResult r = run_memwall("trace --hf-config " + config + " --seq 16 --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "memwall: note: --hf-config " + config +
                       ": 'hidden_sizee' is not a field of transformers' LlamaConfig (did you "
                       "mean 'hidden_size'?); it is kept and no model reads it\n"
                       "memwall: note: --hf-config " +
                       config +
                       ": 'not_a_field_at_all' is not a field of transformers' LlamaConfig; it is "
                       "kept and no model reads it\n");
  // Built with the field it has, 64 wide (rope_theta is known: it is taken).
  EXPECT_EQ(nlohmann::json::parse(r.out).at("param_count"), 57536);
  std::filesystem::remove(config);
  std::filesystem::remove(out);
}

TEST(TraceCli, NoPython) {
  ::setenv("MEMWALL_PYTHON", "/nonexistent/python3", 1);
  expect_one_line_failure("trace --torchvision resnet18", "no Python interpreter");
  ::unsetenv("MEMWALL_PYTHON");
}

// A stand-in for the interpreter, in a private directory.
std::string fake_python(const char* tag, const std::string& body) {
  const std::string path =
      ::testing::TempDir() + "memwall_fake_python_" + tag + "_" + std::to_string(getpid());
  std::ofstream(path) << "#!/bin/sh\n" << body;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST(TraceCli, PythonWithoutTorchGetsTheInstallHint) {
  // -S: no site-packages, so no torch whatever is installed. The tracer
  // used to die with a NameError at import instead.
  ::setenv("MEMWALL_PYTHON", fake_python("nosite", "exec /usr/bin/python3 -S \"$@\"\n").c_str(), 1);
  expect_one_line_failure("trace --torchvision resnet18", "PyTorch is not installed for");
  expect_one_line_failure("trace --torchvision resnet18",
                          "or point --python or MEMWALL_PYTHON at an interpreter that has them)");
  ::unsetenv("MEMWALL_PYTHON");
}

// Note [Tracer interpreter]: --python wins over $MEMWALL_PYTHON.
TEST(TraceCli, PythonOptionChoosesTheInterpreter) {
  ::setenv("MEMWALL_PYTHON", fake_python("env", "echo env >&2; exit 3\n").c_str(), 1);
  expect_one_line_failure("trace --torchvision resnet18 --python /nonexistent/python3",
                          "trace: no Python interpreter at /nonexistent/python3 "
                          "(scripts/install-deps.sh --torch makes memwall's, with torch from "
                          "PyPI; or name one with --python or MEMWALL_PYTHON)");
  const std::string chosen =
      fake_python("chosen", "echo 'memwall-trace: error: chosen' >&2; exit 2\n");
  expect_one_line_failure("trace --torchvision resnet18 --python " + chosen, "chosen");
  ::unsetenv("MEMWALL_PYTHON");
}

TEST(TraceCli, TimeLimitStopsTheTracer) {
  ::setenv("MEMWALL_PYTHON", fake_python("sleepy", "exec sleep 60\n").c_str(), 1);
  const auto start = std::chrono::steady_clock::now();
  expect_one_line_failure("trace --torchvision resnet18 --timeout 0.5",
                          "trace: the PyTorch tracer did not finish within 0.5 s (--timeout); it "
                          "was stopped");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  ::unsetenv("MEMWALL_PYTHON");
  expect_one_line_failure("trace --torchvision resnet18 --timeout 0", "--timeout must be");
  expect_one_line_failure("trace --torchvision resnet18 --timeout -1", "--timeout must be");
}

// Issue 45: the files the tracer reads are checked before Python starts
// (its start and torch's import take seconds); the stand-in interpreter
// says whether it ran.
TEST(TraceCli, MissingFilesAreFoundBeforePythonStarts) {
  ::setenv("MEMWALL_PYTHON",
           fake_python("started", "echo 'memwall-trace: error: the tracer started' >&2; exit 2\n")
               .c_str(),
           1);
  expect_one_line_failure("trace --script /nonexistent/m.py:build",
                          "memwall: error: script '/nonexistent/m.py' does not exist\n");
  expect_one_line_failure("trace --script " + ::testing::TempDir() + ":build",
                          "cannot read it (a directory)");
  expect_one_line_failure("trace --script m.py", "--script takes FILE.py:FUNCTION, got 'm.py'");
  expect_one_line_failure("trace --hf-config /nonexistent/config.json",
                          "memwall: error: --hf-config /nonexistent/config.json: cannot read it "
                          "(no such file)\n");
  ::unsetenv("MEMWALL_PYTHON");
}

TEST(TraceCli, WhatTheScriptPrintsReachesStderr) {
  // The user's own output (stdout and stderr) is passed on as it comes; the
  // tracer's verdict becomes memwall's one error line.
  ::setenv("MEMWALL_PYTHON",
           fake_python("chatty",
                       "echo 'epoch 1: building'\n"
                       "echo 'a warning' >&2\n"
                       "echo 'memwall-trace: error: script.py: build() failed: boom' >&2\n"
                       "exit 2\n")
               .c_str(),
           1);
  const RunResult r =
      run_memwall("trace --script " + script("tiny_cnn.py:build") + " --out /dev/null");
  ::unsetenv("MEMWALL_PYTHON");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err,
            "epoch 1: building\na warning\nmemwall: error: trace: script.py: build() failed: "
            "boom\n");
}

}  // namespace
}  // namespace memwall::testing
