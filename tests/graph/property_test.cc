// Seeded random graphs: liveness and the memory profile agree with a direct
// O(ops * buffers) recomputation from the rules in DESIGN.md; JSON round
// trips; mutated JSON is either accepted or rejected with memwall::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>

#include "graph_builder.h"

namespace memwall {
namespace {

using Rng = std::mt19937_64;

uint64_t pick(Rng& rng, uint64_t n) {
  return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng);
}

Graph random_graph(Rng& rng, int n_ops) {
  testing::GraphBuilder g;
  std::vector<BufferId> existing;
  const BufferKind initial[] = {BufferKind::kParam, BufferKind::kOptimState, BufferKind::kInput};
  const BufferKind produced[] = {BufferKind::kActivation, BufferKind::kGrad, BufferKind::kTemp,
                                 BufferKind::kWorkspace};
  const auto bytes = [&] { return pick(rng, 4) == 0 ? 0 : pick(rng, 1000); };
  const uint64_t n_initial = pick(rng, 6);
  for (uint64_t i = 0; i < n_initial; ++i) {
    existing.push_back(g.buffer(fmt::format("init{}", i), bytes(), initial[pick(rng, 3)]));
  }
  for (int i = 0; i < n_ops; ++i) {
    const auto phase = static_cast<Phase>(pick(rng, 4));
    std::vector<BufferId> in, out, updates;
    if (!existing.empty()) {
      for (uint64_t k = pick(rng, 4); k > 0; --k)
        in.push_back(existing[pick(rng, existing.size())]);
      for (uint64_t k = pick(rng, 3) / 2; k > 0; --k) {
        updates.push_back(existing[pick(rng, existing.size())]);
      }
    }
    for (uint64_t k = pick(rng, 3); k > 0; --k) {
      out.push_back(
          g.buffer(fmt::format("b{}", g.graph.buffers.size()), bytes(), produced[pick(rng, 4)]));
    }
    const uint64_t workspace = pick(rng, 3) == 0 ? pick(rng, 500) : 0;
    g.op(fmt::format("op{}", i), phase, in, out, updates, workspace);
    existing.insert(existing.end(), out.begin(), out.end());
  }
  return g.graph;
}

bool contains(std::span<const BufferId> list, size_t b) {
  return std::find(list.begin(), list.end(), static_cast<BufferId>(b)) != list.end();
}

// The rules, applied buffer by buffer by scanning every op.
std::vector<BufferLife> brute_liveness(const Graph& graph) {
  const auto n = static_cast<OpId>(graph.ops.size());
  std::vector<BufferLife> lives(graph.buffers.size());
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    BufferLife& life = lives[b];
    bool optimizer_uses = false;
    for (OpId i = 0; i < n; ++i) {
      const Op& op = graph.ops[i];
      if (contains(op.out, b)) life.producer = i;
      if (contains(op.in, b) || contains(op.updates, b)) {
        if (life.first_use == kNoOp) life.first_use = i;
        life.last_use = i;
        optimizer_uses = optimizer_uses || op.phase == Phase::kOptimizer;
      }
    }
    const BufferKind kind = graph.buffers[b].kind;
    if (exists_before_first_op(kind)) {
      life.alloc_op = kNoOp;
      if (is_persistent(kind) || n == 0) {
        life.free_op = kNoOp;
      } else {
        life.free_op = life.last_use == kNoOp ? 0 : life.last_use;
      }
    } else {
      life.alloc_op = life.producer;
      if (kind == BufferKind::kGrad && optimizer_uses) {
        life.free_op = kNoOp;
      } else {
        life.free_op = life.last_use == kNoOp ? life.producer : life.last_use;
      }
    }
  }
  return lives;
}

bool live_during(const BufferLife& life, OpId i) {
  return (life.alloc_op == kNoOp || life.alloc_op <= i) &&
         (life.free_op == kNoOp || life.free_op >= i);
}

void expect_same_lives(const std::vector<BufferLife>& a, const std::vector<BufferLife>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(fmt::format("buffer {}", i));
    EXPECT_EQ(a[i].producer, b[i].producer);
    EXPECT_EQ(a[i].first_use, b[i].first_use);
    EXPECT_EQ(a[i].last_use, b[i].last_use);
    EXPECT_EQ(a[i].alloc_op, b[i].alloc_op);
    EXPECT_EQ(a[i].free_op, b[i].free_op);
  }
}

void check_against_brute_force(const Graph& graph) {
  const std::vector<BufferLife> lives = liveness(graph);
  const std::vector<BufferLife> expected = brute_liveness(graph);
  expect_same_lives(lives, expected);

  const MemoryProfile profile = memory_profile(graph);
  const auto n = static_cast<OpId>(graph.ops.size());
  ASSERT_EQ(profile.curve.size(), graph.ops.size());
  uint64_t initial = 0;
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    if (expected[b].alloc_op == kNoOp) initial += graph.buffers[b].bytes;
  }
  EXPECT_EQ(profile.initial_bytes, initial);
  uint64_t peak = initial;
  OpId peak_op = kNoOp;
  for (OpId i = 0; i < n; ++i) {
    uint64_t during = graph.ops[i].workspace;
    for (size_t b = 0; b < graph.buffers.size(); ++b) {
      if (live_during(expected[b], i)) during += graph.buffers[b].bytes;
    }
    EXPECT_EQ(profile.curve[i], during) << "op " << i;
    if (peak_op == kNoOp || during > peak) {
      peak = during;
      peak_op = i;
    }
  }
  EXPECT_EQ(profile.peak_bytes, peak);
  EXPECT_EQ(profile.peak_op, peak_op);
  std::array<uint64_t, kNumBufferKinds> by_kind{};
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    const bool live =
        peak_op == kNoOp ? expected[b].alloc_op == kNoOp : live_during(expected[b], peak_op);
    if (live) by_kind[static_cast<size_t>(graph.buffers[b].kind)] += graph.buffers[b].bytes;
  }
  if (peak_op != kNoOp) {
    by_kind[static_cast<size_t>(BufferKind::kWorkspace)] += graph.ops[peak_op].workspace;
  }
  EXPECT_EQ(profile.peak_by_kind, by_kind);

  // Saved activations: produced in forward, used by some backward op or by
  // a comm op after the first backward op.
  uint64_t saved = 0;
  uint64_t saved_b1 = 0;
  OpId first_backward = kNoOp;
  for (const Op& op : graph.ops) {
    if (op.phase == Phase::kBackward && first_backward == kNoOp) first_backward = op.id;
  }
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    if (graph.buffers[b].kind != BufferKind::kActivation) continue;
    const OpId p = expected[b].producer;
    if (p == kNoOp || graph.ops[p].phase != Phase::kForward) continue;
    bool used_in_backward = false;
    for (const Op& op : graph.ops) {
      const bool backward =
          op.phase == Phase::kBackward ||
          (op.phase == Phase::kComm && first_backward != kNoOp && op.id > first_backward);
      if (backward && (contains(op.in, b) || contains(op.updates, b))) used_in_backward = true;
    }
    if (!used_in_backward) continue;
    saved += graph.buffers[b].bytes;
    if (graph.buffers[b].name.starts_with("b1")) saved_b1 += graph.buffers[b].bytes;
  }
  const MemorySummary summary = memory_summary(graph);
  EXPECT_EQ(summary.saved_activation_bytes, saved);
  EXPECT_EQ(saved_activation_bytes(graph, "b1"), saved_b1);
}

TEST(Property, LivenessAndProfileMatchBruteForce) {
  Rng rng(20240601);
  for (int trial = 0; trial < 300; ++trial) {
    const int n_ops = trial < 10 ? trial : static_cast<int>(pick(rng, 80));
    const Graph graph = random_graph(rng, n_ops);
    SCOPED_TRACE(fmt::format("trial {}", trial));
    ASSERT_NO_THROW(validate(graph));
    check_against_brute_force(graph);
    if (HasFailure()) return;
  }
}

TEST(Property, RandomGraphsRoundTripThroughJson) {
  Rng rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const Graph graph = random_graph(rng, static_cast<int>(pick(rng, 60)));
    const std::string text = graph_to_json_text(graph);
    const Graph back = graph_from_json_text(text);
    ASSERT_EQ(graph_to_json_text(back), text);
  }
}

// A poor man's fuzzer that runs with every test: damage valid JSON a few
// bytes at a time; the reader must accept or throw memwall::Error, nothing else.
TEST(Property, MutatedJsonFailsCleanly) {
  Rng rng(99);
  const std::string alphabet = "0123456789-+.eE\"\\{}[],: \nnulltruefalse\xff\x80";
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Rng graph_rng(static_cast<uint64_t>(trial % 20));
    std::string text = graph_to_json_text(random_graph(graph_rng, 6));
    for (uint64_t k = 1 + pick(rng, 3); k > 0; --k) {
      const size_t at = pick(rng, text.size());
      const char c = alphabet[pick(rng, alphabet.size())];
      switch (pick(rng, 3)) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(at, 1, c);
          break;
        default:
          text.erase(at, 1);
      }
    }
    try {
      const Graph graph = graph_from_json_text(text);
      memory_profile(graph);
      memory_summary(graph);
      ++accepted;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      FAIL() << "non-memwall exception " << e.what() << " for\n" << text;
    }
  }
  EXPECT_GT(accepted, 0);  // some damage is harmless (e.g. in a number)
}

}  // namespace
}  // namespace memwall
