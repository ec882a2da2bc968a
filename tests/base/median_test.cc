// The median of measurements (median.h).
#include "memwall/base/median.h"

#include <gtest/gtest.h>

namespace memwall {
namespace {

TEST(Median, OddCountIsTheMiddleValue) { EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0); }

TEST(Median, EvenCountIsTheMeanOfTheMiddleTwo) { EXPECT_EQ(median({4.0, 1.0, 2.0, 3.0}), 2.5); }

TEST(Median, EmptyIsZero) { EXPECT_EQ(median({}), 0.0); }

}  // namespace
}  // namespace memwall
