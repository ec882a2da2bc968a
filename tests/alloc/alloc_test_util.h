// Helpers shared by the alloc tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "memwall/alloc/allocator.h"

namespace memwall::alloc::testing {

inline constexpr uint64_t kGranule = kDefaultGranularity;

// Two chunks mapped out of order into one reservation, unmapped as one
// range, released: what a VMM backend must allow (a CUDA GPU, the fake
// CUDA driver of tests/runtime/fake_cuda).
inline void map_two_chunks_out_of_order(Device& device) {
  const uint64_t granule = device.granularity();
  const uintptr_t base = device.reserve(2 * granule);
  const ChunkHandle a = *device.create_chunk();
  const ChunkHandle b = *device.create_chunk();
  device.map(base + granule, a);  // out of order on purpose
  device.map(base, b);
  EXPECT_EQ(device.chunks_in_use(), 2u);
  device.unmap(base, 2 * granule);
  device.release_chunk(a);
  device.release_chunk(b);
  device.unreserve(base, 2 * granule);
}

// A device and an allocator on it, destroyed in the right order.
struct Rig {
  std::unique_ptr<Device> device;
  std::unique_ptr<Allocator> allocator;
  Allocator* operator->() const { return allocator.get(); }
};

inline Rig sim_rig(std::string_view policy, uint64_t capacity, const Options& options = {}) {
  Rig rig;
  rig.device = make_sim_device(capacity);
  rig.allocator = make_allocator(policy, *rig.device, options);
  return rig;
}

inline Rig host_rig(std::string_view policy, uint64_t capacity, const Options& options = {}) {
  Rig rig;
  rig.device = make_host_vmm(capacity);
  rig.allocator = make_allocator(policy, *rig.device, options);
  return rig;
}

inline uintptr_t address(const Allocation& allocation) {
  return reinterpret_cast<uintptr_t>(allocation.ptr);
}

// The message of the Error that `action` throws, or "no error".
template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

// Test names for suites parameterized by policy name.
inline std::string policy_name(const ::testing::TestParamInfo<std::string_view>& param) {
  return std::string(param.param);
}

}  // namespace memwall::alloc::testing
