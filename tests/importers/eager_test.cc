// Note [Eager lifetimes]: traced graphs carry when eager PyTorch frees each
// storage. tests/python/linear_toy.py is issue 20's toy (two bias-free
// Linear(2000, 2000), batch 16, Adam with foreach=False), on which memwall's
// last-reader estimate was 10% below the measured peak.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "graph_lookup.h"
#include "memwall/graph/graph.h"
#include "test_util.h"
#include "torch_env.h"

namespace memwall {
namespace {

TEST(EagerLifetimes, AdamsPreviousDenomAndTheBatchAreAliveAtTheEagerPeak) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  MEMWALL_REQUIRE_TORCH();
  const Graph g = importers::trace_torch({.script = testing::test_script("linear_toy.py:build")});
  ASSERT_TRUE(has_eager_lifetimes(g));
  // The training loop holds its batch (input and target, 16 x 2000 fp32,
  // 128,000 B each) to the end of the step.
  for (const char* name : {"input", "target"}) {
    const Buffer* b = find_buffer(g, name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->eager_free, kNoOp) << name;
    EXPECT_EQ(b->bytes, 128'000u) << name;
  }
  // torch.optim.Adam's single-tensor loop: the first weight's denom (2000 x
  // 2000 fp32, 16,000,000 B) dies only when the loop rebinds the name to the
  // second weight's, after that one is allocated. memwall's own schedule
  // frees it after its last reader.
  // Traced for CUDA's kernels (the default), eager PyTorch also still holds
  // the two cuBLAS workspaces (Note [cuBLAS workspaces]: forward and backward
  // handles, PyTorch's default 8,519,680 B each); memwall's schedule frees
  // them after the last matmul of each pass.
  const MemoryProfile own = memory_profile(g);
  const MemoryProfile eager = memory_profile(g, eager_liveness(g));
  EXPECT_EQ(eager.peak_bytes, own.peak_bytes + 16'000'000 + 2 * 128'000 + 2 * 8'519'680);
  EXPECT_EQ(g.ops[eager.peak_op].phase, Phase::kOptimizer);
  EXPECT_EQ(g.ops[own.peak_op].phase, Phase::kOptimizer);
  for (const char* name : {"cublas_workspace.forward", "cublas_workspace.backward"}) {
    const Buffer* b = find_buffer(g, name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->bytes, 8'519'680u) << name;
    EXPECT_EQ(b->eager_free, kNoOp) << name;
  }
  // The CPU's kernels have no cuBLAS: only the denom and the batch.
  const Graph cpu = importers::trace_torch(
      {.script = testing::test_script("linear_toy.py:build"), .kernels = "cpu"});
  EXPECT_EQ(find_buffer(cpu, "cublas_workspace.forward"), nullptr);
  EXPECT_EQ(memory_profile(cpu, eager_liveness(cpu)).peak_bytes,
            memory_profile(cpu).peak_bytes + 16'000'000 + 2 * 128'000);
}

// Note [Steady storages] (python/memwall/tracer/recorder.py): a meta trace checks model
// states and gradients once, at the end of the step. An optimizer that drops
// each gradient after its update makes them die mid-step; the trace is then
// made again with every storage checked, so each gradient dies after the op
// that used it, as in eager PyTorch, not at the end of the step.
TEST(EagerLifetimes, GradientsDroppedMidStepDieAfterTheirLastUse) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  MEMWALL_REQUIRE_TORCH();
  const Graph g = importers::trace_torch({.script = testing::test_script("freeing_sgd.py:build")});
  int grads = 0;
  for (const Buffer& b : g.buffers) {
    if (b.kind != BufferKind::kGrad) continue;
    ++grads;
    ASSERT_NE(b.eager_free, kNoOp) << b.name;
    const Op& last = g.ops[b.eager_free];
    EXPECT_EQ(last.phase, Phase::kOptimizer) << b.name;
    EXPECT_EQ(last.type, "add_") << b.name;
    // The op that used it is its parameter's update.
    ASSERT_EQ(last.updates.size(), 1u) << b.name;
    EXPECT_EQ(g.buffers[last.updates[0]].name + ".grad", b.name);
  }
  EXPECT_EQ(grads, 2);
  // Adam keeps its gradients to the end of the step: set aside, alive there.
  const Graph adam =
      importers::trace_torch({.script = testing::test_script("linear_toy.py:build")});
  for (const Buffer& b : adam.buffers) {
    if (b.kind == BufferKind::kGrad || b.kind == BufferKind::kParam) {
      EXPECT_EQ(b.eager_free, kNoOp) << b.name;
    }
  }
}

// PyTorch's cuBLAS workspace size (CublasHandlePool.cpp,
// parseChosenWorkspaceSize): CUBLAS_WORKSPACE_CONFIG when set (":SIZE_KiB:COUNT"
// pairs summed), else ":4096:2:16:8".
TEST(EagerLifetimes, CublasWorkspaceFollowsCublasWorkspaceConfig) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  MEMWALL_REQUIRE_TORCH();
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1);  // the size PyTorch uses on Hopper
  const Graph g = importers::trace_torch({.script = testing::test_script("linear_toy.py:build")});
  ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
  const Buffer* b = find_buffer(g, "cublas_workspace.backward");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bytes, 32u << 20);
}

}  // namespace
}  // namespace memwall
