// Note [Pipeline simulation]: schedules on hand-built chunks whose times are
// exact in binary, so bubbles, step times and peaks compare exactly with
// the published closed forms for equal stages and free transfers:
//   - GPipe and 1F1B: the passes end at (m + p - 1)(f + b), a bubble of
//     (p - 1)/m of the ideal time (Narayanan et al. 2021, SC21, Section
//     2.2.1; Huang et al. 2019, Section 2.3);
//   - interleaved 1F1B with v chunks per device: (p - 1)/(v m) of it
//     (Narayanan et al. 2021, Section 2.2.2);
//   - 1F1B holds at most p - d micro-batches on device d, GPipe all m
//     (Narayanan et al. 2021, Section 2.2.1).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "memwall/base/error.h"
#include "memwall/sim/pipeline.h"

namespace memwall {
namespace {

ChunkCost equal_chunk(double forward, double backward) {
  return {.forward = forward,
          .backward = backward,
          .optimizer = 0.25,
          .states = 1000,
          .saved = 100,
          .forward_peak = 130,
          .backward_peak = 150};
}

PipelineSetup equal_setup(PipelineSchedule schedule, int devices, int per_device, int m,
                          double f = 1, double b = 2) {
  PipelineSetup s;
  s.chunks.assign(static_cast<size_t>(devices * per_device), equal_chunk(f, b));
  s.devices = devices;
  s.micro_batches = m;
  s.schedule = schedule;
  s.devices_per_node = devices;
  s.in_node = {.bandwidth = 1e9, .latency = 0};
  s.across_nodes = s.in_node;
  return s;
}

// Every pass ran once, none before its inputs, none overlapping another on its device.
void expect_consistent(const PipelineSetup& setup, const PipelineResult& r) {
  const size_t chunks = setup.chunks.size();
  ASSERT_EQ(r.tasks.size(), 2 * chunks * setup.micro_batches);
  std::set<std::tuple<int, int, bool>> seen;
  std::map<std::tuple<int, int, bool>, double> end;
  for (const PipelineTask& t : r.tasks) {
    EXPECT_TRUE(seen.insert({t.chunk, t.micro_batch, t.backward}).second);
    EXPECT_EQ(t.device, setup.chunk_devices.empty()
                            ? chunk_device(setup.schedule, t.chunk, setup.devices)
                            : setup.chunk_devices[t.chunk]);
    end[{t.chunk, t.micro_batch, t.backward}] = t.end;
  }
  for (const PipelineTask& t : r.tasks) {
    if (!t.backward && t.chunk > 0) {
      EXPECT_GE(t.start, end.at({t.chunk - 1, t.micro_batch, false}));
    }
    if (t.backward) {
      EXPECT_GE(t.start, end.at({t.chunk, t.micro_batch, false}));
    }
    if (t.backward && t.chunk + 1 < static_cast<int>(chunks)) {
      EXPECT_GE(t.start, end.at({t.chunk + 1, t.micro_batch, true}));
    }
  }
  for (int d = 0; d < setup.devices; ++d) {
    std::vector<std::pair<double, double>> spans;
    for (const PipelineTask& t : r.tasks) {
      if (t.device == d) spans.emplace_back(t.start, t.end);
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  }
}

TEST(PipelineSim, OneFOneBBubbleIsPMinusOneOverM) {
  const int p = 4;
  const int m = 8;
  const PipelineSetup setup = equal_setup(PipelineSchedule::kOneFOneB, p, 1, m);
  const PipelineResult r = simulate_pipeline(setup);
  expect_consistent(setup, r);
  EXPECT_EQ(r.passes_end, (m + p - 1) * 3.0);
  EXPECT_EQ(r.step_time, r.passes_end + 0.25);
  EXPECT_EQ(r.bubble_fraction, (p - 1.0) / (m + p - 1.0));
  for (int d = 0; d < p; ++d) {
    SCOPED_TRACE(d);
    EXPECT_EQ(r.devices[d].idle / r.devices[d].busy, (p - 1.0) / m);
    EXPECT_EQ(r.devices[d].max_in_flight, p - d);
    // The most saved at once: p - d - 1 others beside a running backward
    // (150 above the rest, its own 100 among them) or the p - d th forward.
    EXPECT_EQ(r.devices[d].peak_bytes, 1000 + (p - d - 1) * 100 + 150);
  }
}

TEST(PipelineSim, GPipeHasTheSameBubbleAndHoldsEveryMicroBatch) {
  const PipelineSetup setup = equal_setup(PipelineSchedule::kGPipe, 4, 1, 8);
  const PipelineResult r = simulate_pipeline(setup);
  expect_consistent(setup, r);
  EXPECT_EQ(r.passes_end, 11 * 3.0);
  for (const PipelineDevice& d : r.devices) {
    EXPECT_EQ(d.max_in_flight, 8);
    EXPECT_EQ(d.peak_bytes, 1000 + 7 * 100 + 150);
  }
}

TEST(PipelineSim, InterleavedBubbleIsPMinusOneOverVM) {
  const int p = 4;
  const int v = 2;
  const int m = 8;
  // The same model in twice the chunks: each half as long.
  const PipelineSetup setup = equal_setup(PipelineSchedule::kInterleaved, p, v, m, 0.5, 1);
  const PipelineResult r = simulate_pipeline(setup);
  expect_consistent(setup, r);
  const double ideal = m * 3.0;
  EXPECT_EQ(r.passes_end, ideal * (1 + (p - 1.0) / (v * m)));
  for (const PipelineDevice& d : r.devices) EXPECT_EQ(d.idle / d.busy, (p - 1.0) / (v * m));
  // Megatron-LM's warm-up: (p - d - 1) x 2 + (v - 1) x p forwards, one more in the steady state.
  for (int d = 0; d < p; ++d) EXPECT_EQ(r.devices[d].max_in_flight, (p - d - 1) * 2 + p + 1);
}

TEST(PipelineSim, InterleavedOrderIsMegatronsRoundRobin) {
  const PipelineSetup setup = equal_setup(PipelineSchedule::kInterleaved, 2, 2, 4);
  // Device 0: warm-up (2 - 0 - 1) x 2 + (2 - 1) x 2 = 4 forwards: chunk 0
  // on micro-batches 0 and 1, chunk 2 on 0 and 1; then F(chunk 0, mb 2),
  // B(chunk 2, mb 0), ...
  const std::vector<PipelineTask> order = device_order(setup, 0);
  ASSERT_EQ(order.size(), 16u);
  const std::vector<std::tuple<int, int, bool>> head = {
      {0, 0, false}, {0, 1, false}, {2, 0, false}, {2, 1, false},
      {0, 2, false}, {2, 0, true},  {0, 3, false}, {2, 1, true}};
  for (size_t i = 0; i < head.size(); ++i) {
    EXPECT_EQ(std::make_tuple(order[i].chunk, order[i].micro_batch, order[i].backward), head[i])
        << i;
  }
}

TEST(PipelineSim, TransfersDelayTheReceiverAndCrossNodesOnTheirOwnLink) {
  PipelineSetup setup = equal_setup(PipelineSchedule::kOneFOneB, 2, 1, 1, 1, 1);
  setup.chunks[0].send_forward = 1 << 20;
  setup.chunks[1].send_backward = 1 << 19;
  setup.in_node = {.bandwidth = 1 << 30, .latency = 0.5};
  setup.across_nodes = {.bandwidth = 1 << 20, .latency = 0.25};
  // One node: 1 + (0.5 + 2^-10) + 1 + 1 + (0.5 + 2^-11) + 1.
  EXPECT_EQ(simulate_pipeline(setup).passes_end, 5 + 0x1p-10 + 0x1p-11);
  setup.devices_per_node = 1;
  // Two nodes: 1 + (0.25 + 1) + 2 + (0.25 + 0.5) + 1.
  EXPECT_EQ(simulate_pipeline(setup).passes_end, 6);
}

TEST(PipelineSim, HanayoWavesRunEveryPassWithinTheirPlacement) {
  const int p = 4;
  const PipelineSetup setup = equal_setup(PipelineSchedule::kHanayo, p, 2, 8, 0.5, 1);
  // The second wave comes back up: chunks 4..7 on devices 3..0.
  for (int c = 0; c < 8; ++c) EXPECT_EQ(chunk_device(setup.schedule, c, p), c < 4 ? c : 7 - c);
  const PipelineResult r = simulate_pipeline(setup);
  expect_consistent(setup, r);
  // Within the in-flight caps of the list schedule: interleaved 1F1B's
  // warm-up, counted from device 0, where the second wave ends.
  for (int d = 0; d < p; ++d) EXPECT_LE(r.devices[d].max_in_flight, d * 2 + p + 1);
  for (const PipelineDevice& d : r.devices) EXPECT_EQ(d.busy, 8 * 2 * 1.5);
}

// Chunks 0 and 2 on device 0, chunk 1 on device 1 (a non-contiguous
// placement), f = 1, b = 2, two micro-batches, free transfers; at most
// min(m, devices) = 2 micro-batches in flight a chunk. The list schedule,
// pass by pass (ties to the lower device, backward first):
//   d0 F0.0 [0,1]  F0.1 [1,2]  F2.0 [2,3]  B2.0 [3,5]  F2.1 [5,6]  B2.1 [6,8]
//      B0.0 [8,10] B0.1 [10,12]
//   d1 F1.0 [1,2]  F1.1 [2,3]  B1.0 [5,7]  B1.1 [8,10]
// Device 0 never idles (12 s busy), device 1 idles 6 of 12 s: bubble 6 / 24.
// Device 0's peak: B2.0 with c0's two micro-batches beside it, 2 x 1000
// states + 2 x 100 saved + 150 = 2350, three micro-batch chunks in flight.
TEST(PipelineSim, AnExplicitPlacementRunsOnTheListSchedule) {
  PipelineSetup setup = equal_setup(PipelineSchedule::kOneFOneB, 2, 1, 2);
  setup.chunks.push_back(equal_chunk(1, 2));
  setup.chunk_devices = {0, 1, 0};
  EXPECT_EQ(placement_in_flight(setup.schedule, 2, 2), 2);
  EXPECT_TRUE(device_order(setup, 0).empty());
  const PipelineResult r = simulate_pipeline(setup);
  expect_consistent(setup, r);
  EXPECT_EQ(r.passes_end, 12);
  EXPECT_EQ(r.step_time, 12 + 2 * 0.25);
  EXPECT_EQ(r.bubble_fraction, 0.25);
  EXPECT_EQ(r.devices[0].busy, 12);
  EXPECT_EQ(r.devices[1].busy, 6);
  EXPECT_EQ(r.devices[0].states, 2000u);
  EXPECT_EQ(r.devices[0].peak_bytes, 2350u);
  EXPECT_EQ(r.devices[0].peak_in_flight, 3);
  EXPECT_EQ(r.devices[0].max_in_flight, 3);
  EXPECT_EQ(r.devices[1].peak_bytes, 1000u + 100 + 150);
}

// Any placement runs to its end (no deadlock) within the per-chunk cap.
TEST(PipelineSim, EveryPlacementOfFiveChunksRunsWithinItsCap) {
  for (const PipelineSchedule schedule : {PipelineSchedule::kOneFOneB, PipelineSchedule::kGPipe}) {
    for (int code = 0; code < 243; ++code) {  // 3^5 maps of 5 chunks onto 3 devices
      PipelineSetup setup = equal_setup(schedule, 3, 1, 5, 1, 2);
      setup.chunks.resize(5, equal_chunk(0.5, 1.5));
      setup.chunks[1].send_forward = 1 << 20;
      std::vector<int> held(3, 0);
      for (int c = 0, rest = code; c < 5; ++c, rest /= 3) {
        setup.chunk_devices.push_back(rest % 3);
        ++held[rest % 3];
      }
      if (std::count(held.begin(), held.end(), 0) > 0) {
        EXPECT_THROW(simulate_pipeline(setup), Error);
        continue;
      }
      SCOPED_TRACE(code);
      const PipelineResult r = simulate_pipeline(setup);
      expect_consistent(setup, r);
      const int cap = placement_in_flight(schedule, 3, 5);
      for (int d = 0; d < 3; ++d) EXPECT_LE(r.devices[d].max_in_flight, held[d] * cap);
    }
  }
}

TEST(PipelineSim, BadPlacementsAreOneClearError) {
  const auto error_of = [](std::vector<int> devices) {
    PipelineSetup setup = equal_setup(PipelineSchedule::kOneFOneB, 2, 1, 2);
    setup.chunks.push_back(equal_chunk(1, 2));
    setup.chunk_devices = std::move(devices);
    try {
      simulate_pipeline(setup);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of({0, 1}), "pipeline: 2 chunk devices for 3 chunks: give one device a chunk");
  EXPECT_EQ(error_of({0, 2, 1}),
            "pipeline: chunk 1 is placed on device 2: the devices are 0 to 1");
  EXPECT_EQ(error_of({1, 1, 1}), "pipeline: device 0 has no chunk in the placement");
}

TEST(PipelineSim, SetupsNoScheduleRunsAreRefused) {
  EXPECT_THROW(simulate_pipeline(equal_setup(PipelineSchedule::kGPipe, 2, 2, 4)), Error);
  EXPECT_THROW(simulate_pipeline(equal_setup(PipelineSchedule::kOneFOneB, 2, 2, 4)), Error);
  EXPECT_THROW(simulate_pipeline(equal_setup(PipelineSchedule::kInterleaved, 4, 2, 6)), Error);
  EXPECT_THROW(simulate_pipeline(equal_setup(PipelineSchedule::kOneFOneB, 0, 1, 4)), Error);
  PipelineSetup odd = equal_setup(PipelineSchedule::kOneFOneB, 2, 1, 4);
  odd.chunks.pop_back();
  EXPECT_THROW(simulate_pipeline(odd), Error);
  PipelineSetup negative = equal_setup(PipelineSchedule::kOneFOneB, 2, 1, 4);
  negative.chunks[1].backward = -1;
  EXPECT_THROW(simulate_pipeline(negative), Error);
  // Sizes past kMaxBytes on a device are an error, not a wrapped sum.
  PipelineSetup huge = equal_setup(PipelineSchedule::kInterleaved, 2, 2, 2);
  for (ChunkCost& c : huge.chunks) c.states = kMaxBytes;
  EXPECT_THROW(simulate_pipeline(huge), Error);
  EXPECT_FALSE(parse_pipeline_schedule("zero-bubble"));
  EXPECT_EQ(parse_pipeline_schedule("1f1b"), PipelineSchedule::kOneFOneB);
}

}  // namespace
}  // namespace memwall
