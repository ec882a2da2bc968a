// The one exception type for bad input anywhere in memwall. The command line
// prints its message as a single line and exits with code 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace memwall {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // With lines the command line prints after the error's, each as
  // `memwall: note: ...`: detail that does not fit the one line (the
  // next closest configurations when no plan fits).
  Error(const std::string& what, std::vector<std::string> notes)
      : std::runtime_error(what), notes_(std::move(notes)) {}
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::vector<std::string> notes_;
};

// A planner's Error for a device budget it cannot reach, with the lowest
// device peak it reached or proved necessary, so that a search over
// several configurations can say which came closest (Note [What ran out]
// in src/planner/no_plan.cc).
class BudgetError : public Error {
 public:
  BudgetError(const std::string& what, uint64_t lowest) : Error(what), lowest_(lowest) {}
  uint64_t lowest() const { return lowest_; }

 private:
  uint64_t lowest_ = 0;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Largest size memwall accepts for one buffer or one sum of buffers: 2^62
// bytes leaves headroom so that adding two accepted sizes cannot overflow.
inline constexpr uint64_t kMaxBytes = uint64_t{1} << 62;

// Overflow-checked size arithmetic: throws Error naming `what` when the
// result leaves [0, kMaxBytes].
uint64_t checked_add(uint64_t a, uint64_t b, const char* what);
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what);

// Saturating size arithmetic for bounds and comparisons: the largest
// uint64 instead of wrapping (no budget is that large).
inline uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}
inline uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

}  // namespace memwall
