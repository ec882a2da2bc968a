// Which chunk backs each granule of an address range, kept as runs (Note
// [Chunk runs] in device.h), so that its size grows with the number of
// separate mappings, never with the bytes mapped (internal to src/alloc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

#include "memwall/alloc/device.h"
#include "memwall/alloc/error.h"
#include "node_recycler.h"

namespace memwall::alloc {

// Granules [start, start + count), by index.
struct GranuleSpan {
  uint64_t start = 0;
  uint64_t count = 0;
  uint64_t end() const { return start + count; }
};

// Granule g holds chunk run.first + (g - start) for the entry (start, run)
// with start <= g < start + run.count; a granule in no entry is unmapped (a
// hole). Entries never overlap, and an entry that continues its left
// neighbour in granules and in handles is merged into it, so a run mapped in
// one call stays one entry. Granules are indices: offsets in a range, or
// addresses, divided by the granularity. Every query is O(log n + the
// entries it covers); erased nodes are kept for later inserts (Note
// [Allocation-free fast path]), since stitching moves chunks all the time.
class ChunkMap {
 public:
  // Mapped granules in all.
  uint64_t mapped() const { return mapped_; }
  bool empty() const { return entries_.empty(); }
  // One past the last mapped granule; 0 when none is.
  uint64_t end() const {
    return entries_.empty() ? 0 : entries_.rbegin()->first + entries_.rbegin()->second.count;
  }

  // Maps run.count granules from `start`; they must all be unmapped.
  void insert(uint64_t start, ChunkRun run) {
    if (!try_insert(start, run)) throw Error("chunk map: insert over a mapping");
  }
  // The same, or false (changing nothing) when one of them is mapped.
  bool try_insert(uint64_t start, ChunkRun run) {
    if (run.count == 0) return true;
    const uint64_t added = run.count;
    auto next = entries_.lower_bound(start);
    if (next != entries_.end() && next->first < start + run.count) return false;
    if (next != entries_.begin()) {
      auto prev = std::prev(next);
      const uint64_t prev_end = prev->first + prev->second.count;
      if (prev_end > start) return false;
      if (prev_end == start && prev->second.first + prev->second.count == run.first) {
        // Continues `prev`: grow it in place, and take `next` in too when
        // the run reaches it.
        prev->second.count += run.count;
        if (next != entries_.end() && next->first == start + run.count &&
            run.first + run.count == next->second.first) {
          prev->second.count += next->second.count;
          erase_entry(next);
        }
        mapped_ += added;
        return true;
      }
    }
    if (next != entries_.end() && next->first == start + run.count &&
        run.first + run.count == next->second.first) {
      run.count += next->second.count;
      next = erase_entry(next);
    }
    emplace(next, start, run);
    mapped_ += added;
    return true;
  }

  // Mapped granules in [first, end).
  uint64_t mapped_in(uint64_t first, uint64_t end) const {
    uint64_t count = 0;
    for (auto it = first_ending_after(first); it != entries_.end() && it->first < end; ++it) {
      count += std::min(end, it->first + it->second.count) - std::max(first, it->first);
    }
    return count;
  }

  // One past the last mapped granule of [first, end), or `first` when none
  // of them is mapped.
  uint64_t mapped_end(uint64_t first, uint64_t end) const {
    auto it = entries_.lower_bound(end);
    if (it == entries_.begin()) return first;
    --it;
    return std::max(first, std::min(end, it->first + it->second.count));
  }

  // The maximal runs of mapped granules in [first, end), merged across
  // entries, in ascending order (into `spans`, cleared first).
  void mapped_spans(uint64_t first, uint64_t end, std::vector<GranuleSpan>& spans) const {
    spans.clear();
    for (auto it = first_ending_after(first); it != entries_.end() && it->first < end; ++it) {
      const uint64_t from = std::max(first, it->first);
      const uint64_t to = std::min(end, it->first + it->second.count);
      if (!spans.empty() && spans.back().end() == from) {
        spans.back().count += to - from;
      } else {
        spans.push_back({from, to - from});
      }
    }
  }

  // The maximal runs of unmapped granules in [first, end), ascending (into
  // `gaps`, cleared first).
  void holes(uint64_t first, uint64_t end, std::vector<GranuleSpan>& gaps) const {
    gaps.clear();
    uint64_t at = first;
    for (auto it = first_ending_after(first); it != entries_.end() && it->first < end; ++it) {
      if (it->first > at) gaps.push_back({at, it->first - at});
      at = std::max(at, it->first + it->second.count);
    }
    if (at < end) gaps.push_back({at, end - at});
  }

  // Unmaps [first, end), which must be mapped throughout (Error after the
  // fact otherwise: a caller's bug), and appends the chunks that were there
  // to `into` in granule order (continuing runs merged). Entries cut at
  // either end keep their nodes.
  void erase(uint64_t first, uint64_t end, std::vector<ChunkRun>& into) {
    uint64_t erased = 0;
    auto it = first_ending_after(first);
    while (it != entries_.end() && it->first < end) {
      const uint64_t start = it->first;
      const ChunkRun run = it->second;
      const uint64_t from = std::max(first, start);
      const uint64_t to = std::min(end, start + run.count);
      append(into, {run.first + (from - start), to - from});
      erased += to - from;
      const bool rest = to < start + run.count;
      const ChunkRun right{run.first + (to - start), start + run.count - to};
      if (start < from) {
        it->second.count = from - start;  // the left part stays
        if (rest) {
          emplace(std::next(it), to, right);
          break;
        }
        ++it;
        continue;
      }
      if (rest) {
        // The right part stays: the same node under its new start.
        auto node = entries_.extract(it++);
        node.key() = to;
        node.mapped() = right;
        entries_.insert(it, std::move(node));
        break;
      }
      it = erase_entry(it);
    }
    mapped_ -= erased;
    if (erased != end - first) throw Error("chunk map: erase of a hole");
  }

  // Unmaps everything, appending the chunks to `into` in granule order.
  void clear(std::vector<ChunkRun>& into) {
    for (const auto& [start, run] : entries_) append(into, run);
    entries_.clear();
    mapped_ = 0;
  }

  // The entries do not overlap, none is empty and mapped() is their sum.
  bool consistent() const {
    uint64_t count = 0;
    uint64_t last_end = 0;
    for (const auto& [start, run] : entries_) {
      if (run.count == 0 || start < last_end) return false;
      last_end = start + run.count;
      count += run.count;
    }
    return count == mapped_;
  }

  static void append(std::vector<ChunkRun>& runs, ChunkRun run) {
    if (!runs.empty() && runs.back().first + runs.back().count == run.first) {
      runs.back().count += run.count;
    } else {
      runs.push_back(run);
    }
  }

 private:
  using Entries = std::map<uint64_t, ChunkRun>;

  void emplace(Entries::const_iterator hint, uint64_t start, ChunkRun run) {
    Entries::node_type node = spare_.take();
    if (node.empty()) {
      entries_.emplace_hint(hint, start, run);
      return;
    }
    node.key() = start;
    node.mapped() = run;
    entries_.insert(hint, std::move(node));
  }
  Entries::iterator erase_entry(Entries::iterator it) {
    auto next = std::next(it);
    spare_.give(entries_.extract(it));
    return next;
  }

  // The first entry that ends after granule g (the one holding g, if any).
  Entries::const_iterator first_ending_after(uint64_t g) const {
    auto it = entries_.upper_bound(g);
    if (it != entries_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.count > g) return prev;
    }
    return it;
  }
  Entries::iterator first_ending_after(uint64_t g) {
    auto it = entries_.upper_bound(g);
    if (it != entries_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.count > g) return prev;
    }
    return it;
  }

  Entries entries_;
  NodeRecycler<Entries> spare_;
  uint64_t mapped_ = 0;
};

}  // namespace memwall::alloc
