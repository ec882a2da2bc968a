// The one exception type for bad input anywhere in memwall. The command line
// prints its message as a single line and exits with code 2.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace memwall {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Overflow-checked size arithmetic: throws Error naming `what` when the
// result leaves [0, kMaxBytes] (see types.h).
uint64_t checked_add(uint64_t a, uint64_t b, const char* what);
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what);

}  // namespace memwall
