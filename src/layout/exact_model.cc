// Sections and conflict lists of a leaf (exact.h, LeafModel).
//
// Time points are compressed to the slots between consecutive distinct
// endpoints. A slot's live set is maximal (contained in no other slot's)
// exactly when some buffer starts at the slot's beginning and some buffer
// ends at its end: those are the sections. Intervals that intersect share a
// section (the Helly property of intervals), so section ranges alone decide
// conflicts, and a section's live bytes bound every layout from below.
// Conflicts are not stored: those of b are the members of its first section
// and the buffers starting within its range (LeafModel::for_each_conflict).
#include <algorithm>

#include "memwall/layout/exact.h"

namespace memwall::exact_detail {
namespace {

// Turns per-row counts into CSR offsets: begin[r]..begin[r + 1].
void counts_to_offsets(std::vector<int>& begin) {
  int sum = 0;
  for (int& c : begin) {
    const int count = c;
    c = sum;
    sum += count;
  }
}

}  // namespace

LeafModel build_model(const LayoutProblem& problem, const Leaf& leaf) {
  LeafModel m;
  m.alignment = std::max<uint64_t>(problem.alignment, 1);
  const int n = static_cast<int>(leaf.buffers.size());
  m.global = leaf.buffers;
  m.size.resize(n);
  m.lower.resize(n);
  m.upper.resize(n);
  std::vector<int64_t> times;
  times.reserve(2 * static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) {
    const LayoutBuffer& buffer = problem.buffers[leaf.buffers[b]];
    m.size[b] = buffer.size;
    m.lower[b] = buffer.lower;
    m.upper[b] = buffer.upper;
    times.push_back(buffer.lower);
    times.push_back(buffer.upper);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const auto index_of = [&](int64_t t) {
    return static_cast<size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  std::vector<char> starts_here(times.size(), 0), ends_here(times.size(), 0);
  for (int b = 0; b < n; ++b) {
    starts_here[index_of(m.lower[b])] = 1;
    ends_here[index_of(m.upper[b])] = 1;
  }
  std::vector<int64_t> section_start;  // time at which each section begins
  for (size_t t = 0; t + 1 < times.size(); ++t) {
    if (starts_here[t] && ends_here[t + 1]) section_start.push_back(times[t]);
  }
  m.sections = static_cast<int>(section_start.size());
  const auto section_at = [&](int64_t t) {
    return static_cast<int>(std::lower_bound(section_start.begin(), section_start.end(), t) -
                            section_start.begin());
  };
  m.first_section.resize(n);
  m.end_section.resize(n);
  for (int b = 0; b < n; ++b) {
    m.first_section[b] = section_at(m.lower[b]);
    m.end_section[b] = section_at(m.upper[b]);
  }

  // Live bytes and crossings by difference arrays; members and starts as CSR.
  const int sections = m.sections;
  std::vector<uint64_t> bytes_delta(sections + 1, 0);
  std::vector<int> cross_delta(sections + 1, 0);
  m.members_begin.assign(sections + 1, 0);
  m.starts_begin.assign(sections + 1, 0);
  for (int b = 0; b < n; ++b) {
    const int first = m.first_section[b], end = m.end_section[b];
    bytes_delta[first] += m.size[b];
    bytes_delta[end] -= m.size[b];
    // Boundary k lies between sections k and k + 1.
    if (end - first >= 2) {
      ++cross_delta[first];
      --cross_delta[end - 1];
    }
    ++m.starts_begin[first];
    for (int s = first; s < end; ++s) ++m.members_begin[s];
  }
  m.section_bytes.resize(sections);
  m.crossing.assign(std::max(sections - 1, 0), 0);
  uint64_t live = 0;
  int cross = 0;
  for (int s = 0; s < sections; ++s) {
    live += bytes_delta[s];
    m.section_bytes[s] = live;
    m.peak = std::max(m.peak, live);
    cross += cross_delta[s];
    if (s + 1 < sections) m.crossing[s] = cross;
  }
  counts_to_offsets(m.members_begin);
  counts_to_offsets(m.starts_begin);
  m.members.resize(m.members_begin.back());
  m.starts.resize(m.starts_begin.back());
  {
    // Filled in order of first section, so every list is sorted by it.
    std::vector<int> order(n);
    for (int b = 0; b < n; ++b) order[b] = b;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return m.first_section[a] < m.first_section[b]; });
    std::vector<int> next_member(m.members_begin.begin(), m.members_begin.end() - 1);
    std::vector<int> next_start(m.starts_begin.begin(), m.starts_begin.end() - 1);
    for (const int b : order) {
      m.starts[next_start[m.first_section[b]]++] = b;
      for (int s = m.first_section[b]; s < m.end_section[b]; ++s) m.members[next_member[s]++] = b;
    }
  }

  return m;
}

}  // namespace memwall::exact_detail
