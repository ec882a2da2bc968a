// Enum names, dtype sizes and checked arithmetic.
#include <gtest/gtest.h>

#include "memwall/graph/graph.h"

namespace memwall {
namespace {

TEST(Types, BufferKindNamesRoundTrip) {
  const std::vector<std::string_view> names = {"param", "grad",      "optim_state", "activation",
                                               "input", "workspace", "temp"};
  ASSERT_EQ(names.size(), static_cast<size_t>(kNumBufferKinds));
  for (size_t i = 0; i < names.size(); ++i) {
    const auto kind = static_cast<BufferKind>(i);
    EXPECT_EQ(to_string(kind), names[i]);
    EXPECT_EQ(parse_buffer_kind(names[i]), kind);
  }
  EXPECT_EQ(parse_buffer_kind("weights"), std::nullopt);
  EXPECT_EQ(parse_buffer_kind("Param"), std::nullopt);
  EXPECT_EQ(parse_buffer_kind(""), std::nullopt);
}

TEST(Types, PhaseNamesRoundTrip) {
  EXPECT_EQ(to_string(Phase::kForward), "forward");
  EXPECT_EQ(to_string(Phase::kBackward), "backward");
  EXPECT_EQ(to_string(Phase::kOptimizer), "optimizer");
  EXPECT_EQ(to_string(Phase::kComm), "comm");
  for (const Phase p : {Phase::kForward, Phase::kBackward, Phase::kOptimizer, Phase::kComm}) {
    EXPECT_EQ(parse_phase(to_string(p)), p);
  }
  EXPECT_EQ(parse_phase("fwd"), std::nullopt);
}

TEST(Types, DTypeNamesAndSizes) {
  const std::vector<std::pair<std::string_view, uint64_t>> expected = {
      {"fp32", 4},  {"fp16", 2}, {"bf16", 2},  {"fp64", 8}, {"int64", 8},
      {"int32", 4}, {"int8", 1}, {"uint8", 1}, {"bool", 1}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_EQ(to_string(dtype), expected[i].first);
    EXPECT_EQ(parse_dtype(expected[i].first), dtype);
    EXPECT_EQ(dtype_size(dtype), expected[i].second);
  }
  EXPECT_EQ(parse_dtype("float32"), std::nullopt);
}

TEST(Types, InvalidEnumValuesDoNotCrash) {
  EXPECT_EQ(to_string(static_cast<BufferKind>(200)), "invalid");
  EXPECT_EQ(dtype_size(static_cast<DType>(200)), 0u);
}

TEST(CheckedArithmetic, AddAndMultiply) {
  EXPECT_EQ(checked_add(2, 3, "x"), 5u);
  EXPECT_EQ(checked_add(kMaxBytes - 1, 1, "x"), kMaxBytes);
  EXPECT_EQ(checked_mul(1 << 20, 1 << 20, "x"), uint64_t{1} << 40);
  EXPECT_EQ(checked_mul(0, ~uint64_t{0}, "x"), 0u);
  EXPECT_EQ(checked_mul(2, uint64_t{1} << 61, "x"), kMaxBytes);
}

TEST(CheckedArithmetic, OverflowNamesWhat) {
  try {
    checked_add(kMaxBytes, 1, "activation total");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("activation total exceeds the limit of 2^62 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(checked_add(~uint64_t{0}, ~uint64_t{0}, "x"), Error);  // would wrap
  EXPECT_THROW(checked_add(0, kMaxBytes + 1, "x"), Error);
  EXPECT_THROW(checked_mul(uint64_t{1} << 32, uint64_t{1} << 32, "x"), Error);
  EXPECT_THROW(checked_mul(3, uint64_t{1} << 61, "x"), Error);
}

}  // namespace
}  // namespace memwall
