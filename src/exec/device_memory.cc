#include "device_memory.h"

#include "exec_error.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace memwall::exec {

// Note [Scratch offsets]
// ~~~~~~~~~~~~~~~~~~~~~~
// A laid-out plan gives an op's scratch one range, its workspace span: the
// most scratch the kernel holds at once, by the trace's rules. Placed first
// fit in the order the kernel allocates, scratch can need more than that:
// ResNet-18 b16 at 128x128, layer3.0.downsample's convolution_backward
// makes a blocked output gradient (1 MiB) and weight, then the blocked
// input gradient (2 MiB) above them, frees the first two and makes a
// strided copy of the input gradient's size (2 MiB): the 4 MiB span has
// 4 MiB free in two ranges too short for it, and memwall's remat plan at
// 90% stopped there. The rules know each scratch buffer's life, so the
// tracer packs them in the span (memwall.tracer.scratch.pack, Op::scratch_at:
// longest-lived first) and the executor puts the k-th scratch of a size
// where the rules put theirs, when that range is free; scratch the rules
// leave out (oneDNN's scratchpads) goes as before, and while such scratch
// is live the rules' offsets are not used: where they are not this CPU's
// kernels (a U-Net's transposed convolution_backward on an AVX-512 EPYC
// made a 4.5 MiB buffer the rules do not have, first), first fit in the
// order allocations come does better than offsets made for other sizes.

// Note [Raw deleter]: some kernels (oneDNN's, through raw_allocate) need a
// DataPtr whose context is its data pointer and a plain deleter function, so
// the deleter finds the allocator through one process-wide pointer (one
// executor runs at a time) and the block's size through a map.
std::atomic<DeviceMemory*> g_current{nullptr};

DeviceMemory::DeviceMemory(alloc::Allocator& allocator, uint64_t budget)
    : allocator_(allocator), budget_(budget), host_(c10::GetCPUAllocator()) {
  DeviceMemory* expected = nullptr;
  if (!g_current.compare_exchange_strong(expected, this)) {
    bad_input(
        "another executor (a memwall.Trainer's session) holds the device in this process: "
        "close it first (Trainer.close())");
  }
}

DeviceMemory::~DeviceMemory() {
  for (const auto& [bytes, ptr] : host_cache_) host_->raw_deallocate(ptr);
  g_current.store(nullptr);
}

// Note [Host step memory]: a CPU step's kernels allocate temporaries the
// size of the parameter (torch's Adam: sqrt, div...). PyTorch's CPU
// allocator gives blocks that large fresh mmaps, so every step faulted in
// every page again: GPT-2 small's CPU steps ran 3.3x slower than the same
// ops on the emulated device, whose allocator keeps its memory. Blocks freed
// here are kept by size for the next request of that size (the steps ask
// the same sizes every iteration) and returned when the run ends.
c10::DataPtr DeviceMemory::allocate_host(size_t bytes) {
  const c10::Device device(c10::kCPU);
  if (bytes == 0) return {nullptr, nullptr, &release_host, device};
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = host_cache_.find(bytes); it != host_cache_.end()) {
      ptr = it->second;
      host_cache_.erase(it);
    }
  }
  if (ptr == nullptr) ptr = host_->raw_allocate(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  host_blocks_[ptr] = bytes;
  return {ptr, ptr, &release_host, device};
}

void DeviceMemory::release_host(void* ptr) {
  if (ptr == nullptr) return;
  DeviceMemory* self = g_current.load();
  std::lock_guard<std::mutex> lock(self->mutex_);
  const auto it = self->host_blocks_.find(ptr);
  if (it == self->host_blocks_.end()) return;
  self->host_cache_.emplace(it->second, ptr);
  self->host_blocks_.erase(it);
}

c10::DataPtr DeviceMemory::allocate(size_t bytes) {
  const c10::Device device(c10::kCPU);
  if (host_mode_.load()) return allocate_host(bytes);
  if (bytes == 0) return {nullptr, nullptr, &release, device};
  if (arena_ != nullptr) {
    std::optional<void*> p;
    std::lock_guard<std::mutex> lock(mutex_);
    for (Expected& e : expected_) {
      if (e.taken || e.output.bytes != bytes) continue;
      const ScratchFirst& scratch = e.output.scratch;
      // Note [Scratch before its output]; the rules' count only while they
      // are this call's (Note [Scratch offsets]).
      if (e.skipped < scratch.skip && (!scratch.from_rules || unknown_live_.empty())) {
        if (e.skipped++ == 0 && scratch.aside && clear_of_outputs(*scratch.aside, bytes)) {
          p = arena_->place_at(*scratch.aside, bytes);
        }
        break;
      }
      p = arena_->place_at(e.output.offset, bytes);
      if (p) {
        e.taken = true;
        break;
      }
    }
    // Note [Scratch in the workspace]: a kernel's scratch goes to its op's
    // workspace (a range of the op's span, Note [Workspace span]), aligned as PyTorch's CPU
    // allocator aligns (64 bytes) when the workspace is, else packed, else to the lowest gap clear
    // of the outputs. A small one (under kSmallScratch: a reordered bias or weight, which the model
    // of kernels' scratch leaves out) tries that gap first, so that it does not take the start of a
    // workspace that a large one fills to the byte.
    const auto [ws, ws_bytes] = workspace_;
    // Note [Scratch offsets]: where the trace's rules put the next scratch of
    // this size in the workspace, unless scratch they do not know is live
    // there now (the rules are not this CPU's kernels for this op: its
    // first fit then goes on as without them).
    const bool output = p.has_value();
    bool known = false;
    for (size_t i = 0; !p && ws_bytes > 0 && i < scratch_at_.size(); ++i) {
      const auto [rule_bytes, at] = scratch_at_[i];
      if (rule_bytes != bytes || scratch_used_[i]) continue;
      scratch_used_[i] = true;
      known = true;
      if (unknown_live_.empty() && at <= ws_bytes && bytes <= ws_bytes - at) {
        p = arena_->place_at(ws + at, bytes);
      }
      break;
    }
    if (!p && ws_bytes > 0 && bytes < kSmallScratch) {
      p = arena_->place_anywhere(bytes, reserved_ranges(/*with_workspace=*/true));
    }
    // A workspace the layout could not align (1-byte layouts) packs unaligned.
    const uint64_t align = ws % 64 == 0 ? 64 : 1;
    if (!p && ws_bytes > 0) p = arena_->place_within(ws, ws + ws_bytes, bytes, align);
    if (!p && ws_bytes > 0 && align > 1) p = arena_->place_within(ws, ws + ws_bytes, bytes, 1);
    if (!p) p = arena_->place_anywhere(bytes, reserved_ranges(/*with_workspace=*/false));
    // Note [Scratch before its output]: when what was learnt or the trace
    // said leaves no room (two of the output's size came first and the
    // first went to where the output had landed, which the second needs;
    // scratch the rules leave out, such as oneDNN's scratchpad of a strided
    // convolution_backward on AVX-512, 159,792 B for ResNet-18's layer4),
    // an allocation borrows the range of an output not made yet, its own
    // size's first, as in the step that learnt it. The output takes it when
    // it comes if the borrower is gone by then, else lands elsewhere and is
    // moved. A last resort: without it the run stops here.
    for (const bool same_size : {true, false}) {
      for (const Expected& e : expected_) {
        if (p) break;
        if (e.taken || (e.output.bytes == bytes) != same_size || e.output.bytes < bytes) continue;
        p = arena_->place_within(e.output.offset, e.output.offset + e.output.bytes, bytes, 1);
      }
    }
    if (!p) {
      TORCH_CHECK_WITH(OutOfMemoryError, false,
                       fmt::format("no room in the plan's arena of {} bytes for {} bytes with {} "
                                   "live (Note [Plan offsets at run time])",
                                   arena_->size(), bytes, live_));
    }
    note_allocated(*p, bytes, bytes);
    since_expect_.emplace_back(*p, bytes);
    if (!output && !known && !scratch_at_.empty()) unknown_live_.push_back(*p);
    return {*p, *p, &release, device};
  }
  const alloc::Allocation a = allocator_.allocate(bytes);
  if (!a) {
    const alloc::Stats s = allocator_.stats();
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     fmt::format("out of device memory: {} bytes asked with {} live ({} held by "
                                 "the allocator) of the budget {}",
                                 bytes, live_bytes(), s.reserved_bytes, budget_));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    note_allocated(a.ptr, bytes, a.block_bytes);
  }
  return {a.ptr, a.ptr, &release, device};
}

void DeviceMemory::note_allocated(void* ptr, uint64_t bytes, uint64_t allocated) {
  if (log_ != nullptr)
    std::fprintf(log_, "+ %p %llu\n", ptr, static_cast<unsigned long long>(bytes));
  blocks_[ptr] = {bytes, allocated};
  live_ += bytes;
  live_allocated_ += allocated;
  peak_ = std::max(peak_, live_);
  peak_allocated_ = std::max(peak_allocated_, live_allocated_);
}

void DeviceMemory::use_arena(uint64_t bytes) { arena_ = std::make_unique<Arena>(bytes); }

void DeviceMemory::expect(std::vector<ExpectedOutput> outputs,
                          std::pair<uint64_t, uint64_t> workspace,
                          std::span<const uint64_t> scratch_at) {
  std::lock_guard<std::mutex> lock(mutex_);
  workspace_ = workspace;
  expected_.clear();
  since_expect_.clear();
  for (const ExpectedOutput& o : outputs) expected_.push_back({o, 0, false});
  scratch_at_.clear();
  for (size_t i = 0; i + 1 < scratch_at.size(); i += 2) {
    scratch_at_.emplace_back(scratch_at[i], scratch_at[i + 1]);
  }
  scratch_used_.assign(scratch_at_.size(), false);
  unknown_live_.clear();
}

void DeviceMemory::end_call() {
  std::lock_guard<std::mutex> lock(mutex_);
  workspace_ = {0, 0};
  expected_.clear();
  scratch_at_.clear();
  scratch_used_.clear();
  unknown_live_.clear();
}

bool DeviceMemory::clear_of_outputs(uint64_t offset, uint64_t bytes) const {
  return std::none_of(expected_.begin(), expected_.end(), [&](const Expected& e) {
    return offset < e.output.offset + e.output.bytes && e.output.offset < offset + bytes;
  });
}

std::optional<DeviceMemory::ScratchFirst> DeviceMemory::scratch_before(const void* ptr,
                                                                       uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint32_t before = 0;
  for (const auto& [at, size] : since_expect_) {
    if (size != bytes) continue;
    if (at == ptr) {
      if (arena_ == nullptr || !arena_->owns(ptr)) return ScratchFirst{before, std::nullopt};
      return ScratchFirst{before, arena_->offset_of(ptr)};
    }
    ++before;
  }
  return std::nullopt;
}

bool DeviceMemory::range_free(uint64_t offset, uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return arena_ != nullptr && arena_->free_range(offset, bytes);
}

c10::DataPtr DeviceMemory::allocate_at(uint64_t offset, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::optional<void*> p = arena_->place_at(offset, bytes);
  if (!p) {
    TORCH_CHECK_WITH(
        OutOfMemoryError, false,
        fmt::format("offset {} of {} bytes is not free in the plan's arena of {} "
                    "bytes: {} live there (Note [Plan offsets at run time])",
                    offset, bytes, arena_->size(), arena_->overlapping(offset, bytes)));
  }
  note_allocated(*p, bytes, bytes);
  return {*p, *p, &release, c10::Device(c10::kCPU)};
}

std::vector<std::pair<uint64_t, uint64_t>> DeviceMemory::reserved_ranges(
    bool with_workspace) const {
  std::vector<std::pair<uint64_t, uint64_t>> reserved;
  for (const Expected& e : expected_) reserved.emplace_back(e.output.offset, e.output.bytes);
  if (with_workspace && workspace_.second > 0) reserved.push_back(workspace_);
  return reserved;
}

c10::DataPtr DeviceMemory::allocate_aside(size_t bytes) {
  if (arena_ == nullptr) return allocate(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  const std::optional<void*> p =
      arena_->place_anywhere(bytes, reserved_ranges(/*with_workspace=*/true));
  if (!p) {
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     fmt::format("no room in the plan's arena of {} bytes for {} bytes clear of "
                                 "the op's outputs (Note [Plan offsets at run time])",
                                 arena_->size(), bytes));
  }
  note_allocated(*p, bytes, bytes);
  return {*p, *p, &release, c10::Device(c10::kCPU)};
}

uint64_t DeviceMemory::arena_high_water() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return arena_ == nullptr ? 0 : arena_->high_water();
}

void DeviceMemory::release(void* ptr) {
  if (ptr == nullptr) return;
  DeviceMemory* self = g_current.load();
  Sizes sizes;
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    const auto it = self->blocks_.find(ptr);
    if (it == self->blocks_.end()) return;  // not ours: nothing to give back
    sizes = it->second;
    self->blocks_.erase(it);
    if (self->log_ != nullptr) std::fprintf(self->log_, "- %p\n", ptr);
    self->live_ -= sizes.bytes;
    self->live_allocated_ -= sizes.allocated;
    std::erase(self->unknown_live_, ptr);  // Note [Scratch offsets]
    if (self->arena_ != nullptr && self->arena_->owns(ptr)) {
      // A scratch buffer that sat at an output's offset frees it again.
      const uint64_t offset = self->arena_->offset_of(ptr);
      for (Expected& e : self->expected_) {
        if (e.taken && e.output.offset == offset) e.taken = false;
      }
      self->arena_->release(ptr);
      return;
    }
  }
  self->allocator_.free(ptr);
}

void DeviceMemory::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

uint64_t DeviceMemory::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}
uint64_t DeviceMemory::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}
uint64_t DeviceMemory::peak_allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_allocated_;
}
void DeviceMemory::merge_peak(uint64_t peak) {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = std::max(peak_, peak);
}

void DeviceMemory::log_allocations(std::FILE* log) {
  std::lock_guard<std::mutex> lock(mutex_);
  log_ = log;
}

void DeviceMemory::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = live_;
  peak_allocated_ = live_allocated_;
  if (arena_ != nullptr) arena_->reset_high_water();
}

// c10 keeps the allocator of the highest priority set so far; memwall's
// wins for the run, then the previous one is set back at the same priority.
constexpr uint8_t kPriority = 200;

DeviceMemory::Installed::Installed(DeviceMemory* memory)
    : previous_(memory != nullptr ? c10::GetCPUAllocator() : nullptr) {
  if (memory != nullptr) c10::SetCPUAllocator(memory, kPriority);
}
DeviceMemory::Installed::~Installed() {
  if (previous_ != nullptr) c10::SetCPUAllocator(previous_, kPriority);
}

}  // namespace memwall::exec
