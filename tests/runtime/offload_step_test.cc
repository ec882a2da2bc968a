// Note [Overlapped offload step]: tile by tile with the copy back
// overlapped, the weights, the states and the device's half copy are
// bitwise those of one adamw_step with a HalfCopy.
#include "memwall/runtime/offload_step.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"

namespace memwall::runtime {
namespace {

struct Tensors {
  std::vector<float> param, grad, m, v;
  explicit Tensors(size_t n, uint32_t seed) : param(n), grad(n), m(n), v(n) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (size_t i = 0; i < n; ++i) {
      param[i] = normal(rng);
      grad[i] = normal(rng) * 1e-2f;
      m[i] = normal(rng) * 1e-3f;
      v[i] = std::abs(normal(rng)) * 1e-5f;
    }
  }
  AdamWState state() { return {param, grad, m, v}; }
};

TEST(OffloadStep, TilesWithTheCopyOverlappedEqualOneStep) {
  auto device = alloc::make_host_vmm(uint64_t{64} << 20);
  auto allocator = alloc::make_allocator("stitching", *device, {});
  HostPool pool(uint64_t{16} << 20);
  auto engine = make_emulated_copy_engine();
  for (const HalfType type : {HalfType::bf16, HalfType::fp16}) {
    for (const size_t n : {size_t{1}, size_t{1000}, size_t{4097}, size_t{3 * 4096 + 17}}) {
      Tensors expected(n, 11), actual(n, 11);
      std::vector<uint16_t> expected_half(n);
      adamw_step({}, 3, expected.state(), HalfCopy{type, expected_half});
      alloc::Allocation on_device = allocator->allocate(n * sizeof(uint16_t), 0);
      ASSERT_TRUE(on_device);
      const OverlappedStepStats s =
          adamw_step_to_device({}, 3, actual.state(), type, on_device.ptr, *engine, pool, 4096);
      EXPECT_EQ(s.tiles, (n + 4095) / 4096) << n;
      EXPECT_EQ(std::memcmp(actual.param.data(), expected.param.data(), n * 4), 0) << n;
      EXPECT_EQ(std::memcmp(actual.m.data(), expected.m.data(), n * 4), 0) << n;
      EXPECT_EQ(std::memcmp(actual.v.data(), expected.v.data(), n * 4), 0) << n;
      EXPECT_EQ(std::memcmp(on_device.ptr, expected_half.data(), n * 2), 0) << n;
      allocator->free(on_device.ptr);
    }
  }
  // Two staging tiles, back in the pool.
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
}

TEST(OffloadStep, BadArguments) {
  HostPool pool(uint64_t{1} << 20);
  auto engine = make_emulated_copy_engine();
  Tensors t(16, 1);
  std::vector<uint16_t> dst(16);
  EXPECT_THROW(adamw_step_to_device({}, 1, t.state(), HalfType::none, dst.data(), *engine, pool),
               OptimizerError);
  EXPECT_THROW(adamw_step_to_device({}, 1, t.state(), HalfType::bf16, nullptr, *engine, pool),
               OptimizerError);
  EXPECT_THROW(adamw_step_to_device({}, 1, t.state(), HalfType::bf16, dst.data(), *engine, pool, 0),
               OptimizerError);
  Tensors empty(0, 1);
  EXPECT_EQ(
      adamw_step_to_device({}, 1, empty.state(), HalfType::bf16, nullptr, *engine, pool).tiles, 0u);
}

}  // namespace
}  // namespace memwall::runtime
