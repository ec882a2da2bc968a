// Static orders for the exact search (exact.h, preorder_ranks).
//
// Note [Preorders]
// ~~~~~~~~~~~~~~~~
// The search always places a buffer at the lowest offset any unplaced
// buffer can take; among buffers that can take it, the static order decides
// who goes first, and so which layout the first dive finds and which
// subtrees are tried first. Hard buffers should go first: those in the most
// crowded sections (their section's live bytes, "total"), the large ones
// (size times lifetime, "area") and the long-lived ones ("length"). No one
// order wins everywhere, so the search cycles through a few (decide_leaf),
// also jittered: restarts on slightly different orders escape the huge
// fruitless subtrees one fixed order can get stuck in.
//
// "Total" is measured on given per-section bytes: the leaf's live bytes for
// the whole leaf, the bytes still unplaced for the side of a split that the
// search ranks again (Note [Re-ranking sides] in exact_search.cc).
#include <algorithm>
#include <numeric>
#include <tuple>

#include "memwall/layout/exact.h"

namespace memwall::exact_detail {

namespace {

// splitmix64: a tiny deterministic generator, the same on every platform.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int> preorder_ranks(const LeafModel& model, Preorder order, uint64_t seed) {
  std::vector<int> all(model.buffers());
  std::iota(all.begin(), all.end(), 0);
  return preorder_ranks(model, order, seed, model.section_bytes, all);
}

std::vector<int> preorder_ranks(const LeafModel& model, Preorder order, uint64_t seed,
                                std::span<const uint64_t> section_totals,
                                std::span<const int> buffers) {
  const int n = static_cast<int>(buffers.size());
  std::vector<uint64_t> total(n, 0);
  std::vector<double> area(n);  // may exceed 64 bits; ties are harmless
  std::vector<int64_t> length(n);
  for (int i = 0; i < n; ++i) {
    const int b = buffers[i];
    for (int s = model.first_section[b]; s < model.end_section[b]; ++s) {
      total[i] = std::max(total[i], section_totals[s]);
    }
    length[i] = model.upper[b] - model.lower[b];
    area[i] = static_cast<double>(model.size[b]) * static_cast<double>(length[i]);
  }
  std::vector<int> by_rank(n);
  std::iota(by_rank.begin(), by_rank.end(), 0);
  const auto key = [&](int i) {
    // Larger first: negate through the comparison below.
    switch (order) {
      case Preorder::kLengthAreaTotal:
        return std::make_tuple(static_cast<double>(length[i]), area[i],
                               static_cast<double>(total[i]));
      case Preorder::kTotalAreaLength:
        return std::make_tuple(static_cast<double>(total[i]), area[i],
                               static_cast<double>(length[i]));
      case Preorder::kTotalLengthArea:
        return std::make_tuple(static_cast<double>(total[i]), static_cast<double>(length[i]),
                               area[i]);
    }
    return std::make_tuple(0.0, 0.0, 0.0);
  };
  std::stable_sort(by_rank.begin(), by_rank.end(), [&](int a, int b) {
    const auto ka = key(a), kb = key(b);
    if (ka != kb) return ka > kb;
    return model.size[buffers[a]] > model.size[buffers[b]];
  });
  std::vector<int> rank(n);
  for (int r = 0; r < n; ++r) rank[by_rank[r]] = r;
  if (seed == 0) return rank;
  // Each buffer moves by a uniform amount in [-n/32, n/32] ranks.
  std::vector<double> jittered(n);
  const double spread = n / 16.0;
  for (int i = 0; i < n; ++i) {
    const double unit = static_cast<double>(next_random(seed) >> 11) * 0x1.0p-53;
    jittered[i] = rank[i] + (unit - 0.5) * spread;
  }
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [&](int a, int b) { return jittered[a] < jittered[b]; });
  for (int r = 0; r < n; ++r) rank[by_rank[r]] = r;
  return rank;
}

}  // namespace memwall::exact_detail
