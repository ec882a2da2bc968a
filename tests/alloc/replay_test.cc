// The replay helper behind `memwall alloc-replay`.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "alloc_test_util.h"
#include "memwall/alloc/replay.h"

namespace memwall::alloc {
namespace {

using Kind = ReplayEvent::Kind;

std::vector<ReplayEvent> interleaved() {
  // Five 4 MiB / 2 MiB buffers; the 4 MiB ones die and a 10 MiB one follows.
  return {{Kind::alloc, 0, 4 * kMiB},
          {Kind::alloc, 1, 2 * kMiB},
          {Kind::alloc, 2, 4 * kMiB},
          {Kind::alloc, 3, 2 * kMiB},
          {Kind::alloc, 4, 4 * kMiB},
          {Kind::free, 0},
          {Kind::free, 2},
          {Kind::free, 4},
          {Kind::alloc, 5, 10 * kMiB}};
}

TEST(Replay, StitchingFitsWhereCachingDoesNot) {
  const auto events = interleaved();
  const ReplayResult stitching = replay("stitching", 16 * kMiB, events);
  EXPECT_TRUE(stitching.fits);
  EXPECT_EQ(stitching.stats.peak_reserved_bytes, 16 * kMiB);
  EXPECT_EQ(stitching.stats.peak_allocated_bytes, 16 * kMiB);
  EXPECT_EQ(stitching.stats.stitches, 1u);
  const ReplayResult caching = replay("caching", 16 * kMiB, events);
  EXPECT_FALSE(caching.fits);
  EXPECT_EQ(caching.failed_event, 0u);  // a 4 MiB request needs a 20 MiB segment
  const ReplayResult roomy = replay("caching", 1024 * kMiB, events);
  EXPECT_TRUE(roomy.fits);
  EXPECT_EQ(roomy.stats.peak_reserved_bytes, 30 * kMiB);  // a 20 MiB and a 10 MiB segment
}

// Two training steps of a ResNet-like CNN, as a framework's default
// schedule issues them (the alloc module cannot use the model zoo, so the
// sequence is built here): persistent weights of every size class, then per
// layer a conv output, a batch-norm output with small saved statistics and a
// workspace freed at once; backward in reverse frees each activation as its
// gradient is made and accumulates weight gradients; the optimizer step
// makes one temporary per weight and frees the gradients. Sizes are odd
// (batch 24, momentum buffers, 3x3 kernels), so blocks do not tile chunks.
std::vector<ReplayEvent> cnn_training_steps() {
  struct Layer {
    uint64_t channels, inputs, side;
  };
  std::vector<Layer> layers;
  uint64_t inputs = 3;
  const std::pair<uint64_t, uint64_t> stages[] = {{64, 56}, {128, 28}, {256, 14}, {512, 7}};
  for (const auto& [channels, side] : stages) {
    for (int i = 0; i < 9; ++i) {
      layers.push_back({channels, inputs, side});
      inputs = channels;
    }
  }
  constexpr uint64_t kBatch = 24;
  std::vector<ReplayEvent> events;
  uint64_t next_id = 0;
  auto alloc = [&](uint64_t bytes) {
    events.push_back({Kind::alloc, next_id, bytes});
    return next_id++;
  };
  auto free = [&](uint64_t id) { events.push_back({Kind::free, id}); };
  auto weight_bytes = [](const Layer& l) { return l.channels * l.inputs * 9 * 4; };
  auto act_bytes = [&](const Layer& l) { return kBatch * l.channels * l.side * l.side * 4; };
  std::vector<uint64_t> weights;
  for (const Layer& l : layers) {
    weights.push_back(alloc(weight_bytes(l)));
    weights.push_back(alloc(weight_bytes(l)));     // momentum
    weights.push_back(alloc(l.channels * 4 * 4));  // batch-norm affine and running stats
  }
  for (int step = 0; step < 2; ++step) {
    const uint64_t input = alloc(kBatch * 3 * 224 * 224 * 4);
    std::vector<uint64_t> saved;  // conv output, bn output, saved statistics per layer
    for (const Layer& l : layers) {
      const uint64_t workspace = alloc(act_bytes(l) / 3 + 4096 * l.inputs);
      saved.push_back(alloc(act_bytes(l)));
      free(workspace);
      saved.push_back(alloc(act_bytes(l)));
      saved.push_back(alloc(l.channels * 4 * 2));
    }
    const uint64_t logits = alloc(kBatch * 1000 * 4);
    uint64_t grad = alloc(kBatch * 1000 * 4);
    free(logits);
    std::vector<uint64_t> weight_grads;
    for (size_t i = layers.size(); i-- > 0;) {
      const Layer& l = layers[i];
      const uint64_t bn_grad = alloc(act_bytes(l));
      free(saved[3 * i + 2]);
      free(saved[3 * i + 1]);
      free(grad);
      const uint64_t workspace = alloc(act_bytes(l) / 2 + 8192 * l.channels);
      weight_grads.push_back(alloc(weight_bytes(l)));
      weight_grads.push_back(alloc(l.channels * 4 * 2));
      const uint64_t input_grad =
          alloc(i > 0 ? act_bytes(layers[i - 1]) : kBatch * 3 * 224 * 224 * 4);
      free(workspace);
      free(saved[3 * i]);
      free(bn_grad);
      grad = input_grad;
    }
    free(grad);
    free(input);
    for (uint64_t id : weight_grads) {
      free(alloc(4096 + id % 7 * 512));  // the optimizer's scalar temporaries
      free(id);
    }
  }
  return events;
}

// The target on a CNN's pattern: stitching within 2% of the peak
// allocated bytes, and no worse than PyTorch's caching allocator.
TEST(Replay, StitchingKeepsACnnWithinTwoPercentOfPeakAllocated) {
  const auto events = cnn_training_steps();
  constexpr uint64_t kCapacity = uint64_t{16} << 30;
  const ReplayResult stitching = replay("stitching", kCapacity, events);
  const ReplayResult caching = replay("caching", kCapacity, events);
  const ReplayResult expandable = replay("expandable", kCapacity, events);
  ASSERT_TRUE(stitching.fits);
  ASSERT_TRUE(caching.fits);
  const auto ratio = [](const ReplayResult& r) {
    return static_cast<double>(r.stats.peak_reserved_bytes) /
           static_cast<double>(r.stats.peak_allocated_bytes);
  };
  RecordProperty("caching", std::to_string(ratio(caching)));
  RecordProperty("expandable", std::to_string(ratio(expandable)));
  RecordProperty("stitching", std::to_string(ratio(stitching)));
  std::printf("peak reserved / peak allocated: caching %.4f, expandable %.4f, stitching %.4f\n",
              ratio(caching), ratio(expandable), ratio(stitching));
  EXPECT_LE(ratio(stitching), 1.02);
  EXPECT_LE(stitching.stats.peak_reserved_bytes, caching.stats.peak_reserved_bytes);
  EXPECT_GT(stitching.stats.stitches, 0u);  // chunks did move
}

TEST(Replay, PlanPolicyUsesEventIdsAsTags) {
  Options options;
  options.arena_bytes = 16 * kMiB;
  options.offsets = {{0, 0}, {1, 4 * kMiB}, {2, 0}, {3, 6 * kMiB}, {4, 8 * kMiB}, {5, 0}};
  auto events = interleaved();
  events[2] = {Kind::alloc, 2, 4 * kMiB};  // overlaps live id 0 at offset 0
  EXPECT_EQ(testing::error_of([&] { replay("plan", 64 * kMiB, events, options); }),
            "plan: request 2 at [0, 4194304) overlaps live request 0 at [0, 4194304)");
  options.offsets[2] = 12 * kMiB;
  options.offsets[4] = 16 * kMiB;  // past the arena
  EXPECT_NE(testing::error_of([&] {
              replay("plan", 64 * kMiB, events, options);
            }).find("ends past the arena"),
            std::string::npos);
}

TEST(Replay, RejectsMalformedSequences) {
  const std::vector<ReplayEvent> twice = {{Kind::alloc, 7, 100}, {Kind::alloc, 7, 100}};
  EXPECT_EQ(testing::error_of([&] { replay("caching", 64 * kMiB, twice); }),
            "replay: event 1: id 7 allocated again while live");
  const std::vector<ReplayEvent> unknown = {{Kind::free, 3}};
  EXPECT_EQ(testing::error_of([&] { replay("caching", 64 * kMiB, unknown); }),
            "replay: event 0: free of id 3 not live");
}

}  // namespace
}  // namespace memwall::alloc
