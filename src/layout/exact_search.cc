// Depth-first search of one leaf at a fixed capacity (exact.h, search_leaf).
//
// Note [Canonical search]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Take a layout that fits the capacity and has the smallest sum of offsets.
// No buffer in it can move down, so each sits on the highest buffer below it
// that it conflicts with (its end rounded up to the alignment). Replay its
// buffers by increasing offset: each lands at its "minimum offset", the
// aligned top of the conflicting buffers already placed. So the search only
// enumerates such replays: a node places some unplaced buffer at its minimum
// offset, never below the offset placed before (the node's floor).
//
// Buffers placed at the same offset never conflict, so their order does not
// matter: once a candidate's subtree has failed, its later siblings may not
// place it at that same offset again (it is "excluded" there). Each set of
// buffers at one offset is then reached along one path only, whatever order
// the candidates are tried in, and the order is free to be smart: lowest
// offset first, then the candidate spanning the section with the most
// unplaced bytes (the tightest part of the timeline gets the low offsets),
// then the static rank (exact_order.cc).
//
// Pruning keeps the smallest-sum layout reachable:
// - Dominance. If an unplaced buffer y could sit at its minimum offset and
//   end at or below offset o, no buffer is placed next at o or above: in any
//   completion y would sit at o or higher, and moving it down to its minimum
//   offset lowers the sum. So candidates start below min(min offset + size).
// - Alone. A placed buffer that conflicts with no unplaced buffer changes no
//   one's minimum offset. If its subtree fails, so do its later siblings: in
//   theirs it keeps its offset below their floor and can never be placed.
// - Sections. The unplaced buffers of a section are all live together, so
//   they stack, each at or above the floor and its own minimum offset. The
//   lowest top of such a stack is the largest, over thresholds r, of r plus
//   the sizes of the buffers that cannot start below r (one machine with
//   release times); above the capacity, no completion fits. The floor's part
//   is checked on every section at once (a range maximum of unplaced bytes),
//   the rest only on the sections where some minimum offset just rose.
// - Splitting. When the buffers placed so far remove every unplaced lifetime
//   crossing some section boundary, the unplaced buffers on either side never
//   conflict again: each side is searched on its own, in turn, from the same
//   floor, and a side that fails fails the node without retrying the sides
//   solved before it. Each side's buffers are ranked afresh (Note
//   [Re-ranking sides]).
// - Failed states. A node's future depends only on the unplaced buffers'
//   minimum offsets, its floor and the exclusions that can still apply: an
//   unplaced buffer excluded at its current minimum offset, at or above the
//   floor. (An exclusion below the minimum offset is dead, since minimum
//   offsets only rise; hashing it too, as this search once did, made states
//   that differ only in such leftovers look different and missed most
//   hits.) A hash of those goes into a table when the node fails; a node
//   whose hash is there fails at once. Different arrangements below the
//   floor often leave the same state (two buffers with the same lifetime
//   stacked in either order, say). Failure does not depend on the order
//   candidates are tried in, so restarts share the table.
//
// The search is iterative (a leaf can hold tens of thousands of buffers),
// undoes each placement from logs, and gives up when the node or time limit
// runs out.
//
// Note [Re-ranking sides]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A side of a split is a problem of its own: its buffers, the bytes still
// unplaced in its sections, the floor. The static order ranks buffers by
// their most crowded section ("total", Note [Preorders] in exact_order.cc),
// measured on the whole leaf before anything was placed; by the time a side
// starts, the sections that were the most crowded may be mostly placed, and
// others are now the tightest. So at a split the buffers of every side are
// ranked again with the same preorder and seed, crowding judged by the
// unplaced bytes of each section at that moment, and the old ranks come back
// when the split ends. (MiniMalloc's solver does the same: it preorders each
// partition that its dynamic decomposition creates from the section totals
// of that moment.)
//
// The load score (by_load) already looks at the unplaced bytes at every
// node, but only at their maximum over a candidate's range: candidates whose
// largest section is the same one tie there, which is common, and the rank
// decides between them. With the stale rank, MiniMalloc's input I was not
// solved in 150 s; with the side ranks, one search in the total-length-area
// order finds a layout in 33,049 placements (and E's restarts need 554,194
// instead of 1,258,688). The rank only orders candidates, so no answer
// changes, only which layout is found first and how soon.
#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <utility>

#include "memwall/layout/exact.h"

namespace memwall::exact_detail {
namespace {

using Clock = SolverClock;                                        // Note [CPU-time budgets]
constexpr uint64_t kFree = std::numeric_limits<uint64_t>::max();  // offset of an unplaced buffer

// Candidates are tried by offset, then score (dynamic, smaller first), then rank.
struct Key {
  uint64_t offset = 0;
  uint64_t score = 0;
  int rank = -1;
  int buffer = -1;  // ranks are distinct within a context: never decides
  friend auto operator<=>(const Key&, const Key&) = default;
};

// Range maximum over per-section values with range subtraction (lazy:
// a node's value is the maximum of its range minus what was subtracted at
// or above it).
class MaxTree {
 public:
  explicit MaxTree(std::span<const uint64_t> values) {
    while (width_ < values.size()) width_ *= 2;
    max_.assign(2 * width_, 0);
    pending_.assign(2 * width_, 0);
    std::copy(values.begin(), values.end(), max_.begin() + static_cast<ptrdiff_t>(width_));
    for (size_t i = width_ - 1; i > 0; --i) max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
  }
  // Adds `delta` (two's complement: subtraction wraps back) to [begin, end).
  void add(int begin, int end, uint64_t delta) { add(1, 0, width_, begin, end, delta); }
  uint64_t max(int begin, int end) const { return max(1, 0, width_, begin, end); }

 private:
  void add(size_t node, size_t lo, size_t hi, int begin, int end, uint64_t delta) {
    const auto b = static_cast<size_t>(begin), e = static_cast<size_t>(end);
    if (e <= lo || hi <= b) return;
    if (b <= lo && hi <= e) {
      max_[node] += delta;
      pending_[node] += delta;
      return;
    }
    const size_t mid = (lo + hi) / 2;
    add(2 * node, lo, mid, begin, end, delta);
    add(2 * node + 1, mid, hi, begin, end, delta);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + pending_[node];
  }
  uint64_t max(size_t node, size_t lo, size_t hi, int begin, int end) const {
    const auto b = static_cast<size_t>(begin), e = static_cast<size_t>(end);
    if (e <= lo || hi <= b) return 0;
    if (b <= lo && hi <= e) return max_[node];
    const size_t mid = (lo + hi) / 2;
    return std::max(max(2 * node, lo, mid, begin, end), max(2 * node + 1, mid, hi, begin, end)) +
           pending_[node];
  }

  size_t width_ = 1;
  std::vector<uint64_t> max_, pending_;
};

// An independent part: sections [begin, end) and the buffers that were
// unplaced in them when it began (placed ones are skipped when scanning).
struct Context {
  int begin = 0, end = 0;
  std::vector<int> buffers;
  size_t placed_base = 0;  // placement stack depth when it began
  uint64_t outside = 0;    // state hash of the unplaced buffers not in it
};

// A 64-bit mix (splitmix64's finalizer): hashes of (buffer, minimum offset).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The sides a placement split its context into, searched one after another.
struct Split {
  std::vector<Context> sides;
  size_t next = 0;
  size_t rank_mark = 0;  // rank_log_ size before the sides were re-ranked
};

struct Frame {
  int context = 0;
  uint64_t floor = 0;  // candidates start at or above it
  uint64_t state = 0;  // hash of the state on entry
  Key key;             // the candidate placed last
  int tried = -1;      // that candidate's buffer
  size_t excluded_mark = 0;
  size_t first = 0, end = 0;  // candidates not tried yet: a min-heap in pool_[first, end)
  int placed = -1;            // the buffer this node placed, or -1
  bool alone = false;         // it conflicted with no unplaced buffer
  size_t offset_mark = 0;
  size_t high_mark = 0;
  int split = -1;  // index into splits_ while this node's sides are searched
};

class Search {
 public:
  Search(const LeafModel& model, uint64_t capacity, const Ranking& ranking, bool by_load,
         const SearchLimits& limits, int64_t& nodes, FailedStates* failed)
      : m_(model),
        cap_(capacity),
        ranking_(ranking),
        rank_(preorder_ranks(model, ranking.order, ranking.seed)),
        by_load_(by_load),
        limits_(limits),
        nodes_(nodes),
        start_nodes_(nodes),
        offset_(model.buffers(), kFree),
        min_offset_(model.buffers(), 0),
        free_min_(model.buffers(), 0),
        remaining_(model.section_bytes),
        high_(model.sections, 0),
        crossing_(model.crossing),
        remaining_max_(model.section_bytes),
        own_failed_(failed ? 0 : table_bits(limits.nodes)),
        failed_(failed ? *failed : own_failed_),
        excluded_at_(model.buffers(), kFree) {}

  Outcome run(std::vector<uint64_t>& out) {
    const int n = m_.buffers();
    out.assign(n, 0);
    if (n == 0) return Outcome::kFound;
    if (m_.peak > cap_) return Outcome::kInfeasible;
    out_ = &out;
    Context root{.begin = 0, .end = m_.sections};
    root.buffers.resize(n);
    for (int b = 0; b < n; ++b) {
      root.buffers[b] = b;
      state_ ^= term(b, 0);
    }
    contexts_.push_back(std::move(root));
    push_frame(0, 0);
    return loop();
  }

 private:
  enum class Step { kEnter, kNext, kFound, kFail };

  Outcome loop() {
    Step step = Step::kEnter;
    while (true) {
      if (step == Step::kEnter) {
        enter(frames_.back());
        step = Step::kNext;
      }
      if (step == Step::kNext) {
        Frame& f = frames_.back();
        bool last = false;
        if (f.placed >= 0) {
          last = f.alone;
          unplace(f);
        }
        if (out_of_budget()) return Outcome::kAborted;
        if (f.tried >= 0) exclude(f.tried);
        if (last || f.first == f.end) {
          step = Step::kFail;
        } else {
          // Candidates come off the heap in key order; usually the first
          // one settles the node, so the rest are never sorted.
          std::pop_heap(pool_.begin() + static_cast<ptrdiff_t>(f.first),
                        pool_.begin() + static_cast<ptrdiff_t>(f.end), std::greater<>());
          const Key key = pool_[--f.end];
          f.key = key;
          f.tried = key.buffer;
          ++nodes_;
          if (!place(f, key.buffer)) {
            step = Step::kNext;  // undone on the next round
          } else if (unplaced_left(contexts_[f.context]) == 0) {
            record(contexts_[f.context]);
            if (splits_.empty()) return Outcome::kFound;
            step = Step::kFound;
          } else if (!cuts_.empty()) {
            start_split(frames_.size() - 1);
            step = Step::kEnter;
          } else {
            push_frame(f.context, key.offset);
            step = Step::kEnter;
          }
        }
      }
      if (step == Step::kFound || step == Step::kFail) {
        const auto done = finish(step == Step::kFound);
        if (done) return *done;
        step = resume_;
      }
    }
  }

  // About one slot per node the search may visit, within [2^10, 2^18].
  static int table_bits(int64_t node_limit) {
    int bits = 10;
    while (bits < 18 && (node_limit == 0 || (int64_t{1} << bits) < node_limit)) ++bits;
    return bits;
  }

  uint64_t term(int u, uint64_t min_offset) const {
    return mix(mix(static_cast<uint64_t>(u)) ^ min_offset);
  }

  void push_frame(int context, uint64_t floor) {
    frames_.push_back({.context = context, .floor = floor, .excluded_mark = excluded_log_.size()});
  }

  // After a candidate's subtree, no later sibling's subtree places it at the
  // same offset again (Note [Canonical search]).
  void exclude(int u) {
    excluded_log_.push_back({u, excluded_at_[u]});
    excluded_at_[u] = min_offset_[u];
  }

  uint64_t exclusion_term(int u, uint64_t at) const { return mix(term(u, at) ^ 0x5bd1e995u); }

  // Lists the node's candidates: unplaced buffers at or above the floor,
  // not excluded there, that start below every unplaced buffer's lowest
  // possible end (dominance) and fit, as a heap. None when the same state
  // failed before.
  void enter(Frame& f) {
    const Context& c = contexts_[f.context];
    f.first = f.end = pool_.size();
    uint64_t limit = kFree;
    uint64_t exclusions = 0;
    for (const int u : c.buffers) {
      if (offset_[u] != kFree) continue;
      limit = std::min(limit, min_offset_[u] + m_.size[u]);
      // Only an exclusion at the buffer's current minimum offset, at or
      // above the floor, can still stop a placement here or below.
      if (excluded_at_[u] == min_offset_[u] && min_offset_[u] >= f.floor) {
        exclusions ^= exclusion_term(u, min_offset_[u]);
      }
    }
    f.state = state_ ^ c.outside ^ exclusions ^ mix(f.floor);
    if (failed_.failed(f.state)) return;
    for (const int u : c.buffers) {
      const uint64_t at = min_offset_[u];
      if (offset_[u] != kFree || at < f.floor || at >= limit || at + m_.size[u] > cap_ ||
          (at == f.floor && excluded_at_[u] == at)) {
        continue;
      }
      pool_.push_back({at, score(u), rank_[u], u});
    }
    f.end = pool_.size();
    std::make_heap(pool_.begin() + static_cast<ptrdiff_t>(f.first), pool_.end(), std::greater<>());
    work_ += c.buffers.size();
  }

  // Most unplaced bytes in a spanned section first: the buffers of the
  // tightest sections get the low offsets.
  uint64_t score(int u) const {
    if (!by_load_) return 0;
    return kFree - remaining_max_.max(m_.first_section[u], m_.end_section[u]);
  }

  size_t unplaced_left(const Context& c) const {
    // Placements in c since it began, against the buffers it began with.
    return c.buffers.size() - (placed_.size() - c.placed_base);
  }

  // The top frame's subtree ended (found or failed): pops frames until one
  // can go on, which resumes with resume_. Returns the outcome when the root
  // context is done.
  std::optional<Outcome> finish(bool found) {
    if (!found) failed_.add(frames_.back().state);
    while (true) {
      const Frame f = frames_.back();
      if (f.placed >= 0) unplace(frames_.back());
      while (excluded_log_.size() > f.excluded_mark) {
        const auto [u, at] = excluded_log_.back();
        excluded_log_.pop_back();
        excluded_at_[u] = at;
      }
      pool_.resize(f.first);
      frames_.pop_back();
      if (frames_.empty()) return found ? Outcome::kFound : Outcome::kInfeasible;
      Frame& parent = frames_.back();
      if (parent.split >= 0 && f.context != parent.context) {
        // f was the root of one side of parent's split.
        contexts_.pop_back();
        if (found && start_next_side(parent)) {
          resume_ = Step::kEnter;
          return std::nullopt;
        }
        restore_ranks(splits_.back().rank_mark);
        splits_.pop_back();
        parent.split = -1;
        if (found) {
          if (splits_.empty()) return Outcome::kFound;
          continue;
        }
        resume_ = Step::kNext;
        return std::nullopt;
      }
      if (found) continue;
      resume_ = Step::kNext;
      return std::nullopt;
    }
  }

  // The clock is read every so much work (buffers scanned or touched), not
  // every so many nodes: a node of a large leaf can cost a millisecond.
  bool out_of_budget() {
    if (limits_.nodes > 0 && nodes_ - start_nodes_ >= limits_.nodes) return true;
    if (++work_ >= next_check_) {
      next_check_ = work_ + kWorkPerClockRead;
      if (Clock::now() >= limits_.deadline) timed_out_ = true;
    }
    return timed_out_;
  }

  uint64_t align_up(uint64_t v) const {
    return (v + m_.alignment - 1) / m_.alignment * m_.alignment;
  }

  // Places b at its minimum offset; false when the section bounds prove the
  // node has no completion (the caller undoes it).
  bool place(Frame& f, int b) {
    const Context& c = contexts_[f.context];
    const uint64_t offset = min_offset_[b];
    const uint64_t size = m_.size[b];
    f.placed = b;
    f.offset_mark = offset_log_.size();
    f.high_mark = high_log_.size();
    offset_[b] = offset;
    free_min_[b] = 0;
    placed_.push_back(b);
    state_ ^= term(b, offset);

    // Only sections where a minimum offset rose can have a higher bound:
    // the union of the raised buffers' ranges, merged on the fly since
    // conflicts are listed by first section.
    touched_.clear();
    int run_begin = 0, run_end = 0;
    const uint64_t above = align_up(offset + size);
    f.alone = true;
    uint64_t visited = 0;
    m_.for_each_conflict(b, [&](int u) {
      ++visited;
      if (offset_[u] != kFree) return;
      f.alone = false;
      if (min_offset_[u] >= above) return;
      offset_log_.push_back({u, min_offset_[u]});
      state_ ^= term(u, min_offset_[u]) ^ term(u, above);
      min_offset_[u] = free_min_[u] = above;
      if (m_.first_section[u] > run_end) {
        touched_.push_back({run_begin, run_end});
        run_begin = m_.first_section[u];
      }
      run_end = std::max(run_end, m_.end_section[u]);
    });
    work_ += visited;
    touched_.push_back({run_begin, run_end});
    cuts_.clear();
    for (int s = m_.first_section[b]; s < m_.end_section[b]; ++s) {
      remaining_[s] -= size;
      if (s + 1 < m_.end_section[b] && --crossing_[s] == 0) cuts_.push_back(s + 1);
    }
    remaining_max_.add(m_.first_section[b], m_.end_section[b], 0 - size);
    if (offset + remaining_max_.max(c.begin, c.end) > cap_) return false;
    for (const auto& [begin, end] : touched_) {
      for (int s = begin; s < end; ++s) {
        if (high_[s] < above) {
          high_log_.push_back({s, high_[s]});
          high_[s] = above;
        }
      }
    }
    for (const auto& [begin, end] : touched_) {
      for (int s = begin; s < end; ++s) {
        if (!stack_fits(s)) return false;
      }
    }
    return true;
  }

  // The unplaced buffers of section s stack, each at or above its minimum
  // offset. The lowest possible top of the stack is the largest, over the
  // thresholds r, of r plus the sizes of the buffers whose minimum offset is
  // at least r (one machine with release times). A threshold at or below
  // cap - total cannot exceed the capacity, so only the buffers with higher
  // minimum offsets are sorted; usually there are none.
  bool stack_fits(int s) {
    const uint64_t total = remaining_[s];
    if (total == 0 || high_[s] + total <= cap_) return true;
    const uint64_t slack_floor = cap_ - total;
    releases_.clear();
    for (const int u : m_.members_of(s)) {
      if (free_min_[u] > slack_floor) {
        releases_.push_back({free_min_[u], m_.size[u]});
      }
    }
    if (releases_.empty()) return true;
    std::sort(releases_.begin(), releases_.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    uint64_t sum = 0;
    for (const auto& [release, size] : releases_) {
      sum += size;
      if (release + sum > cap_) return false;
    }
    return true;
  }

  void unplace(Frame& f) {
    const int b = f.placed;
    for (int s = m_.first_section[b]; s < m_.end_section[b]; ++s) {
      remaining_[s] += m_.size[b];
      if (s + 1 < m_.end_section[b]) ++crossing_[s];
    }
    remaining_max_.add(m_.first_section[b], m_.end_section[b], m_.size[b]);
    while (high_log_.size() > f.high_mark) {
      high_[high_log_.back().first] = high_log_.back().second;
      high_log_.pop_back();
    }
    while (offset_log_.size() > f.offset_mark) {
      const auto [u, old] = offset_log_.back();
      offset_log_.pop_back();
      state_ ^= term(u, min_offset_[u]) ^ term(u, old);
      min_offset_[u] = free_min_[u] = old;
    }
    placed_.pop_back();
    offset_[b] = kFree;
    free_min_[b] = min_offset_[b];
    state_ ^= term(b, min_offset_[b]);
    f.placed = -1;
  }

  void record(const Context& c) {
    for (size_t i = c.placed_base; i < placed_.size(); ++i) {
      (*out_)[placed_[i]] = offset_[placed_[i]];
    }
  }

  // The frame's placement cut its context at cuts_: records the context's
  // placements, deals its unplaced buffers to the sides and starts the
  // first side.
  void start_split(size_t frame_index) {
    Frame& f = frames_[frame_index];
    const Context& c = contexts_[f.context];
    record(c);
    std::sort(cuts_.begin(), cuts_.end());
    Split split;
    int from = c.begin;
    for (size_t i = 0; i <= cuts_.size(); ++i) {
      const int to = i < cuts_.size() ? cuts_[i] : c.end;
      split.sides.push_back({.begin = from, .end = to});
      from = to;
    }
    for (const int u : c.buffers) {
      if (offset_[u] != kFree) continue;
      const auto side =
          std::upper_bound(cuts_.begin(), cuts_.end(), m_.first_section[u]) - cuts_.begin();
      split.sides[side].buffers.push_back(u);
    }
    std::erase_if(split.sides, [](const Context& side) { return side.buffers.empty(); });
    // Small sides first: cheap to solve, and a failure ends the split.
    std::stable_sort(
        split.sides.begin(), split.sides.end(),
        [](const Context& a, const Context& b) { return a.buffers.size() < b.buffers.size(); });
    split.rank_mark = rank_log_.size();
    for (const Context& side : split.sides) rerank(side.buffers);
    f.split = static_cast<int>(splits_.size());
    splits_.push_back(std::move(split));
    start_next_side(f);
  }

  // Ranks `buffers` (one side) afresh by the bytes still unplaced.
  void rerank(std::span<const int> buffers) {
    const std::vector<int> ranks =
        preorder_ranks(m_, ranking_.order, ranking_.seed, remaining_, buffers);
    work_ += buffers.size();
    for (size_t i = 0; i < buffers.size(); ++i) {
      rank_log_.push_back({buffers[i], rank_[buffers[i]]});
      rank_[buffers[i]] = ranks[i];
    }
  }

  void restore_ranks(size_t mark) {
    while (rank_log_.size() > mark) {
      rank_[rank_log_.back().first] = rank_log_.back().second;
      rank_log_.pop_back();
    }
  }

  // Starts the next side of f's split; false when none is left. Each side
  // keeps f's key as its floor.
  bool start_next_side(Frame& f) {
    Split& split = splits_[f.split];
    if (split.next == split.sides.size()) return false;
    Context side = std::move(split.sides[split.next++]);
    side.placed_base = placed_.size();
    side.outside = state_;
    for (const int u : side.buffers) side.outside ^= term(u, min_offset_[u]);
    const uint64_t floor = f.key.offset;
    contexts_.push_back(std::move(side));
    push_frame(static_cast<int>(contexts_.size()) - 1, floor);
    return true;
  }

  const LeafModel& m_;
  const uint64_t cap_;
  const Ranking ranking_;
  // Per buffer: rank within its context (re-ranked per side, restored after).
  std::vector<int> rank_;
  std::vector<std::pair<int, int>> rank_log_;
  const bool by_load_;
  const SearchLimits& limits_;
  int64_t& nodes_;
  const int64_t start_nodes_;
  static constexpr uint64_t kWorkPerClockRead = 1 << 14;
  uint64_t work_ = 0, next_check_ = 0;
  bool timed_out_ = false;
  std::vector<uint64_t>* out_ = nullptr;
  Step resume_ = Step::kNext;

  std::vector<uint64_t> offset_;      // kFree when unplaced
  std::vector<uint64_t> min_offset_;  // of unplaced buffers (= offset once placed)
  // min_offset_ of unplaced buffers, 0 for placed ones: one load per member
  // in stack_fits' scans.
  std::vector<uint64_t> free_min_;
  std::vector<uint64_t> remaining_;  // unplaced bytes per section
  // Per section, at least the highest minimum offset of its unplaced
  // buffers (raised with them, restored on undo): most sections pass
  // stack_fits on it without a scan.
  std::vector<uint64_t> high_;
  std::vector<std::pair<int, uint64_t>> high_log_;
  std::vector<int> crossing_;  // unplaced buffers spanning each boundary
  MaxTree remaining_max_;
  uint64_t state_ = 0;       // XOR of term(u, min offset) over unplaced buffers
  FailedStates own_failed_;  // unused when the caller shares a table
  FailedStates& failed_;
  std::vector<uint64_t> excluded_at_;  // offset a buffer may not take again, kFree: none
  std::vector<std::pair<int, uint64_t>> excluded_log_;

  std::vector<int> placed_;
  std::vector<std::pair<int, uint64_t>> offset_log_;
  std::vector<std::pair<uint64_t, uint64_t>> releases_;  // scratch of stack_fits
  std::vector<std::pair<int, int>> touched_;             // section ranges
  std::vector<int> cuts_;
  std::vector<Key> pool_;  // candidates of the frames on the stack
  std::vector<Context> contexts_;
  std::vector<Split> splits_;
  std::vector<Frame> frames_;
};

}  // namespace

FailedStates::FailedStates(int bits) : mask_((size_t{1} << bits) - 1), slots_(mask_ + 1, 0) {}

void FailedStates::add(uint64_t state) {
  // Past one add per slot, most slots have been overwritten at least once:
  // double the table (up to 2^20 slots, 8 MB), keeping what it holds.
  if (++stored_ > slots_.size() && slots_.size() < (size_t{1} << 20)) {
    std::vector<uint64_t> old = std::move(slots_);
    mask_ = 2 * old.size() - 1;
    slots_.assign(mask_ + 1, 0);
    for (const uint64_t s : old) {
      if (s != 0) slots_[s & mask_] = s;
    }
    stored_ = 0;
  }
  slots_[state & mask_] = state;
}

Outcome search_leaf(const LeafModel& model, uint64_t capacity, const Ranking& ranking, bool by_load,
                    const SearchLimits& limits, std::vector<uint64_t>& offsets, int64_t& nodes,
                    FailedStates* failed) {
  Search search(model, capacity, ranking, by_load, limits, nodes, failed);
  return search.run(offsets);
}

}  // namespace memwall::exact_detail
