// Overflow-checked size arithmetic (see error.h).
#include "memwall/base/error.h"

namespace memwall {

// Both operands are checked too: a caller may pass an unchecked size, and
// "result <= kMaxBytes" alone would let a wrapped-around sum through.
uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  if (a > kMaxBytes || b > kMaxBytes || a + b > kMaxBytes) {
    fail("{} exceeds the limit of 2^62 bytes ({} + {})", what, a, b);
  }
  return a + b;
}

uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  if (a != 0 && b > kMaxBytes / a) {
    fail("{} exceeds the limit of 2^62 bytes ({} * {})", what, a, b);
  }
  return a * b;
}

}  // namespace memwall
