// The alloc module's device interface: CUDA's virtual memory management model
// (reserve an address range, create physical chunks, map a chunk at an offset
// of a range, unmap, release) cut down to what the policies need.
//
// Every physical chunk is exactly one granule (granularity() bytes, a power
// of two, 2 MiB by default), so any free chunk can back any granule of any
// range: that is what lets the stitching policy (Note [Stitching]) build one
// contiguous buffer from chunks freed at unrelated addresses.
//
// Note [Chunk runs]
// ~~~~~~~~~~~~~~~~~
// Chunks are created, mapped and released in runs: `count` chunks with the
// consecutive handles first .. first + count - 1, mapped side by side. A
// buffer of a million granules is then one call and one record, not a
// million, on the simulated device (whose bookkeeping would otherwise grow
// with the bytes it pretends to hold) and in the allocators. The chunk stays
// one granule, so stitching can still move any single chunk; a run is only
// shorthand for its chunks. Backends hand out the longest runs they can: the
// simulated device and HostVMM number chunks themselves (HostVMM maps a run of
// consecutive memfd slots with one mmap); CUDA's handles are opaque, so its
// runs are single chunks (cuMemMap maps a handle whole, from offset 0).
// Chunks of many granules (cuMemCreate takes any multiple of the granularity)
// were the other way to the same end, but a CUDA allocation is mapped and
// unmapped whole, so such a chunk could not lend part of itself to a hole:
// stitching's placements and every policy's statistics would have changed.
//
// Backends:
//   make_host_vmm   real host memory: memfd chunks mapped into PROT_NONE ranges
//                   (Note [HostVMM]); pointers are usable on the CPU.
//   make_sim_device bookkeeping only, no memory behind the addresses; for
//                   replays of models far larger than this machine.
//   make_cuda_vmm   CUDA's cuMem* driver API, resolved at run time (Note [CUDA
//                   entry points]); returns null with a reason when no driver
//                   or GPU is present.
//
// A Device is safe to call from several threads (each backend serializes its
// own bookkeeping), but the allocators call it only under their own lock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memwall::alloc {

using ChunkHandle = uint64_t;

// The chunks first, first + 1, ..., first + count - 1 (Note [Chunk runs]).
struct ChunkRun {
  ChunkHandle first = 0;
  uint64_t count = 0;
  friend bool operator==(const ChunkRun&, const ChunkRun&) = default;
};

inline constexpr uint64_t kDefaultGranularity = uint64_t{2} << 20;  // 2 MiB

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string_view name() const = 0;
  // Bytes per physical chunk and the alignment of every map.
  virtual uint64_t granularity() const = 0;
  // Bytes of physical memory the device will hand out (a multiple of
  // granularity()); create_chunks fails beyond it.
  virtual uint64_t capacity() const = 0;
  virtual uint64_t chunks_in_use() const = 0;
  // Whether the CPU can read and write mapped addresses.
  virtual bool host_accessible() const = 0;

  // A fresh range of `bytes` (a multiple of granularity()) with nothing
  // mapped; throws Error when the address space is exhausted.
  virtual uintptr_t reserve(uint64_t bytes) = 0;
  virtual void unreserve(uintptr_t base, uint64_t bytes) = 0;
  // `count` granules of physical memory, appended to `runs` (their counts
  // add up to `count`); false, with nothing created, when that would pass
  // capacity().
  virtual bool create_chunks(uint64_t count, std::vector<ChunkRun>& runs) = 0;
  // The run's chunks must exist and be unmapped everywhere.
  virtual void release_chunks(ChunkRun run) = 0;
  // Map the run's chunks read/write side by side from `address`
  // (granule-aligned; the run.count granules there reserved and unmapped).
  virtual void map_chunks(uintptr_t address, ChunkRun run) = 0;
  // Unmap [address, address + bytes), granule-aligned and mapped (by any
  // number of runs).
  virtual void unmap(uintptr_t address, uint64_t bytes) = 0;

  // One chunk at a time: nullopt when capacity() is reached.
  std::optional<ChunkHandle> create_chunk() {
    std::vector<ChunkRun> runs;
    if (!create_chunks(1, runs)) return std::nullopt;
    return runs.front().first;
  }
  void release_chunk(ChunkHandle chunk) { release_chunks({chunk, 1}); }
  void map(uintptr_t address, ChunkHandle chunk) { map_chunks(address, {chunk, 1}); }
};

// Host memory through memfd + mmap. `capacity` is rounded down to the
// granularity; `granularity` must be a power of two and a multiple of the
// page size. `populate`: map with the page tables filled (Note [Populated
// mappings] in host_vmm.cc), as the executor's emulated device does. Throws
// Error when the kernel refuses (no memfd_create).
std::unique_ptr<Device> make_host_vmm(uint64_t capacity, uint64_t granularity = kDefaultGranularity,
                                      bool populate = false);

// Addresses without memory, for replays; checks map/unmap misuse like a real
// device would (mapping over a mapping, unmapping a hole, releasing a mapped chunk).
std::unique_ptr<Device> make_sim_device(uint64_t capacity,
                                        uint64_t granularity = kDefaultGranularity);

// CUDA VMM on device `device_index`. `capacity` 0 means the GPU's total memory.
// Returns null and sets *why_unavailable when the toolkit was absent at build
// time, libcuda.so.1 cannot be loaded, or there is no such GPU.
std::unique_ptr<Device> make_cuda_vmm(int device_index, uint64_t capacity = 0,
                                      std::string* why_unavailable = nullptr);

// True when this build contains the CUDA backend (toolkit found by CMake).
bool cuda_vmm_compiled();

}  // namespace memwall::alloc
