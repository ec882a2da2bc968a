// The block engine behind "caching", "expandable" and "stitching": PyTorch's
// CUDACachingAllocator data structures (segments split into address-linked
// blocks, free blocks in per-pool sets ordered by (stream, size, address))
// over the Device's chunks. The three policies differ in how they get
// memory when no free block fits (grow), how they give it back
// (release_cache) and, for "stitching", in free blocks that may span
// unmapped granules (Note [Stitching]); see docs/alloc.md for the rules and
// their sources.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "chunk_map.h"
#include "live_map.h"
#include "node_recycler.h"
#include "policies.h"

namespace memwall::alloc {
namespace {

struct Segment;
struct Block;

// A free block as its pool orders it. The key is copied into the set's node
// so that a search compares without touching the Blocks.
struct FreeKey {
  StreamId stream = 0;
  uint64_t size = 0;
  uintptr_t addr = 0;
  Block* block = nullptr;
};

// PyTorch's BlockComparatorSize: best fit is the first block >= the request
// of the same stream, the lowest address among equals.
struct BySize {
  bool operator()(const FreeKey& a, const FreeKey& b) const {
    if (a.stream != b.stream) return a.stream < b.stream;
    if (a.size != b.size) return a.size < b.size;
    return a.addr < b.addr;
  }
};

// Note [Allocation-free fast path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A cached allocate+free moves blocks out of a pool's std::set and back,
// and splits and merges blocks. The sets keep the nodes they give up (C++17
// node handles) for their next insert, Blocks come from a free list, and
// the live map is a flat table (Note [Live map]), so the steady state calls
// neither malloc nor free.
using FreeSet = std::set<FreeKey, BySize>;

struct Block {
  uintptr_t addr = 0;
  uint64_t size = 0;
  uint64_t requested = 0;  // bytes asked for while allocated
  Segment* segment = nullptr;
  // Address-adjacent blocks of the same mapped run (null at a segment's end
  // or at an unmapped hole), as PyTorch's Block::prev/next.
  Block* prev = nullptr;
  Block* next = nullptr;
  StreamId stream = 0;
  PoolKind pool = PoolKind::large;
  bool allocated = false;
  // "stitching": unmapped granules inside this free block (Note [Stitching]);
  // always 0 for live blocks and for the other policies.
  uint64_t holes = 0;
  // Its place in its pool while free, so that merging erases without a search.
  FreeSet::iterator in_pool;
};

// One reserved virtual range (a cudaMalloc'd segment in PyTorch's terms).
struct Segment {
  uintptr_t base = 0;
  uint64_t virtual_bytes = 0;
  // The granules in use from the base: all of a caching segment, those up to
  // a growable range's end. Under "stitching" some may be holes (Note
  // [Stitching]).
  uint64_t granules = 0;
  // The chunks mapped at them, by granule, as runs (Note [Chunk runs]).
  ChunkMap chunks;
  StreamId stream = 0;
  PoolKind pool = PoolKind::large;
  bool expandable = false;  // grown at its end ("expandable", "stitching")
  // The range its (stream, pool) grows now; "stitching" retires a range
  // whose virtual end is used up and starts another.
  bool growing = false;
  // Growable: the block ending at the end (null when the end is 0).
  Block* tail = nullptr;
};

class FreePool {
 public:
  using Set = FreeSet;
  void insert(Block* block) {
    bytes_ += block->size;
    const FreeKey key{block->stream, block->size, block->addr, block};
    Set::node_type node = nodes_.take();
    if (node.empty()) {
      block->in_pool = set_.insert(key).first;
      return;
    }
    node.value() = key;
    block->in_pool = set_.insert(std::move(node)).position;
  }
  void erase(Set::iterator it) {
    bytes_ -= it->size;
    nodes_.give(set_.extract(it));
  }
  // The block must be in this pool.
  void erase(const Block* block) { erase(block->in_pool); }
  Set::iterator first_fit(StreamId stream, uint64_t size) const {
    return set_.lower_bound({stream, size, 0});
  }
  // One past the last block of `stream`.
  Set::iterator stream_end(StreamId stream) const {
    auto it = first_fit(stream, UINT64_MAX);
    while (it != set_.end() && it->stream == stream) ++it;
    return it;
  }
  const Set& blocks() const { return set_; }
  uint64_t bytes() const { return bytes_; }

 private:
  Set set_;
  NodeRecycler<Set> nodes_;
  uint64_t bytes_ = 0;  // sum of the sizes of the blocks in the set
};

class BlockAllocator final : public Allocator {
 public:
  BlockAllocator(BlockPolicy policy, Device& device, const Options& options)
      : Allocator(policy_names()[static_cast<size_t>(policy)], device),
        policy_(policy),
        max_split_(options.max_split_size) {}

  ~BlockAllocator() override {
    for (auto& [base, segment] : segments_) release_everything(*segment);
  }

 private:
  // Every policy rounds requests as PyTorch does; blocks are not chunks
  // (Note [Stitching granularity]).
  static uint64_t block_size(uint64_t bytes) { return round_size(bytes); }

  FreePool& pool(PoolKind kind) { return kind == PoolKind::small ? small_ : large_; }

  Allocation do_allocate(uint64_t bytes, StreamId stream, uint64_t /*tag*/) override {
    const PoolKind kind = pool_for(round_size(bytes));
    const uint64_t size = block_size(bytes);
    Block* block = obtain(kind, stream, size);
    if (block == nullptr) {
      // PyTorch's last resort: release every cached segment (stitching:
      // every free whole chunk), then retry.
      count_cache_flush();
      release_cache();
      block = policy_ == BlockPolicy::stitching ? take_backed_block(kind, stream, size)
                                                : grow(kind, stream, size);
    }
    if (block == nullptr) return {};
    carve(block, size);
    block->allocated = true;
    block->requested = bytes;
    live_.insert(block->addr, block);
    return {reinterpret_cast<void*>(block->addr), block->size, false};
  }

  // A free block of at least `size` bytes, out of its pool, or null.
  Block* obtain(PoolKind kind, StreamId stream, uint64_t size) {
    if (policy_ == BlockPolicy::stitching) return take_backed_block(kind, stream, size);
    Block* block = take_free_block(kind, stream, size);
    return block != nullptr ? block : grow(kind, stream, size);
  }

  Freed do_free(void* ptr) override {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    Block** found = live_.find(address);
    if (found == nullptr) throw Error(not_live_message(address));
    Block* block = *found;
    live_.erase(address);
    const Freed freed{block->size, block->requested};
    block->allocated = false;
    block->requested = 0;
    merge_with_neighbours(block);
    pool(block->pool).insert(block);
    return freed;
  }

  void do_empty_cache() override { release_cache(); }

  // Free blocks' bytes minus their holes: cached physical memory.
  uint64_t do_cached_bytes() const override {
    return small_.bytes() + large_.bytes() - hole_chunks_ * granularity();
  }

  // ---- Finding and shaping blocks ----

  Block* take_free_block(PoolKind kind, StreamId stream, uint64_t size) {
    FreePool& free = pool(kind);
    auto it = free.first_fit(stream, size);
    if (it == free.blocks().end() || it->stream != stream) return nullptr;
    if (policy_ == BlockPolicy::caching && kind == PoolKind::large &&
        !oversize_filter_accepts(it->size, size, max_split_)) {
      return nullptr;
    }
    Block* block = it->block;
    free.erase(it);
    return block;
  }

  bool splits(const Block* block, uint64_t size) const {
    switch (policy_) {
      case BlockPolicy::caching:
        return should_split(block->pool, block->size, size, max_split_);
      case BlockPolicy::expandable:
      case BlockPolicy::stitching:
        // Both can hand a free remainder's whole chunks to other requests, so
        // splitting large blocks costs no address space they cannot recover.
        return should_split(block->pool, block->size, size, max_split_, /*expandable=*/true);
    }
    return false;
  }

  // Cuts `size` bytes off the front of a free block taken out of its pool;
  // the rest goes back to the pool.
  void carve(Block* block, uint64_t size) {
    if (!splits(block, size)) return;
    Block* rest = new_block();
    rest->addr = block->addr + size;
    rest->size = block->size - size;
    rest->segment = block->segment;
    rest->stream = block->stream;
    rest->pool = block->pool;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    // The part handed out is fully mapped (take_backed_block), so every hole
    // left lies in the rest.
    rest->holes = block->holes;
    block->holes = 0;
    if (block->segment->tail == block) block->segment->tail = rest;
    pool(rest->pool).insert(rest);
  }

  // PyTorch's try_merge_blocks on both sides of a block being freed.
  void merge_with_neighbours(Block* block) {
    if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
      pool(prev->pool).erase(prev);
      block->addr = prev->addr;
      block->size += prev->size;
      block->holes += prev->holes;
      block->prev = prev->prev;
      if (block->prev != nullptr) block->prev->next = block;
      recycle(prev);
    }
    if (Block* next = block->next; next != nullptr && !next->allocated) {
      pool(next->pool).erase(next);
      block->size += next->size;
      block->holes += next->holes;
      block->next = next->next;
      if (block->next != nullptr) block->next->prev = block;
      if (block->segment->tail == next) block->segment->tail = block;
      recycle(next);
    }
  }

  // ---- Getting memory from the device ----

  // A free block of at least `size` bytes, outside the pool, or null.
  Block* grow(PoolKind kind, StreamId stream, uint64_t size) {
    if (policy_ == BlockPolicy::caching) return new_segment(kind, stream, segment_size(size));
    return grow_range(kind, stream, size);
  }

  Block* new_segment(PoolKind kind, StreamId stream, uint64_t bytes) {
    const uint64_t count = round_up(bytes, granularity()) / granularity();
    std::vector<ChunkRun> chunks;
    if (!create_chunks(count, chunks)) return nullptr;
    return install_segment(kind, stream, count, chunks);
  }

  // Maps the `count` chunks of `chunks` side by side into a new range;
  // returns its one free block.
  Block* install_segment(PoolKind kind, StreamId stream, uint64_t count,
                         const std::vector<ChunkRun>& chunks) {
    const uint64_t bytes = count * granularity();
    uintptr_t base = 0;
    try {
      base = reserve_range(bytes);
    } catch (...) {
      for (const ChunkRun& run : chunks) release_chunks(run);
      throw;
    }
    auto segment = std::make_unique<Segment>();
    segment->base = base;
    segment->virtual_bytes = bytes;
    segment->granules = count;
    map_runs(*segment, 0, chunks);
    segment->stream = stream;
    segment->pool = kind;
    Block* block = new_block();
    block->addr = base;
    block->size = bytes;
    block->segment = segment.get();
    block->stream = stream;
    block->pool = kind;
    segments_.emplace(base, std::move(segment));
    return block;
  }

  // Maps `chunks` side by side from granule `first` of the segment.
  void map_runs(Segment& segment, uint64_t first, const std::vector<ChunkRun>& chunks) {
    for (const ChunkRun& run : chunks) {
      map_chunks(segment.base + first * granularity(), run);
      segment.chunks.insert(first, run);
      first += run.count;
    }
  }

  // Note [Expandable segments]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~
  // As PyTorch's expandable_segments: one range per (stream, pool), reserved
  // at the device's capacity so it never needs to move, mapped only up to
  // what is in use. When no free block fits, map just enough chunks at the
  // end to extend the free tail block (or start a new one) to the request;
  // release_cache unmaps the whole chunks of a free tail. Deviation: PyTorch
  // grows the large pool in 20 MiB steps and also unmaps free chunks in the
  // middle of a segment; we grow by one granule (2 MiB) and trim the tail only.
  //
  // Note [Stitching]
  // ~~~~~~~~~~~~~~~~
  // GMLake (Guo et al., "GMLake: Efficient and Transparent GPU Memory
  // Defragmentation for Large-scale DNN Training with Virtual Memory
  // Stitching", ASPLOS'24) observes that a caching allocator grows (or fails)
  // while its cache holds enough free memory, only not in one piece; with
  // virtual memory the pieces' physical chunks can be mapped side by side
  // and used as one buffer.
  //
  // "stitching" separates where a block lives (address space) from what
  // backs it (chunks):
  //   1. Placement is expandable segments' (Note [Expandable segments]), for
  //      both pools: one range per (stream, pool), best fit inside it, the
  //      range's end grown when no free block is large enough. Live blocks
  //      pack densely, so few chunks are shared between live and free memory.
  //   2. A free block may span holes: whole granules inside it with no chunk
  //      mapped (Block::holes). Growing the end adds only holes, to the free
  //      tail.
  //   3. Stitching. A block handed out must be mapped where the request
  //      lies. Its holes are filled first with the mapped whole chunks inside
  //      the stream's other free blocks (either pool, most first), unmapped
  //      there - those blocks keep their place and size, with more holes -
  //      then with new chunks for the shortfall only. So reserved memory grows
  //      only when the stream's free whole chunks really are too few; Stats
  //      counts each allocation that moved chunks as a stitch.
  //   4. empty_cache and the out-of-memory retry release every mapped whole
  //      chunk inside a free block and give the holes at a free tail back as
  //      address space.
  // Since placement is the same, the ranges' ends follow expandable's mapped
  // ends, and peak reserved exceeds peak allocated only by the partial chunks
  // that free blocks share with live neighbours. Two simpler designs fell
  // short on the zoo's CNNs: stitching into fresh per-request ranges beside
  // PyTorch's segments scattered live blocks over many ranges (1.09-1.16x
  // peak allocated, like "caching"); cutting the moved chunks out of free
  // blocks (splitting them around a hole) lost the address-space reuse and
  // left two partial chunks per cut (up to 1.5%; 3.5% on the CNN-like test).
  //
  // How this differs from GMLake: GMLake maps the same physical chunks a
  // second time (its stitched sBlocks alias its primitive pBlocks), keeps
  // both views in its pools with state shared between them, stitches into a
  // new virtual range per request and caches stitched blocks, so that an
  // identical later request costs no mapping. Here chunks move (unmap, then
  // map), each chunk is mapped at exactly one place and a block keeps its
  // address for its life, so "every byte belongs to one block" stays a
  // simple invariant; the price is one unmap per donor run and one map per
  // run of chunks moved at each stitch, where GMLake's cache hit costs none. GMLake's
  // small requests stay with PyTorch's allocator; ours use the same scheme.
  // Chunks never move across streams, since a block freed on one stream may
  // still be used by work queued on it. A range is reserved at twice the
  // device's capacity; if its end is used up anyway (free address space may
  // exceed the chunks behind it), it is retired - its blocks still
  // serve best fit and it is unreserved once nothing in it is mapped - and
  // a fresh range grows.
  //
  // Note [Stitching granularity]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Blocks keep PyTorch's 512-byte rounding; only physical memory moves in
  // whole chunks. So a 1.5 MiB tensor holds 1.5 MiB, not a 2 MiB chunk, and
  // the partial chunk at either end of a free block stays mapped beside its
  // live neighbour. Blocks of both pools split whenever 512 bytes remain, as
  // with expandable segments, since a remainder's whole chunks are never
  // lost to fragmentation.
  Block* grow_range(PoolKind kind, StreamId stream, uint64_t size) {
    Segment* segment = growing_range(kind, stream, size);
    Block* tail = segment->tail;
    const uint64_t have = tail != nullptr && !tail->allocated ? tail->size : 0;
    const uint64_t count = round_up(size - have, granularity()) / granularity();
    if (segment->granules + count > segment->virtual_bytes / granularity()) {
      if (policy_ != BlockPolicy::stitching) return nullptr;
      if (!renew_range(*segment, size)) return nullptr;
      return grow_range(kind, stream, size);
    }
    const uintptr_t end = segment->base + segment->granules * granularity();
    if (policy_ == BlockPolicy::stitching) {
      // Only address space here: the granules join the free tail as holes,
      // which take_backed_block maps as the request needs them.
      hole_chunks_ += count;
    } else {
      std::vector<ChunkRun> chunks;
      if (!create_chunks(count, chunks)) return nullptr;
      map_runs(*segment, segment->granules, chunks);
    }
    segment->granules += count;
    const uint64_t holes = policy_ == BlockPolicy::stitching ? count : 0;
    if (have != 0) {
      pool(kind).erase(tail);
      tail->size += count * granularity();
      tail->holes += holes;
      return tail;
    }
    Block* block = new_block();
    block->addr = end;
    block->size = count * granularity();
    block->holes = holes;
    block->segment = segment;
    block->stream = stream;
    block->pool = kind;
    block->prev = segment->tail;
    if (block->prev != nullptr) block->prev->next = block;
    segment->tail = block;
    return block;
  }

  // The range (stream, kind) grows, reserved on first use.
  Segment* growing_range(PoolKind kind, StreamId stream, uint64_t size) {
    Segment*& segment = expandable_[{stream, kind}];
    if (segment != nullptr) return segment;
    const uint64_t virtual_bytes = growable_range_bytes(size);
    auto fresh = std::make_unique<Segment>();
    fresh->base = reserve_range(virtual_bytes);
    fresh->virtual_bytes = virtual_bytes;
    fresh->stream = stream;
    fresh->pool = kind;
    fresh->expandable = true;
    fresh->growing = true;
    segment = fresh.get();
    segments_.emplace(fresh->base, std::move(fresh));
    return segment;
  }

  // Note [Growable range size]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // "expandable" reserves the device's capacity (PyTorch's expandable
  // segments reserve the GPU's memory), since it never holds holes;
  // "stitching" twice that (or the request), since its free blocks may span
  // holes. Neither is ever above 2^62 bytes (kMaxRequestBytes, so the largest
  // request still fits one range): at twice a capacity above 2^61 the small
  // and the large pool's ranges alone would need more than the 64-bit address
  // space, which is what made every replay of a model that does not fit fail
  // with "sim: address space exhausted" - alloc-replay replays it again on a
  // 2^62-byte device to learn what it needs. A range holds at most 2^62
  // mapped bytes then ("stitching" retires a full range and starts another).
  uint64_t growable_range_bytes(uint64_t size) const {
    const uint64_t capacity = std::max(device_.capacity(), granularity());
    if (policy_ != BlockPolicy::stitching) return std::min(capacity, kMaxRequestBytes);
    return std::max(std::min(capacity, kMaxRequestBytes / 2) * 2, round_up(size, granularity()));
  }

  // Retires a growing range whose virtual end is used up, so that the next
  // growing_range reserves a fresh one; false when even a fresh one could
  // not hold `size` chunks of the device.
  bool renew_range(Segment& old, uint64_t size) {
    if (round_up(size, granularity()) / granularity() > device_.capacity() / granularity()) {
      return false;
    }
    old.growing = false;
    expandable_.erase({old.stream, old.pool});
    if (old.chunks.empty()) drop_empty(old);
    return true;
  }

  // "stitching": takes a free block (out of its pool) of at least `size`
  // bytes whose first `size` bytes are mapped, growing the range's address
  // space when no free block is large enough; null when the chunks for its
  // holes cannot be had (the block stays free).
  Block* take_backed_block(PoolKind kind, StreamId stream, uint64_t size) {
    Block* block = take_free_block(kind, stream, size);
    if (block == nullptr) block = grow_range(kind, stream, size);
    if (block == nullptr) return nullptr;
    if (block->holes == 0) return block;
    // The granules the handed-out part touches (all of the block when it
    // is not split); those it shares with the rest are mapped too.
    Segment& segment = *block->segment;
    const uint64_t bytes = splits(block, size) ? size : block->size;
    const uint64_t first = (block->addr - segment.base) / granularity();
    const uint64_t end =
        round_up(block->addr + bytes - segment.base, granularity()) / granularity();
    std::vector<GranuleSpan>& holes = scratch_holes_;
    segment.chunks.holes(first, end, holes);
    uint64_t needed = 0;
    for (const GranuleSpan& hole : holes) needed += hole.count;
    std::vector<ChunkRun>& chunks = scratch_moving_;
    chunks.clear();
    if (needed != 0 && !stitch_chunks(stream, block, needed, chunks)) {
      pool(kind).insert(block);
      return nullptr;
    }
    // The holes in order, each filled from the runs in order.
    size_t next = 0;
    uint64_t used = 0;  // chunks of chunks[next] already mapped
    for (GranuleSpan hole : holes) {
      while (hole.count != 0) {
        const ChunkRun run = chunks[next];
        const ChunkRun piece{run.first + used, std::min(hole.count, run.count - used)};
        map_chunks(segment.base + hole.start * granularity(), piece);
        segment.chunks.insert(hole.start, piece);
        hole.start += piece.count;
        hole.count -= piece.count;
        used += piece.count;
        if (used == run.count) {
          ++next;
          used = 0;
        }
      }
    }
    block->holes -= needed;
    hole_chunks_ -= needed;
    return block;
  }

  // Fills `chunks` with `count` chunks for the holes of free block `keep`:
  // first the mapped whole chunks inside the stream's other free blocks,
  // unmapped where they were; then the shortfall from the device. All or
  // nothing.
  bool stitch_chunks(StreamId stream, const Block* keep, uint64_t count,
                     std::vector<ChunkRun>& chunks) {
    std::vector<std::pair<uint64_t, Block*>> donors;
    uint64_t free_chunks = 0;
    for (const FreePool* free : {&small_, &large_}) {
      for (auto it = free->first_fit(stream, 0); it != free->blocks().end() && it->stream == stream;
           ++it) {
        if (it->block == keep) continue;
        const uint64_t mapped = inner_chunks(*it->block).count() - it->block->holes;
        if (mapped == 0) continue;
        donors.emplace_back(mapped, it->block);
        free_chunks += mapped;
      }
    }
    if (free_chunks + device_headroom_chunks() < count) return false;
    // Most chunks first: fewer donors, fewer unmap calls.
    std::sort(donors.begin(), donors.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second->addr < b.second->addr;
    });
    uint64_t moved = 0;
    for (const auto& [mapped, block] : donors) {
      if (moved == count) break;
      moved += unmap_inner(block, count - moved, &chunks);
    }
    if (moved != 0) count_stitch();
    if (!create_chunks(count - moved, chunks)) {
      for (const ChunkRun& run : chunks) release_chunks(run);
      return false;
    }
    return true;
  }

  // "stitching": unmaps up to `limit` mapped whole chunks inside a free
  // block (from its end), handing them to `into` or releasing them when
  // null; returns how many. The block keeps its place and size; they become
  // holes. A range left with nothing mapped holds only this block, which
  // goes with it.
  uint64_t unmap_inner(Block* block, uint64_t limit, std::vector<ChunkRun>* into) {
    Segment& segment = *block->segment;
    const ChunkRange inner = inner_chunks(*block);
    std::vector<GranuleSpan>& mapped = scratch_spans_;
    segment.chunks.mapped_spans(inner.first, inner.end, mapped);
    uint64_t taken = 0;
    for (auto span = mapped.rbegin(); span != mapped.rend() && taken < limit; ++span) {
      const uint64_t run = std::min(span->count, limit - taken);  // one unmap call
      take_chunks(segment, span->end() - run, run, into);
      taken += run;
    }
    block->holes += taken;
    hole_chunks_ += taken;
    if (segment.chunks.empty()) drop_empty(segment);
    return taken;
  }

  // A growable range with nothing mapped holds at most one block, free and
  // all holes (live blocks are mapped; free neighbours merge): it goes, and
  // the range restarts from its base if it is growing, else is unreserved.
  void drop_empty(Segment& segment) {
    if (Block* block = segment.tail; block != nullptr) {
      pool(block->pool).erase(block);
      hole_chunks_ -= block->holes;
      recycle(block);
    }
    segment.granules = 0;
    segment.tail = nullptr;
    if (segment.growing) return;
    unreserve_range(segment.base, segment.virtual_bytes);
    segments_.erase(segment.base);
  }

  // The granules of a block's segment that lie entirely inside the block.
  struct ChunkRange {
    uint64_t first = 0;
    uint64_t end = 0;
    uint64_t count() const { return end - first; }
  };
  ChunkRange inner_chunks(const Block& block) const {
    const uint64_t begin = block.addr - block.segment->base;
    const uint64_t first = round_up(begin, granularity()) / granularity();
    const uint64_t end = (begin + block.size) / granularity();
    return {first, std::max(first, end)};
  }

  // "caching": gives a free block that is a whole segment back to the device.
  void release_segment(Block* block) {
    Segment& segment = *block->segment;
    pool(block->pool).erase(block);
    take_chunks(segment, 0, segment.granules, nullptr);
    recycle(block);
    unreserve_range(segment.base, segment.virtual_bytes);
    segments_.erase(segment.base);
  }

  // ---- Giving memory back ----

  void release_cache() {
    std::vector<Block*> candidates;
    for (const FreePool* free : {&small_, &large_}) {
      for (const FreeKey& key : free->blocks()) {
        if (releasable(key.block)) candidates.push_back(key.block);
      }
    }
    for (Block* block : candidates) {
      if (policy_ == BlockPolicy::stitching) {
        unmap_inner(block, UINT64_MAX, nullptr);
      } else {
        release_segment(block);
      }
    }
    for (auto& [key, segment] : expandable_) {
      if (policy_ == BlockPolicy::expandable) trim_tail(*segment);
      if (policy_ == BlockPolicy::stitching) trim_holes(*segment);
    }
  }

  // Caching releases whole free segments only, as cudaFree frees a segment;
  // stitching gives back every whole chunk inside any free block.
  bool releasable(const Block* block) const {
    switch (policy_) {
      case BlockPolicy::caching:
        return block->prev == nullptr && block->next == nullptr;
      case BlockPolicy::expandable:
        return false;
      case BlockPolicy::stitching:
        return inner_chunks(*block).count() != block->holes;
    }
    return false;
  }

  // "stitching": gives the holes at the end of a free tail back as address
  // space, so that the range's end does not creep on.
  void trim_holes(Segment& segment) {
    Block* tail = segment.tail;
    if (tail == nullptr || tail->allocated) return;
    const uint64_t end = segment.granules;
    const uint64_t first = round_up(tail->addr - segment.base, granularity()) / granularity();
    const uint64_t cut = segment.chunks.mapped_end(first, end);
    if (cut == end) return;
    tail->holes -= end - cut;
    hole_chunks_ -= end - cut;
    end_range_at(segment, cut);
  }

  // Moves a growable range's end back to granule `end`, inside its free
  // tail (nothing past `end` may be mapped); the tail shrinks or goes.
  void end_range_at(Segment& segment, uint64_t end) {
    Block* tail = segment.tail;
    pool(tail->pool).erase(tail);
    segment.granules = end;
    tail->size = segment.base + end * granularity() - tail->addr;
    if (tail->size != 0) {
      pool(tail->pool).insert(tail);
      return;
    }
    segment.tail = tail->prev;
    if (tail->prev != nullptr) tail->prev->next = nullptr;
    recycle(tail);
  }

  // Unmaps the `count` chunks from granule `first` of `segment` (one unmap
  // call) and hands them to `into` (or releases them to the device when null).
  void take_chunks(Segment& segment, uint64_t first, uint64_t count, std::vector<ChunkRun>* into) {
    unmap_range(segment.base + first * granularity(), count * granularity());
    std::vector<ChunkRun>& released = scratch_released_;
    released.clear();
    segment.chunks.erase(first, first + count, into != nullptr ? *into : released);
    for (const ChunkRun& run : released) release_chunks(run);
  }

  void trim_tail(Segment& segment) {
    Block* tail = segment.tail;
    if (tail == nullptr || tail->allocated) return;
    // "expandable" ranges hold no holes: the mapped chunks are a prefix.
    const uint64_t first = round_up(tail->addr - segment.base, granularity()) / granularity();
    const uint64_t mapped = segment.chunks.mapped();
    if (first >= mapped) return;
    take_chunks(segment, first, mapped - first, nullptr);
    end_range_at(segment, first);
  }

  // Destructor: everything goes, live or not, one unmap per run of mapped
  // granules.
  void release_everything(Segment& segment) {
    std::vector<GranuleSpan> spans;
    segment.chunks.mapped_spans(0, segment.granules, spans);
    for (const GranuleSpan& span : spans) {
      unmap_range(segment.base + span.start * granularity(), span.count * granularity());
    }
    std::vector<ChunkRun> chunks;
    segment.chunks.clear(chunks);
    for (const ChunkRun& run : chunks) release_chunks(run);
    unreserve_range(segment.base, segment.virtual_bytes);
  }

  // ---- Bookkeeping ----

  Block* new_block() {
    if (spare_blocks_.empty()) return &block_storage_.emplace_back();
    Block* block = spare_blocks_.back();
    spare_blocks_.pop_back();
    *block = Block{};
    return block;
  }
  void recycle(Block* block) { spare_blocks_.push_back(block); }

  std::string not_live_message(uintptr_t address) const {
    const std::string prefix = std::string(policy()) + ": free of " + hex_address(address);
    auto segment = segments_.upper_bound(address);
    if (segment != segments_.begin() &&
        (--segment, address < segment->first + segment->second->virtual_bytes)) {
      return prefix + ", which is not a live allocation (double free or interior pointer)";
    }
    return prefix + ", which this allocator did not allocate (foreign pointer)";
  }

  std::vector<const Block*> all_blocks() const {
    std::vector<const Block*> blocks;
    live_.for_each([&](uintptr_t, Block* block) { blocks.push_back(block); });
    for (const FreePool* free : {&small_, &large_}) {
      for (const FreeKey& key : free->blocks()) blocks.push_back(key.block);
    }
    std::sort(blocks.begin(), blocks.end(),
              [](const Block* a, const Block* b) { return a->addr < b->addr; });
    return blocks;
  }

  std::vector<SnapshotSegment> do_snapshot() const override {
    std::vector<SnapshotSegment> out;
    std::unordered_map<const Segment*, size_t> index;
    for (const auto& [base, segment] : segments_) {
      index[segment.get()] = out.size();
      out.push_back({base,
                     segment->virtual_bytes,
                     segment->chunks.mapped() * granularity(),
                     segment->stream,
                     segment->pool,
                     {}});
    }
    for (const Block* block : all_blocks()) {
      out[index.at(block->segment)].blocks.push_back(
          {block->addr, block->size, block->requested, block->allocated});
    }
    return out;
  }

  void do_audit() const override {
    auto fail = [&](const std::string& what, const Block* block) {
      throw Error(std::string(policy()) + ": audit: " + what +
                  (block != nullptr ? " (block at " + hex_address(block->addr) + ")" : ""));
    };
    uint64_t allocated = 0;
    uint64_t live_count = 0;
    std::unordered_map<const Segment*, uint64_t> covered;
    uint64_t all_holes = 0;
    const Block* previous = nullptr;
    for (const Block* block : all_blocks()) {
      const Segment* segment = block->segment;
      if (segments_.count(segment->base) == 0) fail("block of a released segment", block);
      if (block->size == 0 || block->addr < segment->base ||
          block->addr + block->size > segment->base + segment->virtual_bytes) {
        fail("block outside its segment", block);
      }
      if (previous != nullptr && previous->addr + previous->size > block->addr) {
        fail("blocks overlap", block);
      }
      previous = block;
      const uint64_t first = (block->addr - segment->base) / granularity();
      const uint64_t end = (block->addr + block->size - 1 - segment->base) / granularity() + 1;
      if (end > segment->granules) fail("block past its segment's end", block);
      const uint64_t holes = end - first - segment->chunks.mapped_in(first, end);
      // Only a free block may span a hole, and only whole granules of it.
      const ChunkRange inner = inner_chunks(*block);
      if (holes != 0 &&
          (block->allocated ||
           holes != inner.count() - segment->chunks.mapped_in(inner.first, inner.end))) {
        fail("block over an unmapped granule", block);
      }
      if (holes != block->holes) fail("hole count", block);
      all_holes += holes;
      if (block->next != nullptr &&
          (block->next->prev != block || block->next->addr != block->addr + block->size)) {
        fail("broken next link", block);
      }
      if (block->prev != nullptr && block->prev->next != block) fail("broken prev link", block);
      if (block->allocated) {
        allocated += block->size;
        ++live_count;
        if (live_.find(block->addr) == nullptr) fail("allocated block not in the live map", block);
      } else {
        if (block->next != nullptr && !block->next->allocated) fail("unmerged free blocks", block);
      }
      covered[segment] += block->size;
    }
    for (const FreePool* free : {&small_, &large_}) {
      for (auto it = free->blocks().begin(); it != free->blocks().end(); ++it) {
        const Block* block = it->block;
        if (it->stream != block->stream || it->size != block->size || it->addr != block->addr ||
            block->in_pool != it) {
          fail("stale key in a free pool", block);
        }
        if (block->allocated) fail("allocated block in a free pool", block);
        if (&pool(block->pool) != free) fail("free block in the wrong pool", block);
      }
    }
    uint64_t mapped = 0;
    for (const auto& [base, segment] : segments_) {
      mapped += segment->chunks.mapped() * granularity();
      const auto it = covered.find(segment.get());
      if ((it == covered.end() ? 0 : it->second) != segment->granules * granularity()) {
        fail("blocks do not tile the granules of segment " + hex_address(base), nullptr);
      }
      if (!segment->chunks.consistent() || segment->chunks.end() > segment->granules) {
        fail("chunk runs of segment " + hex_address(base), nullptr);
      }
      if (segment->expandable) {
        const uintptr_t end = base + segment->granules * granularity();
        if (segment->tail != nullptr && (segment->tail->segment != segment.get() ||
                                         segment->tail->addr + segment->tail->size != end)) {
          fail("growable tail does not end at the range's end", segment->tail);
        }
        if (segment->tail == nullptr && segment->granules != 0 &&
            segment->chunks.end() == segment->granules) {
          fail("growable range " + hex_address(base) + " has a mapped end but no tail", nullptr);
        }
        if (segment->growing !=
            (expandable_.count({segment->stream, segment->pool}) != 0 &&
             expandable_.at({segment->stream, segment->pool}) == segment.get())) {
          fail("growing flag of range " + hex_address(base), nullptr);
        }
      }
    }
    const Stats& stats = current_stats();
    if (live_count != live_.size() || live_count != stats.live_allocations) {
      fail("live allocation count", nullptr);
    }
    if (allocated != stats.allocated_bytes) fail("allocated bytes", nullptr);
    if (mapped != stats.reserved_bytes) fail("reserved bytes != mapped chunk bytes", nullptr);
    if (all_holes != hole_chunks_) fail("holes of the free blocks", nullptr);
  }

  const FreePool& pool(PoolKind kind) const { return kind == PoolKind::small ? small_ : large_; }

  BlockPolicy policy_;
  uint64_t max_split_;
  FreePool small_;
  FreePool large_;
  LiveMap<Block*> live_;
  std::map<uintptr_t, std::unique_ptr<Segment>> segments_;
  std::map<std::pair<StreamId, PoolKind>, Segment*> expandable_;
  uint64_t hole_chunks_ = 0;  // sum of the free blocks' holes
  // Working space of take_backed_block, unmap_inner and take_chunks, kept
  // for its capacity so that stitching does not allocate.
  std::vector<GranuleSpan> scratch_holes_, scratch_spans_;
  std::vector<ChunkRun> scratch_moving_, scratch_released_;
  std::deque<Block> block_storage_;
  std::vector<Block*> spare_blocks_;
};

}  // namespace

std::unique_ptr<Allocator> make_block_allocator(BlockPolicy policy, Device& device,
                                                const Options& options) {
  if (options.max_split_size < kLargeBuffer) {
    throw Error("max_split_size of " + std::to_string(options.max_split_size) +
                " bytes is below PyTorch's minimum of 20 MiB");
  }
  return std::make_unique<BlockAllocator>(policy, device, options);
}

}  // namespace memwall::alloc
