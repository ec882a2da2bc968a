// Errors inside the executor: bad input (exit 2) and a run that failed
// (exit 1), each one line (docs/exec.md).
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace memwall::exec {

struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct RunFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The device (or the host pool) could not hold what the step needed: a
// run reports it as any failure, a session (memwall.OutOfMemory) on its own.
struct OutOfMemory : RunFailed {
  using RunFailed::RunFailed;
};

template <typename... Args>
[[noreturn]] void bad_input(fmt::format_string<Args...> format, Args&&... args) {
  throw BadInput(fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
[[noreturn]] void run_failed(fmt::format_string<Args...> format, Args&&... args) {
  throw RunFailed(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void out_of_memory(fmt::format_string<Args...> format, Args&&... args) {
  throw OutOfMemory(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace memwall::exec
