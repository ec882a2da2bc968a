// Values people type (parse_values.h): exact bytes for every unit, and one
// line naming the option for everything refused. The units are the IEC's
// binary prefixes (KiB = 2^10) and the SI's decimal ones (KB = 10^3).
#include "memwall/base/parse_values.h"

#include <gtest/gtest.h>

#include "memwall/base/error.h"

namespace memwall {
namespace {

TEST(ParseValues, SizesInEveryUnitAreExact) {
  const struct {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"42949672960", 42949672960ull},     {"40GiB", 42949672960ull}, {"1.5KiB", 1536},
      {"2MiB", 2097152},                   {"1TiB", 1ull << 40},      {"1.5KB", 1500},
      {"3GB", 3000000000ull},              {"7 B", 7},                {"1EiB", 1ull << 60},
      {"4611686018427387904", 1ull << 62},  // kMaxBytes itself, exact beyond 2^53
  };
  for (const auto& c : cases) EXPECT_EQ(parse_bytes(c.text, "--size", 0), c.bytes) << c.text;
}

TEST(ParseValues, APercentageIsOfTheReference) {
  EXPECT_EQ(parse_bytes("80%", "--capacity", 1000), 800u);
  EXPECT_EQ(parse_bytes("12.5%", "--capacity", 1ull << 30), 134217728u);
}

TEST(ParseValues, RefusalsNameTheOption) {
  const char* bad[] = {"", "0", "-1GiB", "abc", "1e3", "5XB", "0.1", "8EiB", "4611686018427387905"};
  for (const char* text : bad) {
    try {
      parse_bytes(text, "--budget", 0);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--budget", 0), 0u) << e.what();
    }
  }
}

TEST(ParseValues, CountsArePositiveAndNeverSaturate) {
  EXPECT_EQ(parse_count("4", "--batch"), 4);
  EXPECT_THROW(parse_count("0", "--batch"), Error);
  EXPECT_THROW(parse_count("4x", "--batch"), Error);
  try {
    parse_count("99999999999999999999", "--batch");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--batch 99999999999999999999 is too large");
  }
}

TEST(ParseValues, TimeLimitsAreWithinADay) {
  EXPECT_EQ(checked_time_limit(86400), 86400);
  EXPECT_THROW(checked_time_limit(0), Error);
  EXPECT_THROW(checked_time_limit(86401), Error);
}

}  // namespace
}  // namespace memwall
