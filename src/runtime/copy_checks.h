// The argument checks every copy engine makes before it enqueues a copy.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace memwall::runtime {

inline void check_copy_arguments(const void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr) {
    throw std::invalid_argument("copy: null pointer for a copy of " + std::to_string(bytes) +
                                " bytes");
  }
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (d > UINTPTR_MAX - bytes || s > UINTPTR_MAX - bytes) {
    throw std::invalid_argument("copy: a range of " + std::to_string(bytes) +
                                " bytes wraps the address space");
  }
  if (d < s + bytes && s < d + bytes) {
    throw std::invalid_argument("copy: source and destination overlap");
  }
}

}  // namespace memwall::runtime
