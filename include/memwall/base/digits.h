// Internal: reading up to eight ASCII digits at once (SWAR, "SIMD within a
// register"), for the JSON cursor's integer fast path. Ids and sizes are most
// of a graph file's numbers; a byte-at-a-time loop spends ~9 instructions per
// digit, these ~20 per number. Little-endian only (callers check).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace memwall::detail {

inline uint64_t load8(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, 8);
  return word;
}

// Number of leading (lowest-address) bytes of `word` that are ASCII digits.
// Borrows and carries run only upwards from a non-digit byte, so the lowest
// flagged byte is exact even though bytes above it may be flagged spuriously.
inline unsigned leading_digits(uint64_t word) {
  const uint64_t values = word - 0x3030303030303030;  // '0'..'9' -> 0..9
  const uint64_t flags = (values | (values + 0x7676767676767676)) & 0x8080808080808080;
  return flags == 0 ? 8 : static_cast<unsigned>(std::countr_zero(flags)) / 8;
}

// Value of the first `n` (1..8) digits of `word`, all of which are digits.
inline uint64_t digits_value(uint64_t word, unsigned n) {
  uint64_t v = word - 0x3030303030303030;
  if (n < 8) {
    v &= (uint64_t{1} << (8 * n)) - 1;  // keep the n digits...
    v <<= 8 * (8 - n);                  // ...behind leading zeros
  }
  // Combine pairs, then quads, then the two halves (simdjson's method).
  v = (v * 10) + (v >> 8);
  v = (((v & 0x000000FF000000FF) * (100 + (uint64_t{1000000} << 32))) +
       (((v >> 16) & 0x000000FF000000FF) * (1 + (uint64_t{10000} << 32)))) >>
      32;
  return v;
}

}  // namespace memwall::detail
