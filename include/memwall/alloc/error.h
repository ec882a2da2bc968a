// The alloc module's one exception type. alloc depends on no other memwall
// module (DESIGN.md), so it has its own error type instead of memwall::Error;
// callers that print errors catch both. Messages are one line.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace memwall::alloc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest request any policy accepts: 2^62 bytes, memwall's kMaxBytes.
// Rounding a request this size up to any granularity below 2^62 cannot wrap,
// so a larger request is misuse (Error), while a request within it that the
// device cannot hold is an out-of-memory result.
inline constexpr uint64_t kMaxRequestBytes = uint64_t{1} << 62;

// "0x7f..." for messages.
std::string hex_address(uintptr_t address);

}  // namespace memwall::alloc
