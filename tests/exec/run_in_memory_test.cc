// The executor's public C++ API (memwall/exec/library.h, issue 46): a plan
// run with the step's inputs handed over in memory, as a Python extension
// holding its model's tensors would, gives the run its files give; what
// such values lack is bad input in one line.
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memwall/alloc/device.h"
#include "memwall/exec/library.h"
#include "memwall/exec/values.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"
#include "run_checks.h"

namespace memwall::testing {
namespace {

// The library beside the memwall binary: this test is not in its directory.
void use_built_executor() {
  const std::string library =
      (std::filesystem::path(MEMWALL_BINARY).parent_path() / "libmemwall_exec.so").string();
  ::setenv("MEMWALL_EXEC_LIBRARY", library.c_str(), 1);
}

// Values a caller owns: copies of a directory's, each buffer by its id and
// its name as the graph says, as a caller would hand over its tensors.
struct HeldValues {
  std::vector<std::vector<std::byte>> bytes;  // each stays where it is as this grows
  exec::StepValues values;

  std::span<const std::byte> hold(std::span<const std::byte> from) {
    bytes.emplace_back(from.begin(), from.end());
    return bytes.back();
  }
  void copy(const Graph& graph, const exec::ValueSet& from, exec::ValueSet& to) {
    for (const auto& [id, data] : from.buffers()) {
      const bool known = id >= 0 && static_cast<size_t>(id) < graph.buffers.size();
      to.add(id, known ? graph.buffers[static_cast<size_t>(id)].name : std::string(), hold(data));
    }
  }
  HeldValues(const Graph& graph, const std::string& dir) {
    const exec::ValueFiles files(dir, /*rank=*/0, /*ranks=*/1, /*eager=*/true);
    const exec::StepValues& read = files.values();
    copy(graph, read.state, values.state);
    values.rng = hold(read.rng);
    values.threads = read.threads;
    exec::EagerReference& eager = values.eager.emplace();
    copy(graph, read.eager->states, eager.states);
    eager.losses = read.eager->losses;
    eager.steps = read.eager->steps;
    eager.ranks = read.eager->ranks;
  }
};

TEST(RunInMemory, ValuesInMemoryRunAsTheirFilesDo) {
  REQUIRE_EXECUTOR();
  use_built_executor();
  const std::string dir = kept_cnn_bn("in_memory");
  ASSERT_FALSE(dir.empty());
  const Graph graph = read_graph_file(dir + "/graph.json");
  // Keep-all on a device of 24 GiB (the L4's, as RunKept's plans).
  const Plan plan = default_plan(graph, "l4", uint64_t{24} << 30);
  exec::RunOptions options;
  options.steps = 1;  // the kept trace's eager steps
  options.check_eager = true;

  exec::RunResult from_files;
  std::string error;
  ASSERT_EQ(exec::run_plan(graph, plan, dir, options, from_files, error), exec::Status::kOk)
      << error;
  ASSERT_EQ(from_files.eager_equal, true) << from_files.eager_difference;

  // Copied into memory, the directory gone: the run reads no file.
  HeldValues held(graph, dir);
  std::filesystem::remove_all(dir);
  exec::RunResult from_memory;
  ASSERT_EQ(exec::run_plan(graph, plan, held.values, options, from_memory, error),
            exec::Status::kOk)
      << error;
  EXPECT_EQ(from_memory.eager_equal, true) << from_memory.eager_difference;
  ASSERT_EQ(from_memory.steps.size(), from_files.steps.size());
  for (size_t k = 0; k < from_files.steps.size(); ++k) {
    EXPECT_EQ(from_memory.steps[k].loss, from_files.steps[k].loss) << k;
    EXPECT_EQ(from_memory.steps[k].device_peak_bytes, from_files.steps[k].device_peak_bytes) << k;
  }
  EXPECT_EQ(from_memory.threads, from_files.threads);

  // What values in memory lack is said in one line, before any work.
  exec::StepValues no_rng = held.values;
  no_rng.rng = {};
  exec::RunResult refused;
  EXPECT_EQ(exec::run_plan(graph, plan, no_rng, options, refused, error), exec::Status::kBadInput);
  EXPECT_EQ(error, "the values in memory: no generator state (StepValues::rng)");
  exec::StepValues no_eager = held.values;
  no_eager.eager.reset();
  EXPECT_EQ(exec::run_plan(graph, plan, no_eager, options, refused, error),
            exec::Status::kBadInput);
  EXPECT_NE(error.find("no eager reference"), std::string::npos) << error;
  // A buffer of another size: the values are of another trace.
  exec::StepValues short_one = held.values;
  const Buffer& param = *std::find_if(graph.buffers.begin(), graph.buffers.end(),
                                      [](const Buffer& b) { return b.kind == BufferKind::kParam; });
  short_one.state.add(param.id, param.name, held.values.state.buffer(param.id).first(1));
  options.check_eager = false;
  EXPECT_EQ(exec::run_plan(graph, plan, short_one, options, refused, error),
            exec::Status::kBadInput);
  EXPECT_NE(error.find("has 1 bytes of values"), std::string::npos) << error;
}

// Note [The CUDA run] (src/exec/cuda_run.cc): what the GPU path does not
// do yet, and values from the CPU's kernels, are refused in one line before
// anything touches CUDA; a run asked of a machine without a GPU (this one)
// says so after loading libmemwall_exec_cuda.so, or that the build has none.
TEST(RunInMemory, TheCudaDeviceRefusesInOneLine) {
  REQUIRE_EXECUTOR();
  use_built_executor();
  const std::string dir = kept_cnn_bn("in_memory_cuda");
  ASSERT_FALSE(dir.empty());
  Graph graph = read_graph_file(dir + "/graph.json");
  const Plan plan = default_plan(graph, "l4", uint64_t{24} << 30);
  const HeldValues held(graph, dir);
  std::filesystem::remove_all(dir);
  exec::RunOptions options;
  options.steps = 1;
  exec::RunResult result;
  std::string error;
  options.device = "tpu";
  EXPECT_EQ(exec::run_plan(graph, plan, held.values, options, result, error),
            exec::Status::kBadInput);
  EXPECT_EQ(error, "unknown device \"tpu\": the executor runs on \"emulated\" or \"cuda\"");
  options.device = "cuda";
  EXPECT_EQ(exec::run_plan(graph, plan, held.values, options, result, error),
            exec::Status::kBadInput);
  EXPECT_NE(error.find("was traced on the cpu for cpu kernels; a CUDA run needs a trace made on "
                       "the GPU"),
            std::string::npos)
      << error;
  Plan laid_out = plan;
  laid_out.offsets[graph.buffers.front().id] = 0;
  EXPECT_EQ(exec::run_plan(graph, laid_out, held.values, options, result, error),
            exec::Status::kBadInput);
  EXPECT_NE(error.find("a layout's offsets, which a CUDA run does not do yet"), std::string::npos)
      << error;
  options.ranks = 2;
  EXPECT_EQ(exec::run_plan(graph, plan, held.values, options, result, error),
            exec::Status::kBadInput);
  options.ranks = 1;
  if (alloc::make_cuda_vmm(0, uint64_t{1} << 30) != nullptr) {
    GTEST_SKIP() << "a GPU is here: the RunExec matrix runs on it (MEMWALL_TEST_RUN_DEVICE=cuda, "
                    "scripts/gpu-check.sh)";
  }
  // As if traced on a GPU: the executor goes as far as CUDA itself.
  graph.meta["device"] = "cuda";
  graph.meta["kernels"] = "cuda";
  EXPECT_EQ(exec::run_plan(graph, plan, held.values, options, result, error),
            exec::Status::kBadInput);
  EXPECT_TRUE(error.starts_with("--device cuda: memwall's CUDA device memory cannot start: no "
                                "CUDA VMM device") ||
              error.find("--device cuda: this build has no ") == 0)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

}  // namespace
}  // namespace memwall::testing
