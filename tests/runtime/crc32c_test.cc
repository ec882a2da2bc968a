// CRC32C golden values: RFC 3720 (iSCSI), Appendix B.4 "CRC Examples", and
// the "check" value of the CRC-32C catalogue entry (reveng.sourceforge.io
// CRC catalogue: CRC-32/ISCSI, check = 0xE3069283 for "123456789").
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "memwall/runtime/crc32c.h"

namespace memwall::runtime {
namespace {

struct Golden {
  std::vector<uint8_t> bytes;
  uint32_t crc;
};

std::vector<Golden> rfc3720() {
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  return {{zeros, 0x8A9136AAu}, {ones, 0x62A8AB43u}, {up, 0x46DD794Eu}, {down, 0x113FDB5Cu}};
}

TEST(Crc32c, Rfc3720Examples) {
  for (const Golden& g : rfc3720()) {
    EXPECT_EQ(crc32c(g.bytes.data(), g.bytes.size()), g.crc);
    EXPECT_EQ(crc32c_portable(g.bytes.data(), g.bytes.size()), g.crc);
  }
}

TEST(Crc32c, CatalogueCheckValue) {
  const std::string text = "123456789";
  EXPECT_EQ(crc32c(text.data(), text.size()), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

TEST(Crc32c, HardwareEqualsTableOnEveryLengthAndSplit) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(4099);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n = 0; n < data.size(); n += 1 + n / 7) {
    const uint32_t whole = crc32c_portable(data.data(), n);
    EXPECT_EQ(crc32c(data.data(), n), whole) << n;
    // Continuing from a prefix's CRC gives the whole's.
    const size_t half = n / 3;
    EXPECT_EQ(crc32c(data.data() + half, n - half, crc32c(data.data(), half)), whole) << n;
  }
  const std::string impl = crc32c_implementation();
  EXPECT_TRUE(impl == "sse4.2" || impl == "table") << impl;
}

}  // namespace
}  // namespace memwall::runtime
