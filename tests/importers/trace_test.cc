// The tracer on small models whose graphs can be checked by hand: kinds,
// views and in-place updates, FLOPs, measured times, and the messages for
// models that cannot be traced.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graph_lookup.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/base/private_dir.h"
#include "memwall/importers/torch_trace.h"
#include "torch_env.h"

namespace memwall {
namespace {

using importers::TorchTraceRequest;
using importers::trace_torch;
using testing::test_script;
using testing::trace_error;

std::vector<const Op*> ops_of_type(const Graph& g, const std::string& type) {
  std::vector<const Op*> out;
  for (const Op& op : g.ops) {
    if (op.type == type) out.push_back(&op);
  }
  return out;
}

bool contains(const BufferIds& ids, BufferId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// tests/python/tiny_cnn.py: conv 3->4 3x3 (bias) -> BN -> ReLU(inplace) ->
// flatten -> linear 256->10, batch 2 of 3x8x8, Adam.
class TinyCnn : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::torch_available()) return;
    graph_ = new Graph(trace_torch({.script = test_script("tiny_cnn.py:build")}));
  }
  static void TearDownTestSuite() {
    delete graph_;
    graph_ = nullptr;
  }
  void SetUp() override { MEMWALL_REQUIRE_TORCH(); }
  static Graph* graph_;
};
Graph* TinyCnn::graph_ = nullptr;

TEST_F(TinyCnn, ParametersGradsAndStatesByKind) {
  const Graph& g = *graph_;
  // 4*3*3*3 + 4 (conv) + 4 + 4 (bn) + 10*256 + 10 (fc).
  EXPECT_EQ(param_count(g), 2690u);
  const char* params[] = {"conv.weight", "conv.bias", "bn.weight",
                          "bn.bias",     "fc.weight", "fc.bias"};
  for (const char* p : params) {
    const std::string name(p);
    const Buffer* param = find_buffer(g, name);
    ASSERT_NE(param, nullptr) << name;
    EXPECT_EQ(param->kind, BufferKind::kParam);
    const Buffer* grad = find_buffer(g, name + ".grad");
    ASSERT_NE(grad, nullptr) << name;
    EXPECT_EQ(grad->kind, BufferKind::kGrad);
    EXPECT_EQ(grad->bytes, param->bytes);
    // Adam's moments (fp32, the parameter's size) and its step counter (a
    // 0-d fp32 tensor in torch 1.13) exist before the first op.
    for (const char* state : {"exp_avg", "exp_avg_sq"}) {
      const Buffer* s = find_buffer(g, name + "." + state);
      ASSERT_NE(s, nullptr) << name << state;
      EXPECT_EQ(s->kind, BufferKind::kOptimState);
      EXPECT_EQ(s->bytes, param->bytes);
    }
    const Buffer* step = find_buffer(g, name + ".step");
    ASSERT_NE(step, nullptr);
    EXPECT_EQ(step->bytes, 4u);
    // The step updates the parameter in place: exactly one optimizer op.
    int updates = 0;
    for (const Op& op : g.ops) {
      if (op.phase == Phase::kOptimizer && contains(op.updates, param->id)) ++updates;
    }
    EXPECT_EQ(updates, 1) << name;
  }
  EXPECT_EQ(find_buffer(g, "conv.weight")->bytes, 432u);
  // Batch-norm running statistics: persistent, not parameters.
  EXPECT_EQ(find_buffer(g, "bn.running_mean")->kind, BufferKind::kOptimState);
  EXPECT_EQ(find_buffer(g, "bn.running_var")->kind, BufferKind::kOptimState);
  EXPECT_EQ(find_buffer(g, "bn.num_batches_tracked")->bytes, 8u);
  const Buffer* input = find_buffer(g, "input");
  ASSERT_NE(input, nullptr);
  EXPECT_EQ(input->kind, BufferKind::kInput);
  EXPECT_EQ(input->bytes, 2u * 3 * 8 * 8 * 4);
  EXPECT_EQ(input->dtype, DType::kF32);
  const Buffer* target = find_buffer(g, "target");
  ASSERT_NE(target, nullptr);
  EXPECT_EQ(target->dtype, DType::kI64);
  EXPECT_EQ(target->bytes, 16u);
}

TEST_F(TinyCnn, ViewsShareTheirBaseAndInPlaceOpsUpdateIt) {
  const Graph& g = *graph_;
  // flatten and the weight transposes are views: no op, no buffer.
  for (const char* view : {"view", "_reshape_alias", "t", "transpose", "detach", "expand"}) {
    EXPECT_TRUE(ops_of_type(g, view).empty()) << view;
  }
  // The in-place ReLU updates batch norm's output: it reads that version
  // and creates the next one, in its place (Note [Buffer versions]), which
  // the fc reads through the flatten view.
  const auto relus = ops_of_type(g, "relu_");
  ASSERT_EQ(relus.size(), 1u);
  EXPECT_TRUE(relus[0]->updates.empty());
  ASSERT_EQ(relus[0]->out.size(), 1u);
  const Buffer& relu_out = g.buffers[relus[0]->out[0]];
  ASSERT_NE(relu_out.version_of, kNoBuffer);
  const Buffer& bn_out = g.buffers[relu_out.version_of];
  EXPECT_EQ(relu_out.name, bn_out.name + "@v1");
  EXPECT_TRUE(contains(relus[0]->in, bn_out.id));
  EXPECT_EQ(bn_out.bytes, 2u * 4 * 8 * 8 * 4);
  EXPECT_EQ(relu_out.bytes, bn_out.bytes);
  const auto addmm = ops_of_type(g, "addmm");
  ASSERT_EQ(addmm.size(), 1u);
  EXPECT_TRUE(contains(addmm[0]->in, relu_out.id));
  // ... and is saved for backward (threshold_backward reads it); the
  // version before the ReLU is not.
  EXPECT_TRUE(saved_for_backward(g)[relu_out.id]);
  EXPECT_FALSE(saved_for_backward(g)[bn_out.id]);
  // The forward batch norm updates the running statistics in place.
  const auto bn = ops_of_type(g, "native_batch_norm");
  ASSERT_EQ(bn.size(), 1u);
  EXPECT_TRUE(contains(bn[0]->updates, find_buffer(g, "bn.running_mean")->id));
  EXPECT_TRUE(contains(bn[0]->updates, find_buffer(g, "bn.running_var")->id));
}

TEST_F(TinyCnn, FlopsFromShapes) {
  const Graph& g = *graph_;
  // Convolution: 2 * output elements (2*4*8*8) * Cin*k*k (3*9) + bias.
  const auto conv = ops_of_type(g, "convolution");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]->flops, 2.0 * 512 * 27 + 512);
  // Its backward: the image needs no gradient, so the weight gradient
  // (2 * macs) and the bias gradient (a sum over 512 elements) only.
  const auto conv_bwd = ops_of_type(g, "convolution_backward");
  ASSERT_EQ(conv_bwd.size(), 1u);
  EXPECT_EQ(conv_bwd[0]->flops, 2.0 * 512 * 27 + 512);
  // Linear: addmm of [2, 256] x [256, 10] plus the bias.
  EXPECT_EQ(ops_of_type(g, "addmm")[0]->flops, 2.0 * 2 * 256 * 10 + 2 * 10);
  // Its backward: two mm, 2*m*k*n each.
  const auto mm = ops_of_type(g, "mm");
  ASSERT_EQ(mm.size(), 2u);
  EXPECT_EQ(mm[0]->flops, 2.0 * 2 * 10 * 256);
  EXPECT_EQ(mm[1]->flops, 2.0 * 10 * 2 * 256);
  // Elementwise: one per element.
  EXPECT_EQ(ops_of_type(g, "relu_")[0]->flops, 512.0);
  for (const Op& op : g.ops) EXPECT_FALSE(op.time.has_value()) << op.name;
}

TEST_F(TinyCnn, PhasesInOrder) {
  const Graph& g = *graph_;
  Phase last = Phase::kForward;
  for (const Op& op : g.ops) {
    EXPECT_GE(static_cast<int>(op.phase), static_cast<int>(last)) << op.name;
    last = op.phase;
  }
  EXPECT_EQ(last, Phase::kOptimizer);
  EXPECT_EQ(g.meta.at("device"), "meta");
  EXPECT_EQ(g.meta.at("param_count"), 2690);
}

TEST(Trace, MomentumBuffersExistBeforeTheFirstOp) {
  MEMWALL_REQUIRE_TORCH();
  const Graph g = trace_torch({.script = test_script("tiny_cnn.py:build_sgd")});
  const Buffer* momentum = find_buffer(g, "fc.weight.momentum_buffer");
  ASSERT_NE(momentum, nullptr);
  EXPECT_EQ(momentum->kind, BufferKind::kOptimState);
  EXPECT_EQ(momentum->bytes, 10240u);
  // The steady-state step scales and accumulates it in place (no clone).
  int updates = 0;
  for (const Op& op : g.ops) updates += contains(op.updates, momentum->id);
  EXPECT_GE(updates, 2);
  EXPECT_TRUE(ops_of_type(g, "clone").empty());
}

TEST(Trace, MeasureRecordsEveryOpsTime) {
  MEMWALL_REQUIRE_TORCH();
  const Graph g = trace_torch({.script = test_script("tiny_cnn.py:build"), .measure = true});
  EXPECT_EQ(g.meta.at("device"), "cpu");
  EXPECT_EQ(param_count(g), 2690u);
  ASSERT_FALSE(g.ops.empty());
  for (const Op& op : g.ops) {
    ASSERT_TRUE(op.time.has_value()) << op.name;
    EXPECT_GE(*op.time, 0.0);
  }
}

TEST(Trace, UntraceableModelNamesTheOperator) {
  MEMWALL_REQUIRE_TORCH();
  const std::string err = trace_error({.script = test_script("untraceable.py:build")});
  EXPECT_NE(err.find("operator aten::nonzero failed: it has no meta-device kernel in torch 2."),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("--measure runs the model on the CPU instead)"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(Trace, BadInputIsOneLine) {
  MEMWALL_REQUIRE_TORCH();
  const std::pair<TorchTraceRequest, const char*> cases[] = {
      {{.torchvision = "resnet51", .batch = 2}, "unknown torchvision classification model"},
      {{.script = test_script("missing.py:build")}, "does not exist"},
      {{.script = test_script("tiny_cnn.py:no_such_function")}, "has no function"},
      {{.script = test_script("tiny_cnn.py")}, "FILE.py:FUNCTION"},
      {{.torchvision = "resnet18", .batch = 2, .optimizer = "lion"}, "unknown optimizer"},
      {{.torchvision = "inception_v3", .batch = 2, .image = 64}, "inception_v3: operator aten::"},
  };
  for (const auto& [request, expected] : cases) {
    const std::string err = trace_error(request);
    EXPECT_NE(err.find(expected), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

TEST(Trace, MissingPythonIsReported) {
  ::setenv("MEMWALL_PYTHON", "/nonexistent/python3", 1);
  const std::string err = trace_error({.torchvision = "resnet18"});
  ::unsetenv("MEMWALL_PYTHON");
  EXPECT_NE(err.find("no Python interpreter at /nonexistent/python3"), std::string::npos) << err;
}

// Restores an environment variable when it goes out of scope.
class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvVar() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void make_executable(const std::filesystem::path& path) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

// Note [Tracer interpreter]: --python, then $MEMWALL_PYTHON, then memwall's
// environment once complete, then python3 on PATH.
TEST(Trace, InterpreterIsChosenInOrder) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("memwall_python_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const EnvVar cache("XDG_CACHE_HOME", (dir / "cache").string());
  const EnvVar python("MEMWALL_PYTHON", "");
  // The same path as the install script's, which makes the environment.
  const std::string script = std::string(MEMWALL_SOURCE_DIR) + "/scripts/install-deps.sh";
  FILE* p = ::popen((script + " --print-python").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[4096] = {};
  ASSERT_NE(std::fgets(line, sizeof line, p), nullptr);
  ::pclose(p);
  const EnvVar path("PATH", (dir / "empty").string() + ":" + (dir / "bin").string());
  const std::string own = importers::memwall_env_python();
  EXPECT_EQ(std::string(line), own + "\n");
  EXPECT_EQ(own.rfind((dir / "cache/memwall/venv-").string(), 0), 0u) << own;

  EXPECT_EQ(importers::tracer_python(), "python3");  // nothing anywhere
  make_executable(dir / "bin/python3");
  EXPECT_EQ(importers::tracer_python(), (dir / "bin/python3").string());
  make_executable(own);  // not complete yet: no marker
  EXPECT_EQ(importers::tracer_python(), (dir / "bin/python3").string());
  std::ofstream(std::filesystem::path(own).parent_path().parent_path() / ".memwall-complete");
  EXPECT_EQ(importers::tracer_python(), own);
  ::setenv("MEMWALL_PYTHON", "/opt/mine/python", 1);
  EXPECT_EQ(importers::tracer_python(), "/opt/mine/python");
  EXPECT_EQ(importers::tracer_python("/opt/chosen/python"), "/opt/chosen/python");
  std::filesystem::remove_all(dir);
}

// Every .py file under python/memwall is embedded, by its path, sorted, and
// as the repository has it.
TEST(Trace, EmbeddedSourceIsTheRepositorysPackage) {
  const std::string python = std::string(MEMWALL_SOURCE_DIR) + "/python";
  std::vector<std::string> on_disk;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(python + "/memwall")) {
    if (entry.is_regular_file() && entry.path().extension() == ".py") {
      on_disk.push_back(std::filesystem::relative(entry.path(), python).string());
    }
  }
  std::sort(on_disk.begin(), on_disk.end());
  std::vector<std::string> embedded;
  for (const importers::PythonFile& file : importers::python_package_files()) {
    embedded.emplace_back(file.path);
  }
  EXPECT_EQ(embedded, on_disk);
  EXPECT_NE(std::find(embedded.begin(), embedded.end(), "memwall/__main__.py"), embedded.end());
  for (const importers::PythonFile& file : importers::python_package_files()) {
    const std::string path = python + "/" + std::string(file.path);
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr) << path;
    std::string text;
    char chunk[4096];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, n);
    std::fclose(f);
    EXPECT_EQ(file.source, text) << path;
  }
}

// The package is written with its subdirectories, and goes with its directory.
TEST(Trace, PackageIsWrittenWithItsDirectories) {
  std::string root;
  {
    PrivateDir dir("memwall-package-test");
    root = dir.path();
    const std::string entry = importers::write_python_package(dir);
    EXPECT_EQ(entry, root + "/memwall/__main__.py");
    for (const importers::PythonFile& file : importers::python_package_files()) {
      EXPECT_TRUE(std::filesystem::is_regular_file(root + "/" + std::string(file.path)))
          << file.path;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(root));
}

}  // namespace
}  // namespace memwall
