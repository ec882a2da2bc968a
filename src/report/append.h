// Formatted appends to a std::string, the way every report writer builds text.
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

namespace memwall::report {

// Formats through fmt's own buffer: a back_inserter into std::string
// appends char by char, which dominates the cost of a large trace.
template <typename... Args>
void append(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::memory_buffer buffer;
  fmt::format_to(fmt::appender(buffer), format, std::forward<Args>(args)...);
  out.append(buffer.data(), buffer.size());
}

}  // namespace memwall::report
