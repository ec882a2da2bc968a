// The alloc module's device interface: CUDA's virtual memory management model
// (reserve an address range, create physical chunks, map a chunk at an offset
// of a range, unmap, release) cut down to what the policies need.
//
// Every physical chunk is exactly one granule (granularity() bytes, a power
// of two, 2 MiB by default), so any free chunk can back any granule of any
// range: that is what lets the stitching policy (Note [Stitching]) build one
// contiguous buffer from chunks freed at unrelated addresses.
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

namespace memwall::alloc {

using ChunkHandle = uint64_t;

inline constexpr uint64_t kDefaultGranularity = uint64_t{2} << 20;  // 2 MiB

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string_view name() const = 0;
  // Bytes per physical chunk and the alignment of every map.
  virtual uint64_t granularity() const = 0;
  // Bytes of physical memory the device will hand out (a multiple of
  // granularity()); create_chunk fails beyond it.
  virtual uint64_t capacity() const = 0;
  virtual uint64_t chunks_in_use() const = 0;
  // Whether the CPU can read and write mapped addresses.
  virtual bool host_accessible() const = 0;

  // A fresh range of `bytes` (a multiple of granularity()) with nothing
  // mapped; throws Error when the address space is exhausted.
  virtual uintptr_t reserve(uint64_t bytes) = 0;
  virtual void unreserve(uintptr_t base, uint64_t bytes) = 0;
  // One granule of physical memory, or nullopt when capacity() is reached.
  virtual std::optional<ChunkHandle> create_chunk() = 0;
  // The chunk must be unmapped everywhere.
  virtual void release_chunk(ChunkHandle chunk) = 0;
  // Map `chunk` read/write at `address` (granule-aligned, inside a reserved
  // range, currently unmapped).
  virtual void map(uintptr_t address, ChunkHandle chunk) = 0;
  // Unmap [address, address + bytes), granule-aligned and mapped.
  virtual void unmap(uintptr_t address, uint64_t bytes) = 0;
};

// Host memory through memfd + mmap. `capacity` is rounded down to the
// granularity; `granularity` must be a power of two and a multiple of the
// page size. Throws Error when the kernel refuses (no memfd_create).
std::unique_ptr<Device> make_host_vmm(uint64_t capacity,
                                      uint64_t granularity = kDefaultGranularity);

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
