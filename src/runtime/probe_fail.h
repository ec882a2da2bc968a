// The probes' one error (ProbeError, memwall/runtime/probes.h), formatted.
#pragma once
#include <utility>

#include <fmt/format.h>

#include "memwall/runtime/probes.h"

namespace memwall::runtime {

template <typename... Args>
[[noreturn]] void probe_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw ProbeError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace memwall::runtime
