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
  const int n = model.buffers();
  std::vector<uint64_t> total(n, 0);
  std::vector<double> area(n);  // may exceed 64 bits; ties are harmless
  std::vector<int64_t> length(n);
  for (int b = 0; b < n; ++b) {
    for (int s = model.first_section[b]; s < model.end_section[b]; ++s) {
      total[b] = std::max(total[b], model.section_bytes[s]);
    }
    length[b] = model.upper[b] - model.lower[b];
    area[b] = static_cast<double>(model.size[b]) * static_cast<double>(length[b]);
  }
  std::vector<int> by_rank(n);
  std::iota(by_rank.begin(), by_rank.end(), 0);
  const auto key = [&](int b) {
    // Larger first: negate through the comparison below.
    switch (order) {
      case Preorder::kLengthAreaTotal:
        return std::make_tuple(static_cast<double>(length[b]), area[b],
                               static_cast<double>(total[b]));
      case Preorder::kTotalAreaLength:
        return std::make_tuple(static_cast<double>(total[b]), area[b],
                               static_cast<double>(length[b]));
      case Preorder::kTotalLengthArea:
        return std::make_tuple(static_cast<double>(total[b]), static_cast<double>(length[b]),
                               area[b]);
    }
    return std::make_tuple(0.0, 0.0, 0.0);
  };
  std::stable_sort(by_rank.begin(), by_rank.end(), [&](int a, int b) {
    const auto ka = key(a), kb = key(b);
    if (ka != kb) return ka > kb;
    return model.size[a] > model.size[b];
  });
  std::vector<int> rank(n);
  for (int r = 0; r < n; ++r) rank[by_rank[r]] = r;
  if (seed == 0) return rank;
  // Each buffer moves by a uniform amount in [-n/32, n/32] ranks.
  std::vector<double> jittered(n);
  const double spread = n / 16.0;
  for (int b = 0; b < n; ++b) {
    const double unit = static_cast<double>(next_random(seed) >> 11) * 0x1.0p-53;
    jittered[b] = rank[b] + (unit - 0.5) * spread;
  }
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [&](int a, int b) { return jittered[a] < jittered[b]; });
  for (int r = 0; r < n; ++r) rank[by_rank[r]] = r;
  return rank;
}

}  // namespace memwall::exact_detail
