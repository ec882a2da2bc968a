// InlineVector: the small-list container of Op and Buffer (inline_vector.h).
#include "memwall/graph/inline_vector.h"

#include <gtest/gtest.h>

#include <numeric>
#include <utility>
#include <vector>

namespace memwall {
namespace {

using Ids = InlineVector<int32_t, 4>;

TEST(InlineVector, StaysInlineUpToN) {
  Ids ids = {1, 2, 3, 4};
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.capacity(), 4u);
  // The elements live inside the object.
  const auto* object = reinterpret_cast<const char*>(&ids);
  const auto* first = reinterpret_cast<const char*>(ids.data());
  EXPECT_TRUE(first >= object && first < object + sizeof ids);
  EXPECT_EQ(sizeof(Ids), sizeof(std::vector<int32_t>));
}

TEST(InlineVector, GrowsOntoTheHeapKeepingElements) {
  Ids ids;
  for (int32_t i = 0; i < 100; ++i) ids.push_back(i);
  ASSERT_EQ(ids.size(), 100u);
  EXPECT_GE(ids.capacity(), 100u);
  std::vector<int32_t> expected(100);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids.back(), 99);
}

TEST(InlineVector, PushBackOfOwnElementWhileGrowing) {
  Ids ids = {7, 8, 9, 10};
  ids.push_back(ids[0]);  // the reference dies when the storage moves
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 8, 9, 10, 7}));
}

TEST(InlineVector, CopyAndMoveInlineAndOnHeap) {
  for (const size_t n : {size_t{0}, size_t{3}, size_t{4}, size_t{5}, size_t{40}}) {
    Ids source;
    for (size_t i = 0; i < n; ++i) source.push_back(static_cast<int32_t>(i * 3));
    const std::vector<int32_t> expected = source.to_vector();

    Ids copy = source;
    EXPECT_EQ(copy, expected) << n;
    EXPECT_EQ(source, expected) << n;

    Ids moved = std::move(copy);
    EXPECT_EQ(moved, expected) << n;
    EXPECT_TRUE(copy.empty()) << n;  // NOLINT(bugprone-use-after-move): moved-from is empty
    copy.push_back(5);               // and usable
    EXPECT_EQ(copy, (std::vector<int32_t>{5})) << n;

    Ids assigned = {1, 2, 3, 4, 5, 6};
    assigned = moved;
    EXPECT_EQ(assigned, expected) << n;
    Ids move_assigned = {9};
    move_assigned = std::move(moved);
    EXPECT_EQ(move_assigned, expected) << n;
    const Ids& same = assigned;
    assigned = same;  // self-assignment keeps the elements
    EXPECT_EQ(assigned, expected) << n;
  }
}

TEST(InlineVector, AssignResizeClear) {
  Ids ids;
  const std::vector<int32_t> many = {1, 2, 3, 4, 5, 6, 7};
  ids.assign(many.begin(), many.end());
  EXPECT_EQ(ids, many);
  ids.resize(2);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  ids.resize(5);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 0, 0, 0}));
  ids.pop_back();
  EXPECT_EQ(ids.size(), 4u);
  ids.clear();
  EXPECT_TRUE(ids.empty());
  ids = many;
  EXPECT_EQ(ids, many);
}

TEST(InlineVector, AtChecksTheIndex) {
  Ids ids = {4, 5};
  EXPECT_EQ(ids.at(1), 5);
  EXPECT_THROW(ids.at(2), std::out_of_range);
  const Ids& view = ids;
  EXPECT_THROW(view.at(9), std::out_of_range);
}

TEST(InlineVector, EqualityComparesElements) {
  EXPECT_EQ(Ids({1, 2}), Ids({1, 2}));
  EXPECT_NE(Ids({1, 2}), Ids({1, 2, 3}));
  EXPECT_NE(Ids({1, 2}), Ids({2, 1}));
  EXPECT_EQ(Ids(), std::vector<int32_t>{});
}

TEST(InlineVector, ConvertsToASpan) {
  const Ids ids = {3, 1, 4, 1, 5, 9};
  const std::span<const int32_t> view = ids;
  ASSERT_EQ(view.size(), 6u);
  EXPECT_EQ(view[5], 9);
  EXPECT_EQ(view.data(), ids.data());
}

}  // namespace
}  // namespace memwall
