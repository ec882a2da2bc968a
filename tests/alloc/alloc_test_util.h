// Helpers shared by the alloc tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "memwall/alloc/allocator.h"

namespace memwall::alloc::testing {

inline constexpr uint64_t kGranule = kDefaultGranularity;

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
