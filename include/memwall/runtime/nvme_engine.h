// The NVMe swap engine (docs/nvme.md): tensors written to and read back from
// swap files striped over one or more directories, through io_uring with
// O_DIRECT files, registered files and registered page-aligned bounce
// buffers. Any length from 1 byte up: the last block is padded in the
// bounce buffer and the true length recorded (DeepSpeed issue #1070 lost the
// tail of tensors whose size was not a multiple of 512). Every block carries
// a CRC32C, checked on every read; every completion's result is checked,
// errors retried where that can help and otherwise reported in one line
// naming the file, offset and length.
//
// Threading contract: every public member may be called from any thread.
// One mutex guards the ring, the slots, the CRC table and the extent
// allocator; wait() drives the ring (submits, reaps completions of any
// request) while holding it, so one thread at a time makes progress and
// the others block on the mutex. Buffers given to write_async/read_async
// must stay valid, and a destination untouched, until wait() returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "memwall/runtime/bounce_buffer.h"

namespace memwall::runtime {

// Every error of the engine: one line, naming what failed and where.
class NvmeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// O_DIRECT's alignment of offsets, lengths and buffers: blocks are
// multiples of it.
inline constexpr uint64_t kNvmeSector = 4096;

struct NvmeOptions {
  // Swap directories: files_per_dir files in each, blocks striped round-robin
  // over all files (one directory per drive to stripe over drives).
  std::vector<std::string> dirs;
  unsigned files_per_dir = 1;
  // Bytes over all files, rounded up to whole blocks in every file.
  uint64_t capacity = 0;
  // Unit of I/O and of the CRC table; a multiple of 4096.
  uint64_t block_size = 1 << 20;
  // Block operations in flight (and bounce buffers); 1..4096.
  unsigned queue_depth = 16;
  // O_DIRECT when the filesystem allows it (stats().buffered says if not).
  bool direct = true;
  // Retries of one block operation after EIO/EINTR/EAGAIN, a short
  // completion that made no progress, or a CRC mismatch.
  int max_retries = 3;
  // Fault spec (nvme_faults.h); nullopt: the MEMWALL_NVME_FAULTS variable.
  std::optional<std::string> faults;
  // Bounce buffer memory; null: anonymous mmap.
  std::shared_ptr<BounceAllocator> bounce_allocator;
};

// A contiguous run of blocks [first_block, first_block + blocks).
struct Extent {
  uint64_t first_block = 0;
  uint64_t blocks = 0;
};

struct NvmeStats {
  uint64_t bytes_written = 0;  // caller bytes, not padding
  uint64_t bytes_read = 0;
  uint64_t operations = 0;  // block operations submitted, retries included
  uint64_t retries = 0;
  uint64_t short_completions = 0;
  uint64_t crc_mismatches = 0;
  uint64_t faults_injected = 0;
  bool buffered = false;            // some file without O_DIRECT (see warning)
  bool registered_buffers = false;  // IORING_OP_{READ,WRITE}_FIXED in use
  bool registered_files = false;
  std::string warning;  // why buffered or unregistered, empty otherwise
  // For the user, once: the stale swap files of dead processes removed at
  // start (Note [Stale swap files] in swap_dir.cc), empty when none.
  std::string note;
};

struct NvmeRequest;  // nvme_engine.cc

// A submitted write or read; wait() on it once.
class NvmeHandle {
 public:
  NvmeHandle() = default;
  bool valid() const { return request_ != nullptr; }

 private:
  friend class NvmeEngine;
  explicit NvmeHandle(std::shared_ptr<NvmeRequest> r) : request_(std::move(r)) {}
  std::shared_ptr<NvmeRequest> request_;
};

class NvmeEngine {
 public:
  // Removes stale swap files of dead processes from the directories, then
  // creates its own, nameless (swap_dir.h); throws NvmeError on bad
  // options, a missing or read-only directory, no io_uring, or no space.
  explicit NvmeEngine(NvmeOptions options);
  // Waits for every operation in flight, then closes the swap files.
  ~NvmeEngine();
  NvmeEngine(const NvmeEngine&) = delete;
  NvmeEngine& operator=(const NvmeEngine&) = delete;

  // An extent for `bytes` (>= 1) bytes; throws NvmeError when no run of
  // free blocks is long enough.
  Extent allocate(uint64_t bytes);
  // Returns the extent's blocks; its CRCs and length are forgotten.
  void free(const Extent& extent);

  // Asynchronous: starts the I/O now (up to the queue depth) and returns.
  // write: `len` <= the extent's bytes; `src` is only read. read: `len` <=
  // the length last written to the extent.
  NvmeHandle write_async(const Extent& extent, const void* src, uint64_t len);
  NvmeHandle read_async(const Extent& extent, void* dst, uint64_t len);
  // Completes the request; throws NvmeError with its first error. The
  // handle is spent afterwards.
  void wait(NvmeHandle& handle);

  // Synchronous conveniences.
  void write(const Extent& extent, const void* src, uint64_t len);
  void read(const Extent& extent, void* dst, uint64_t len);
  // Allocates, writes, and frees the extent again if the write fails.
  Extent write(const void* src, uint64_t len);

  // The bytes last written to `extent` (0 when none).
  uint64_t length(const Extent& extent) const;
  NvmeStats stats() const;
  uint64_t block_size() const;
  uint64_t total_blocks() const;
  uint64_t free_blocks() const;
  // The names the swap files were created under (for messages: they are
  // unlinked at once) and their descriptors, in file order.
  std::vector<std::string> files() const;
  std::vector<int> file_descriptors() const;
  // Where block `block` (global index) lives: file index and byte offset.
  std::pair<size_t, uint64_t> locate(uint64_t block) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace memwall::runtime
