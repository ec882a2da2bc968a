// An open-addressing map from a live block's address to its record, for the
// allocators' fast path (internal to src/alloc).
//
// Note [Live map]
// ~~~~~~~~~~~~~~~
// std::unordered_map costs a modulo by a prime and a pointer chase per
// lookup; allocate+free does an insert, a find and an erase. Here keys are
// addresses (never 0, multiples of 512), hashed by Fibonacci multiplication
// into a power-of-two table kept at most half full, probed linearly, and
// erased by backward shifting so no tombstones accumulate over millions of
// operations.
#pragma once

#include <cstdint>
#include <vector>

namespace memwall::alloc {

template <typename Value>
class LiveMap {
 public:
  LiveMap() { rehash(64); }

  Value* find(uintptr_t key) {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }
  const Value* find(uintptr_t key) const { return const_cast<LiveMap*>(this)->find(key); }

  // `key` must be absent.
  void insert(uintptr_t key, Value value) {
    if (2 * (size_ + 1) > slots_.size()) rehash(2 * slots_.size());
    size_t i = home(key);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = {key, value};
    ++size_;
  }

  // `key` must be present.
  void erase(uintptr_t key) {
    size_t hole = home(key);
    while (slots_[hole].key != key) hole = (hole + 1) & mask_;
    // Shift later members of the probe run back into the hole when their
    // home is not between the hole and their position.
    for (size_t i = (hole + 1) & mask_; slots_[i].key != 0; i = (i + 1) & mask_) {
      const size_t distance_from_home = (i - home(slots_[i].key)) & mask_;
      const size_t distance_from_hole = (i - hole) & mask_;
      if (distance_from_home >= distance_from_hole) {
        slots_[hole] = slots_[i];
        hole = i;
      }
    }
    slots_[hole] = {};
    --size_;
  }

  size_t size() const { return size_; }

  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (const Slot& slot : slots_) {
      if (slot.key != 0) visit(slot.key, slot.value);
    }
  }

 private:
  struct Slot {
    uintptr_t key = 0;
    Value value{};
  };

  size_t home(uintptr_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Slot& slot : old) {
      if (slot.key != 0) insert(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace memwall::alloc
