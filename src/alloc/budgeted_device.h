// The part every backend shares: the granularity and the capacity, counted
// in chunks (internal to src/alloc).
#pragma once

#include <mutex>
#include <string>

#include "memwall/alloc/device.h"
#include "memwall/alloc/error.h"

namespace memwall::alloc {

class BudgetedDevice : public Device {
 public:
  uint64_t granularity() const final { return granularity_; }
  uint64_t capacity() const final { return slots_ * granularity_; }
  uint64_t chunks_in_use() const final {
    std::lock_guard lock(budget_mutex_);
    return in_use_;
  }

 protected:
  // Throws Error naming `backend` unless `granularity` is a power of two and
  // a multiple of `alignment` (the page size for host memory).
  BudgetedDevice(std::string_view backend, uint64_t capacity, uint64_t granularity,
                 uint64_t alignment = 1)
      : granularity_(granularity) {
    if (granularity == 0 || (granularity & (granularity - 1)) != 0 ||
        granularity % alignment != 0) {
      throw Error(std::string(backend) + ": granularity " + std::to_string(granularity) +
                  " is not a power of two multiple of " + std::to_string(alignment) + " bytes");
    }
    slots_ = capacity / granularity;
  }

  // Counts `count` more chunks; false (counting none) when that would pass
  // the capacity.
  bool take_budget(uint64_t count) {
    std::lock_guard lock(budget_mutex_);
    if (count > slots_ - in_use_) return false;
    in_use_ += count;
    return true;
  }
  void return_budget(uint64_t count) {
    std::lock_guard lock(budget_mutex_);
    in_use_ -= count;
  }
  uint64_t slots() const { return slots_; }

 private:
  uint64_t granularity_;
  uint64_t slots_ = 0;
  mutable std::mutex budget_mutex_;
  uint64_t in_use_ = 0;
};

}  // namespace memwall::alloc
